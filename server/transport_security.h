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
//                         rotation); otherwise UNAUTHENTICATED. Such calls
//                         end in the processor, before any interceptor,
//                         so the processor reports them (AuthRefusalHook).
// Token auth needs TLS: bearer tokens must not cross the network in
// plaintext (and gRPC's insecure credentials cannot run a processor).
#ifndef VOCABD_SERVER_TRANSPORT_SECURITY_H_
#define VOCABD_SERVER_TRANSPORT_SECURITY_H_

#include <functional>
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

// Called (on a gRPC thread) for every call the token check refuses with
// UNAUTHENTICATED: the call's method path and the seconds the check took.
using AuthRefusalHook = std::function<void(const std::string& method, double seconds)>;

// Insecure credentials when TLS is off; otherwise SSL credentials (with
// client verification for mTLS) carrying the token processor when a token
// file is given (`on_refused` may be empty). NOT_FOUND / INVALID_ARGUMENT
// naming the file when a file is missing, empty or has no token.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const TransportSecurityOptions& options, AuthRefusalHook on_refused = nullptr);

// Reads a token file (see above). INVALID_ARGUMENT when it holds no token.
absl::StatusOr<std::vector<std::string>> ReadTokenFile(const std::string& path);

// Accepts calls whose `authorization` metadata is `Bearer <t>` for one of
// `tokens` (constant-time compare); health checks pass without a token.
class BearerTokenAuthProcessor final : public grpc::AuthMetadataProcessor {
 public:
  BearerTokenAuthProcessor(std::vector<std::string> tokens, AuthRefusalHook on_refused);
  // gRPC destroys the processor (on one of its threads) after the last
  // Process call.
  ~BearerTokenAuthProcessor() override;
  bool IsBlocking() const override { return false; }
  grpc::Status Process(const InputMetadata& auth_metadata, grpc::AuthContext* context,
                       OutputMetadata* consumed_auth_metadata,
                       OutputMetadata* response_metadata) override;

 private:
  // The token check; Process() reports its refusals.
  grpc::Status Check(const InputMetadata& auth_metadata, const std::string& path,
                     OutputMetadata* consumed_auth_metadata) const;

  std::vector<std::string> tokens_;
  AuthRefusalHook on_refused_;
};

}  // namespace vocabd

#endif  // VOCABD_SERVER_TRANSPORT_SECURITY_H_
