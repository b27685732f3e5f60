// vocabd.v1.ScoringService. The reactor thread validates and decodes; the
// LM-head GEMM runs on the compute pool, which finishes the reactor.
#ifndef VOCABD_SERVER_SCORING_SERVICE_H_
#define VOCABD_SERVER_SCORING_SERVICE_H_

#include <functional>

#include "absl/status/status.h"
#include "server/service_context.h"
#include "vocabd/v1/scoring.grpc.pb.h"

namespace vocabd {

class ScoringServiceImpl final : public v1::ScoringService::CallbackService {
 public:
  explicit ScoringServiceImpl(const ServiceContext& context) : context_(context) {}

  grpc::ServerUnaryReactor* ComputeLogits(grpc::CallbackServerContext* context,
                                          const v1::ComputeLogitsRequest* request,
                                          v1::ComputeLogitsResponse* response) override;
  grpc::ServerUnaryReactor* Score(grpc::CallbackServerContext* context,
                                  const v1::ScoreRequest* request,
                                  v1::ScoreResponse* response) override;
  grpc::ServerBidiReactor<v1::ScoreRequest, v1::ScoreResponse>* ScoreStream(
      grpc::CallbackServerContext* context) override;

 private:
  // Runs `work` on the compute pool and finishes `reactor` with its status;
  // a cancelled or expired call is finished without running `work`.
  void RunOnPool(grpc::CallbackServerContext* context, grpc::ServerUnaryReactor* reactor,
                 std::function<absl::Status()> work);
  ServiceContext context_;
};

}  // namespace vocabd

#endif  // VOCABD_SERVER_SCORING_SERVICE_H_
