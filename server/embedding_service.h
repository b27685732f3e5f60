// vocabd.v1.EmbeddingService. Lookup is cheap: it runs inline on the
// reactor thread (Embed, and each request of EmbedStream:
// server/embed_stream_reactor.h).
#ifndef VOCABD_SERVER_EMBEDDING_SERVICE_H_
#define VOCABD_SERVER_EMBEDDING_SERVICE_H_

#include "absl/status/status.h"
#include "server/service_context.h"
#include "vocabd/v1/embedding.grpc.pb.h"

namespace vocabd {

class EmbeddingServiceImpl final : public v1::EmbeddingService::CallbackService {
 public:
  explicit EmbeddingServiceImpl(const ServiceContext& context) : context_(context) {}

  grpc::ServerUnaryReactor* Embed(grpc::CallbackServerContext* context,
                                  const v1::EmbedRequest* request,
                                  v1::EmbedResponse* response) override;
  grpc::ServerBidiReactor<v1::EmbedRequest, v1::EmbedResponse>* EmbedStream(
      grpc::CallbackServerContext* context) override;

 private:
  friend class EmbedStreamReactor;  // answers each stream request with DoEmbed
  absl::Status DoEmbed(const v1::EmbedRequest& request, v1::EmbedResponse* response);
  ServiceContext context_;
};

}  // namespace vocabd

#endif  // VOCABD_SERVER_EMBEDDING_SERVICE_H_
