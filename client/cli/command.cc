// CommandContext: vocabctl's global options, parsing, client creation and
// dispatch to the registered subcommand (see client/cli/command.h).
#include "client/cli/command.h"

#include <chrono>
#include <iostream>

#include "absl/status/status.h"

namespace vocabd::cli {

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
    return code == 0 ? kExitOk : kExitUsage;
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
    std::cerr << "error: " << absl::StatusCodeToString(result.status().code()) << ": "
              << result.status().message() << "\n";
    return kExitError;
  }
  return *result;
}

}  // namespace vocabd::cli
