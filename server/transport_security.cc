#include "server/transport_security.h"

#include <chrono>
#include <fstream>
#include <sstream>

#include <openssl/crypto.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "lib/core/happens_before.h"

namespace vocabd {
namespace {

absl::StatusOr<std::string> ReadFile(const std::string& path, const std::string& flag) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(flag, " = '", path, "': cannot open"));
  std::stringstream ss;
  ss << in.rdbuf();
  if (ss.str().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(flag, " = '", path, "' is empty"));
  }
  return ss.str();
}

constexpr char kHealthPathPrefix[] = "/grpc.health.v1.Health/";

}  // namespace

absl::Status TransportSecurityOptions::Validate() const {
  if (tls_cert_file.empty() != tls_key_file.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--tls-cert = '", tls_cert_file, "' and --tls-key = '", tls_key_file,
                     "' must be given together"));
  }
  if (!tls() && !tls_client_ca_file.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--tls-client-ca = '", tls_client_ca_file, "' needs --tls-cert and --tls-key"));
  }
  if (!tls() && !auth_token_file.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--auth-token-file = '", auth_token_file,
        "' needs TLS (--tls-cert and --tls-key): bearer tokens must not travel in plaintext"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> ReadTokenFile(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFile(path, "--auth-token-file");
  if (!text.ok()) return text.status();
  std::vector<std::string> tokens;
  std::istringstream lines(*text);
  std::string line;
  while (std::getline(lines, line)) {
    std::string token(absl::StripAsciiWhitespace(line));
    if (token.empty() || token[0] == '#') continue;
    tokens.push_back(std::move(token));
  }
  if (tokens.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--auth-token-file = '", path, "' holds no token"));
  }
  return tokens;
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const TransportSecurityOptions& options, AuthRefusalHook on_refused) {
  if (absl::Status s = options.Validate(); !s.ok()) return s;
  if (!options.tls()) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions ssl;
  grpc::SslServerCredentialsOptions::PemKeyCertPair pair;
  absl::StatusOr<std::string> key = ReadFile(options.tls_key_file, "--tls-key");
  if (!key.ok()) return key.status();
  absl::StatusOr<std::string> cert = ReadFile(options.tls_cert_file, "--tls-cert");
  if (!cert.ok()) return cert.status();
  pair.private_key = *key;
  pair.cert_chain = *cert;
  ssl.pem_key_cert_pairs.push_back(std::move(pair));
  if (!options.tls_client_ca_file.empty()) {
    absl::StatusOr<std::string> ca = ReadFile(options.tls_client_ca_file, "--tls-client-ca");
    if (!ca.ok()) return ca.status();
    ssl.pem_root_certs = *ca;
    ssl.client_certificate_request = GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
  } else {
    ssl.client_certificate_request = GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE;
  }
  std::shared_ptr<grpc::ServerCredentials> credentials = grpc::SslServerCredentials(ssl);
  if (!options.auth_token_file.empty()) {
    absl::StatusOr<std::vector<std::string>> tokens = ReadTokenFile(options.auth_token_file);
    if (!tokens.ok()) return tokens.status();
    credentials->SetAuthMetadataProcessor(
        std::make_shared<BearerTokenAuthProcessor>(std::move(*tokens), std::move(on_refused)));
  }
  return credentials;
}

BearerTokenAuthProcessor::BearerTokenAuthProcessor(std::vector<std::string> tokens,
                                                   AuthRefusalHook on_refused)
    : tokens_(std::move(tokens)), on_refused_(std::move(on_refused)) {
  HappensBefore(this);  // Process runs on gRPC's threads
}

BearerTokenAuthProcessor::~BearerTokenAuthProcessor() { HappensAfter(this); }

grpc::Status BearerTokenAuthProcessor::Process(const InputMetadata& auth_metadata,
                                               grpc::AuthContext* context,
                                               OutputMetadata* consumed_auth_metadata,
                                               OutputMetadata* response_metadata) {
  CallbackScope scope(this);
  const auto start = std::chrono::steady_clock::now();
  std::string path;
  if (auto it = auth_metadata.find(":path"); it != auth_metadata.end()) {
    path.assign(it->second.data(), it->second.size());
  }
  grpc::Status status = Check(auth_metadata, path, consumed_auth_metadata);
  if (!status.ok() && on_refused_) {
    on_refused_(path,
                std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return status;
}

grpc::Status BearerTokenAuthProcessor::Check(const InputMetadata& auth_metadata,
                                             const std::string& path,
                                             OutputMetadata* consumed_auth_metadata) const {
  if (absl::StartsWith(path, kHealthPathPrefix)) return grpc::Status::OK;
  auto it = auth_metadata.find("authorization");
  if (it == auth_metadata.end()) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        "missing authorization metadata: send 'authorization: Bearer <token>'");
  }
  const std::string value(it->second.data(), it->second.size());
  constexpr char kBearer[] = "Bearer ";
  if (!absl::StartsWith(value, kBearer)) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        "authorization metadata must have the form 'Bearer <token>'");
  }
  const std::string token = value.substr(sizeof(kBearer) - 1);
  bool match = false;
  for (const std::string& allowed : tokens_) {
    // Constant time for equal lengths; lengths are not secret.
    if (allowed.size() == token.size() &&
        CRYPTO_memcmp(allowed.data(), token.data(), token.size()) == 0) {
      match = true;
    }
  }
  if (!match) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "bearer token is not accepted");
  }
  consumed_auth_metadata->insert({"authorization", value});
  return grpc::Status::OK;
}

}  // namespace vocabd
