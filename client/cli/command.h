// vocabctl's subcommand scheme (see client/README.md): the global options
// every subcommand shares (--target, --timeout, --json, --model, TLS and
// bearer token), the exit codes, and CommandContext, with which each
// subcommand registers how it is checked and run. main() (client/vocabctl.cc)
// only registers the subcommands and calls CommandContext::Main, which
// parses, connects and dispatches.
#ifndef VOCABD_CLIENT_CLI_COMMAND_H_
#define VOCABD_CLIENT_CLI_COMMAND_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

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

class CommandContext {
 public:
  // Runs the subcommand: the process exit code, or a non-OK status printed
  // as "error: <CODE>: <message>" (exit 1).
  using Run = std::function<absl::StatusOr<int>(VocabdClient& client, const GlobalOptions& global)>;
  // Cross-option rules CLI11 cannot express: throws CLI::ValidationError
  // (reported as a usage error, exit 2).
  using Check = std::function<void()>;

  // Makes `app` take exactly one subcommand, global options also after it,
  // and adds the global options.
  explicit CommandContext(CLI::App& app);

  // Registers `command`, a subcommand of the app: `check` (if set) runs right
  // after parsing when the command was given, then `run`.
  void Add(CLI::App* command, Run run, Check check = nullptr);

  // Parses the command line, checks it, connects to --target and runs the
  // subcommand given. Returns the process exit code.
  int Main(int argc, char** argv);

 private:
  struct Command {
    CLI::App* app;
    Run run;
    Check check;
  };

  CLI::App& app_;
  GlobalOptions global_;
  std::vector<Command> commands_;
};

}  // namespace vocabd::cli

#endif  // VOCABD_CLIENT_CLI_COMMAND_H_
