// vocabd.v1.ScoringService. The reactor thread validates and decodes; the
// LM-head GEMM runs on the compute pool (through the model's dynamic batcher
// when enabled), whose completion callback finishes the reactor.
#ifndef VOCABD_SERVER_SCORING_SERVICE_H_
#define VOCABD_SERVER_SCORING_SERVICE_H_

#include <functional>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "lib/serving/model.h"
#include "lib/serving/request_memory.h"
#include "server/service_context.h"
#include "vocabd/v1/scoring.grpc.pb.h"

namespace vocabd {

// Decoded `hidden` [rows, width] as F32.
struct HiddenRows {
  std::vector<float> values;
  int64_t rows = 0;
  int64_t width = 0;
};

// Shared by ComputeLogits, Score and ScoreStream (no math: decoding and
// proto mapping).
// INVALID_ARGUMENT naming `hidden.shape` / `hidden` for a bad tensor.
absl::StatusOr<HiddenRows> DecodeHidden(const v1::Tensor& tensor);

// What every LM-head call needs before compute: the model (NOT_FOUND names
// it), the decoded rows (kept alive by the shared_ptr until the compute
// callback runs) and the request's head options over those rows.
struct HeadCall {
  std::shared_ptr<const Model> model;
  std::shared_ptr<HiddenRows> hidden;
  HeadInput head;
};
// Request is v1::ComputeLogitsRequest or v1::ScoreRequest (same field names:
// model, hidden, apply_final_norm, temperature, vocab_limit).
// Before decoding anything it checks the request's memory need (rows from
// hidden.shape; lib/serving/request_memory.h ComputeLogitsMemory /
// ScoreMemory) against `memory_budget` (--max-request-memory-bytes; <= 0 =
// none): RESOURCE_EXHAUSTED naming the flag and the numbers.
template <typename Request>
absl::StatusOr<HeadCall> PrepareHeadCall(const ModelRegistry& registry, const Request& request,
                                         int64_t memory_budget = 0);

// The memory a head request needs on `model` (formulas in
// lib/serving/request_memory.h); rows from hidden.shape[0].
RequestMemory HeadRequestMemory(const v1::ComputeLogitsRequest& request, const Model& model);
RequestMemory HeadRequestMemory(const v1::ScoreRequest& request, const Model& model);

// `call.hidden` must outlive the returned input's use. FAILED_PRECONDITION
// (TokenizerOf) when return_pieces asks for pieces the model cannot give.
absl::StatusOr<ScoreInput> ScoreInputFromProto(const v1::ScoreRequest& request,
                                               const HeadCall& call);
void ScoreOutputToProto(const ScoreOutput& output, bool has_targets, const Model& model,
                        const v1::ScoreRequest& request, v1::ScoreResponse* response);
// The pre-compute check of one call: CANCELLED / DEADLINE_EXCEEDED (counted
// as skipped work) drop it; records the GEMM rows when the model is unbatched.
std::function<absl::Status()> ComputeCheck(grpc::CallbackServerContext* context, Metrics* metrics,
                                           const Model& model, int64_t rows);

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
  ServiceContext context_;
};

}  // namespace vocabd

#endif  // VOCABD_SERVER_SCORING_SERVICE_H_
