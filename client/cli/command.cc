// CommandContext: vocabctl's global options, parsing, client creation and
// dispatch to the registered subcommand (see client/cli/command.h).
#include "client/cli/command.h"

#include <chrono>
#include <cstring>
#include <iostream>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace vocabd::cli {

std::string ConnectionHint(const absl::Status& status, const GlobalOptions& g) {
  // The server names the request field; vocabctl's flag for it (embed, rope,
  // rope-cache) is spelled differently.
  if (absl::StrContains(status.message(), "set allow_beyond_trained_length")) {
    return "vocabctl: pass --allow-beyond-trained-length (or --allow-beyond)";
  }
  if (absl::StrContains(status.message(), "set allow_non_finite")) {
    return "vocabctl: pass --allow-non-finite";
  }
  if (status.code() != absl::StatusCode::kUnavailable) return "";
  const bool tls = UsesTls(g);
  const absl::string_view m = status.message();
  // What gRPC's TLS client reports (grpc 1.51, OpenSSL 3):
  //   "Peer name X is not in peer certificate"  X = the target host, or
  //                                             the --tls-server-name
  //   "... certificate verify failed"           the server's certificate is
  //                                             not signed by --ca
  //   "... wrong version number"                the server is plaintext
  //   "Socket closed"                           the server ended the
  //                                             handshake: a plaintext client
  //                                             against TLS, or a TLS client
  //                                             without an accepted client
  //                                             certificate against mTLS
  if (absl::StrContains(m, "not in peer certificate")) {
    if (!g.tls_server_name.empty()) {
      return absl::StrCat("the server certificate does not name '", g.tls_server_name,
                          "' (--tls-server-name): pass a name in its subjectAltName");
    }
    return "the server certificate does not name the target host: pass --tls-server-name NAME "
           "(a name in its subjectAltName)";
  }
  const bool closed = absl::StrContains(m, "Socket closed") ||
                      absl::StrContains(m, "Connection reset") ||
                      absl::StrContains(m, "connection reset");
  if (!tls) {
    if (!closed) return "";
    return "the server may require TLS: add --tls (and --ca FILE, --tls-server-name NAME when "
           "the certificate does not name the target host)";
  }
  if (absl::StrContains(m, "wrong version number") ||
      absl::StrContains(m, "WRONG_VERSION_NUMBER")) {
    return "the server speaks plaintext: drop --tls, --ca, --cert and --key";
  }
  if (absl::StrContains(m, "certificate verify failed") ||
      absl::StrContains(m, "CERTIFICATE_VERIFY_FAILED")) {
    return g.ca.empty() ? "the server certificate is not signed by a system root CA: pass "
                          "--ca FILE (the CA that signed it)"
                        : "the server certificate is not signed by the --ca CA";
  }
  if (closed) {
    return g.cert.empty()
               ? "the server closed the TLS handshake: it may require a client certificate "
                 "(mutual TLS: pass --cert FILE --key FILE)"
               : "the server closed the TLS handshake: it did not accept the --cert client "
                 "certificate (not signed by the CA it trusts, vocabd --tls-client-ca)";
  }
  const bool handshake = absl::StrContains(m, "Handshake") || absl::StrContains(m, "handshake") ||
                         absl::StrContains(m, "SSL") || absl::StrContains(m, "ssl");
  if (handshake) {
    return "TLS handshake failed: check --ca, --cert/--key and --tls-server-name against the "
           "server's certificates";
  }
  return "";
}

bool UsesTls(const GlobalOptions& g) {
  return g.tls || !g.ca.empty() || !g.cert.empty() || !g.key.empty();
}

void PrintError(const absl::Status& status, const GlobalOptions& g, bool json) {
  const std::string hint = ConnectionHint(status, g);
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
    PrintError(result.status(), g, g.json);
    return kExitError;
  }
  return *result;
}

}  // namespace vocabd::cli
