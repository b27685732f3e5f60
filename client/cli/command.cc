// CommandContext: vocabctl's global options, parsing, client creation and
// dispatch to the registered subcommand (see client/cli/command.h).
#include "client/cli/command.h"

#include <chrono>
#include <cstring>
#include <iostream>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/strings/match.h"

namespace vocabd::cli {

std::string ConnectionHint(const absl::Status& status, bool tls) {
  // The server names the request field; vocabctl's flag for it (embed, rope,
  // rope-cache) is spelled differently.
  if (absl::StrContains(status.message(), "set allow_beyond_trained_length")) {
    return "vocabctl: pass --allow-beyond-trained-length (or --allow-beyond)";
  }
  if (status.code() != absl::StatusCode::kUnavailable) return "";
  const absl::string_view m = status.message();
  // gRPC's TLS name check ("Peer name 127.0.0.1 is not in peer certificate").
  if (absl::StrContains(m, "not in peer certificate")) {
    return "the server certificate does not name the target host: pass --tls-server-name NAME "
           "(a name in its subjectAltName)";
  }
  // What gRPC reports when one side speaks TLS and the other plaintext: a
  // plaintext client sees the TLS server close the socket; a TLS client sees
  // a handshake failure against a plaintext server.
  const bool plaintext_vs_tls = absl::StrContains(m, "Socket closed") ||
                                absl::StrContains(m, "Connection reset") ||
                                absl::StrContains(m, "connection reset");
  const bool handshake = absl::StrContains(m, "Handshake") || absl::StrContains(m, "handshake") ||
                         absl::StrContains(m, "SSL") || absl::StrContains(m, "ssl");
  if (!tls && plaintext_vs_tls) {
    return "the server may require TLS: add --tls (and --ca FILE, --tls-server-name NAME when "
           "the certificate does not name the target host)";
  }
  if (tls && (handshake || plaintext_vs_tls)) {
    return "TLS handshake failed: the server may be plaintext (drop --tls/--ca), or its "
           "certificate does not match --ca or the target name (set --tls-server-name)";
  }
  return "";
}

void PrintError(const absl::Status& status, bool tls, bool json) {
  const std::string hint = ConnectionHint(status, tls);
  std::cerr << "error: " << absl::StatusCodeToString(status.code()) << ": " << status.message()
            << "\n";
  if (!hint.empty()) std::cerr << "hint: " << hint << "\n";
  if (json) {
    nlohmann::json error = {{"code", absl::StatusCodeToString(status.code())},
                            {"message", std::string(status.message())}};
    if (!hint.empty()) error["hint"] = hint;
    std::cout << nlohmann::json{{"error", error}}.dump() << "\n";
  }
}

CommandContext::CommandContext(CLI::App& app) : app_(app) {
  app.fallthrough();  // global options are accepted after the subcommand too
  app.require_subcommand(1);
  GlobalOptions& g = global_;
  app.add_option("--target", g.target, "server address host:port or gRPC URI")
      ->envname("VOCABD_TARGET")
      ->capture_default_str();
  app.add_option("--timeout", g.timeout_ms, "per-call deadline in milliseconds (0 = none)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_flag("--json", g.json, "machine-readable JSON output");
  app.add_option("--model", g.model, "model name (default: the server's default model)");
  app.add_flag("--tls", g.tls, "connect with TLS (implied by --ca/--cert/--key)")
      ->envname("VOCABD_TLS");
  app.add_option("--ca", g.ca, "PEM CA bundle that verifies the server (default: system roots)")
      ->envname("VOCABD_CA");
  app.add_option("--cert", g.cert, "PEM client certificate for mutual TLS (with --key)")
      ->envname("VOCABD_CERT");
  app.add_option("--key", g.key, "PEM private key for --cert")->envname("VOCABD_KEY");
  app.add_option("--tls-server-name", g.tls_server_name,
                 "name checked against the server certificate (default: the target host)")
      ->envname("VOCABD_TLS_SERVER_NAME");
  app.add_option("--token-file", g.token_file,
                 "file whose first line is a bearer token sent as 'authorization: Bearer' "
                 "(needs TLS)")
      ->envname("VOCABD_TOKEN_FILE");
  app.add_option("--token", g.token,
                 "bearer token (needs TLS); prefer env VOCABD_TOKEN or --token-file, which "
                 "do not show in `ps`")
      ->envname("VOCABD_TOKEN");
  app.add_option("--lb-policy", g.lb_policy,
                 "client-side load balancing: round_robin (with a dns:/// target) or "
                 "pick_first")
      ->check(CLI::IsMember({"round_robin", "pick_first"}))
      ->envname("VOCABD_LB_POLICY");
}

int CommandContext::Main(int argc, char** argv) {
  try {
    app_.parse(argc, argv);
    for (const Command& c : commands_) {
      if (c.app->parsed() && c.check) c.check();
    }
  } catch (const CLI::ParseError& e) {
    const int code = app_.exit(e);
    if (code == 0) return kExitOk;
    // --json: usage errors also as one JSON object on stdout (the flag may
    // not have been parsed yet, so look at argv).
    for (int i = 1; i < argc; ++i) {
      if (std::strcmp(argv[i], "--json") == 0) {
        std::cout << nlohmann::json{{"error", {{"code", "USAGE"}, {"message", e.what()}}}}.dump()
                  << "\n";
        break;
      }
    }
    return kExitUsage;
  }

  const GlobalOptions& g = global_;
  VocabdClient::Options client_options;
  client_options.target = g.target;
  client_options.timeout = std::chrono::milliseconds(g.timeout_ms);
  client_options.tls = g.tls;
  client_options.ca_file = g.ca;
  client_options.cert_file = g.cert;
  client_options.key_file = g.key;
  client_options.tls_server_name = g.tls_server_name;
  client_options.token_file = g.token_file;
  client_options.lb_policy = g.lb_policy;
  client_options.token = g.token;
  auto client = VocabdClient::Create(client_options);
  absl::StatusOr<int> result = kExitUsage;
  if (!client.ok()) {
    result = client.status();
  } else {
    for (const Command& c : commands_) {
      if (c.app->parsed()) {
        result = c.run(**client, g);
        break;
      }
    }
  }
  if (!result.ok()) {
    const bool tls = g.tls || !g.ca.empty() || !g.cert.empty() || !g.key.empty();
    PrintError(result.status(), tls, g.json);
    return kExitError;
  }
  return *result;
}

}  // namespace vocabd::cli
