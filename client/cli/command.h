// vocabctl's subcommand scheme (see client/README.md): the global options
// every subcommand shares (--target, --timeout, --json, --model, TLS and
// bearer token), the exit codes, and CommandContext, with which each
// subcommand registers its options, check and run. main() (client/vocabctl.cc)
// only registers the subcommands and calls CommandContext::Main, which
// parses, connects and dispatches.
#ifndef VOCABD_CLIENT_CLI_COMMAND_H_
#define VOCABD_CLIENT_CLI_COMMAND_H_

#include <CLI/CLI.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "client/vocabd_client.h"

namespace vocabd::cli {

// Exit codes: 0 success (for `health`: only when SERVING), 1 an RPC or I/O
// failed (stderr: "error: <CODE>: <message>"), 2 bad command-line usage.
inline constexpr int kExitOk = 0;
inline constexpr int kExitError = 1;
inline constexpr int kExitUsage = 2;

// Options accepted before or after any subcommand.
struct GlobalOptions {
  std::string target = "127.0.0.1:50051";
  int64_t timeout_ms = 30000;
  bool json = false;
  std::string model;
  // Connection (see VocabdClient::Options).
  bool tls = false;
  std::string ca, cert, key, tls_server_name, token, token_file, lb_policy;
};

// True when the connection uses TLS (--tls, or any of --ca/--cert/--key).
bool UsesTls(const GlobalOptions& g);

// A hint for a failed call, else "": for an UNAVAILABLE status that looks
// like a TLS mismatch, what to change given the connection options `g`
// (plaintext vs TLS, the server certificate's CA or name -- naming a
// --tls-server-name that does not match --, a client certificate an mTLS
// server requires or refused); for a request flag the server's message
// names by its field name, vocabctl's flag.
std::string ConnectionHint(const absl::Status& status, const GlobalOptions& g);

// "error: <CODE>: <message>" (+ "hint: ...") on stderr; with json also
// {"error": {"code": "<CODE>", "message": "...", "hint": "..."}} on stdout.
void PrintError(const absl::Status& status, const GlobalOptions& g, bool json);

// For subcommands that take no options of their own.
struct NoOptions {};

class CommandContext {
 public:
  // Runs a subcommand: the process exit code, or a non-OK status printed as
  // "error: <CODE>: <message>" (exit 1).
  template <typename Options>
  using RunFn = absl::StatusOr<int> (*)(VocabdClient& client, const GlobalOptions& global,
                                        const Options& options);
  // Cross-option rules CLI11 cannot express: throws CLI::ValidationError
  // (reported as a usage error, exit 2).
  template <typename Options>
  using CheckFn = void (*)(const Options& options);

  // Makes `app` take exactly one subcommand, global options also after it,
  // and adds the global options.
  explicit CommandContext(CLI::App& app);

  // Adds subcommand `name` to `app` with a new Options object (owned here, so
  // it outlives parsing and the run) for the caller to bind the subcommand's
  // options to. When the subcommand is given, `check` (if set) runs right
  // after parsing, then `run`.
  template <typename Options>
  std::pair<CLI::App*, Options*> AddCommand(CLI::App& app, const std::string& name,
                                            const std::string& description, RunFn<Options> run,
                                            CheckFn<Options> check = nullptr) {
    auto options = std::make_shared<Options>();
    Options* o = options.get();
    CLI::App* command = app.add_subcommand(name, description);
    Command& c = commands_.emplace_back();
    c.app = command;
    c.run = [o, run](VocabdClient& client, const GlobalOptions& global) {
      return run(client, global, *o);
    };
    if (check != nullptr) c.check = [o, check] { check(*o); };
    c.options = std::move(options);
    return {command, o};
  }

  // Parses the command line, checks it, connects to --target and runs the
  // subcommand given. Returns the process exit code.
  int Main(int argc, char** argv);

 private:
  struct Command {
    CLI::App* app = nullptr;
    std::function<absl::StatusOr<int>(VocabdClient&, const GlobalOptions&)> run;
    std::function<void()> check;
    std::shared_ptr<void> options;
  };

  CLI::App& app_;
  GlobalOptions global_;
  std::vector<Command> commands_;
};

}  // namespace vocabd::cli

#endif  // VOCABD_CLIENT_CLI_COMMAND_H_
