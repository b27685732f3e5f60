// Server transport security: TLS / mutual TLS from PEM files and bearer-token
// authentication checked by a grpc::AuthMetadataProcessor.
//
//   cert + key            TLS; plaintext clients cannot connect
//   + client_ca           mutual TLS: clients must present a certificate
//                         signed by this CA (others fail the handshake)
//   + auth_token_file     every call except grpc.health.v1.Health/* must send
//                         `authorization: Bearer <token>` with a token listed
//                         in the file (one per line; blank lines and lines
//                         starting with '#' ignored; several lines allow
//                         rotation); otherwise UNAUTHENTICATED.
// Token auth needs TLS: bearer tokens must not cross the network in
// plaintext (and gRPC's insecure credentials cannot run a processor).
#ifndef VOCABD_SERVER_TRANSPORT_SECURITY_H_
#define VOCABD_SERVER_TRANSPORT_SECURITY_H_

#include <memory>
#include <string>
#include <vector>

#include <grpcpp/security/auth_metadata_processor.h>
#include <grpcpp/security/server_credentials.h>

#include "absl/status/statusor.h"

namespace vocabd {

struct TransportSecurityOptions {
  std::string tls_cert_file;       // PEM certificate chain (--tls-cert)
  std::string tls_key_file;        // PEM private key (--tls-key)
  std::string tls_client_ca_file;  // PEM CA bundle for client certs (--tls-client-ca)
  std::string auth_token_file;     // bearer tokens (--auth-token-file)

  bool tls() const { return !tls_cert_file.empty(); }
  // INVALID_ARGUMENT naming the flag: cert without key (or the reverse),
  // client CA or token file without TLS.
  absl::Status Validate() const;
};

// Insecure credentials when TLS is off; otherwise SSL credentials (with
// client verification for mTLS) carrying the token processor when a token
// file is given. NOT_FOUND / INVALID_ARGUMENT naming the file when a file is
// missing, empty or has no token.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const TransportSecurityOptions& options);

// Reads a token file (see above). INVALID_ARGUMENT when it holds no token.
absl::StatusOr<std::vector<std::string>> ReadTokenFile(const std::string& path);

// Accepts calls whose `authorization` metadata is `Bearer <t>` for one of
// `tokens` (constant-time compare); health checks pass without a token.
class BearerTokenAuthProcessor final : public grpc::AuthMetadataProcessor {
 public:
  explicit BearerTokenAuthProcessor(std::vector<std::string> tokens);
  // gRPC destroys the processor (on one of its threads) after the last
  // Process call.
  ~BearerTokenAuthProcessor() override;
  bool IsBlocking() const override { return false; }
  grpc::Status Process(const InputMetadata& auth_metadata, grpc::AuthContext* context,
                       OutputMetadata* consumed_auth_metadata,
                       OutputMetadata* response_metadata) override;

 private:
  std::vector<std::string> tokens_;
};

}  // namespace vocabd

#endif  // VOCABD_SERVER_TRANSPORT_SECURITY_H_
