#include "server/scoring_service.h"

#include <chrono>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/tensor_codec.h"
#include "lib/happens_before.h"
#include "lib/status_macros.h"
#include "server/call_tracker.h"
#include "server/grpc_status.h"
#include "server/output_dtype.h"
#include "server/score_stream_reactor.h"

namespace vocabd {
namespace {

float TemperatureOrDefault(float t) { return t == 0.0f ? 1.0f : t; }

}  // namespace

absl::StatusOr<HiddenRows> DecodeHidden(const v1::Tensor& tensor) {
  if (tensor.shape_size() != 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("hidden.shape must be [num_rows, hidden_size], got ", tensor.shape_size(),
                     " dims"));
  }
  HiddenRows out;
  ASSIGN_OR_RETURN(out.values, DecodeFloatTensor(tensor, "hidden"));
  out.rows = tensor.shape(0);
  out.width = tensor.shape(1);
  return out;
}

ScoreInput ScoreInputFromProto(const v1::ScoreRequest& request, const HiddenRows& hidden) {
  ScoreInput input;
  input.head.hidden = hidden.values.data();
  input.head.rows = hidden.rows;
  input.head.width = hidden.width;
  input.head.apply_final_norm = !request.has_apply_final_norm() || request.apply_final_norm();
  input.head.temperature = TemperatureOrDefault(request.temperature());
  input.head.vocab_limit = request.vocab_limit();
  input.target_ids.assign(request.target_ids().begin(), request.target_ids().end());
  input.top_k = request.top_k();
  return input;
}

void ScoreOutputToProto(const ScoreOutput& output, bool has_targets, const Model& model,
                        const v1::ScoreRequest& request, v1::ScoreResponse* response) {
  for (const RowScoreResult& row : output.rows) {
    v1::RowScore* out = response->add_rows();
    out->set_logsumexp(row.logsumexp);
    if (has_targets) {
      out->set_target_logprob(row.target_logprob);
      out->set_target_rank(row.target_rank);
    }
    for (const auto& [id, logprob] : row.top_k) {
      v1::TokenLogprob* entry = out->add_top_k();
      entry->set_token_id(id);
      entry->set_logprob(logprob);
    }
  }
  response->set_sum_target_logprob(output.sum_target_logprob);
  response->set_num_targets(output.num_targets);
  response->set_model(model.name());
  response->set_request_id(request.request_id());
}

std::function<absl::Status()> ComputeCheck(grpc::CallbackServerContext* context,
                                           Metrics* metrics, const Model& model, int64_t rows) {
  const bool batched = model.batcher() != nullptr;
  return [context, metrics, batched, rows]() -> absl::Status {
    if (context->IsCancelled()) {
      if (metrics != nullptr) metrics->RecordSkippedWork("cancelled");
      return absl::CancelledError("call cancelled or deadline exceeded before compute");
    }
    if (context->deadline() < std::chrono::system_clock::now()) {
      if (metrics != nullptr) metrics->RecordSkippedWork("deadline_exceeded");
      return absl::DeadlineExceededError("deadline exceeded while queued");
    }
    // Batched GEMM sizes are reported by the batcher's on_batch hook.
    if (!batched && metrics != nullptr) metrics->ObserveBatchSize(rows);
    return absl::OkStatus();
  };
}

grpc::ServerUnaryReactor* ScoringServiceImpl::ComputeLogits(
    grpc::CallbackServerContext* context, const v1::ComputeLogitsRequest* request,
    v1::ComputeLogitsResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (RejectIfNotAdmitted(context_.tracker, context, *request, reactor)) return reactor;
  auto model = context_.registry->Get(request->model());
  if (!model.ok()) {
    reactor->Finish(ToGrpcStatus(model.status()));
    return reactor;
  }
  auto output_dtype = OutputDType(request->output_dtype());
  if (!output_dtype.ok()) {
    reactor->Finish(ToGrpcStatus(output_dtype.status()));
    return reactor;
  }
  auto hidden = DecodeHidden(request->hidden());
  if (!hidden.ok()) {
    reactor->Finish(ToGrpcStatus(hidden.status()));
    return reactor;
  }
  auto hidden_rows = std::make_shared<HiddenRows>(std::move(*hidden));
  HeadInput input;
  input.hidden = hidden_rows->values.data();
  input.rows = hidden_rows->rows;
  input.width = hidden_rows->width;
  input.apply_final_norm = !request->has_apply_final_norm() || request->apply_final_norm();
  input.temperature = TemperatureOrDefault(request->temperature());
  input.vocab_limit = request->vocab_limit();
  const Model& m = **model;
  // `done` runs on a compute thread (or inline on a rejection) and finishes
  // the reactor; it keeps the model and the decoded rows alive until then.
  m.ComputeLogitsAsync(
      input, request->log_softmax(), ComputeCheck(context, context_.metrics, m, input.rows),
      [model = *model, hidden_rows, request, response, reactor, dtype = *output_dtype](
          absl::Status status, std::vector<float> logits) {
        if (status.ok()) {
          *response->mutable_logits() =
              EncodeFloatTensor(logits, {hidden_rows->rows, model->config().vocab_size}, dtype);
          response->set_model(model->name());
          response->set_request_id(request->request_id());
        }
        reactor->Finish(ToGrpcStatus(status));
      });
  return reactor;
}

grpc::ServerUnaryReactor* ScoringServiceImpl::Score(grpc::CallbackServerContext* context,
                                                    const v1::ScoreRequest* request,
                                                    v1::ScoreResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (RejectIfNotAdmitted(context_.tracker, context, *request, reactor)) return reactor;
  auto model = context_.registry->Get(request->model());
  if (!model.ok()) {
    reactor->Finish(ToGrpcStatus(model.status()));
    return reactor;
  }
  auto hidden = DecodeHidden(request->hidden());
  if (!hidden.ok()) {
    reactor->Finish(ToGrpcStatus(hidden.status()));
    return reactor;
  }
  auto hidden_rows = std::make_shared<HiddenRows>(std::move(*hidden));
  const ScoreInput input = ScoreInputFromProto(*request, *hidden_rows);
  const Model& m = **model;
  m.ScoreAsync(input, ComputeCheck(context, context_.metrics, m, input.head.rows),
               [model = *model, hidden_rows, request, response, reactor](absl::Status status,
                                                                         ScoreOutput output) {
                 if (status.ok()) {
                   ScoreOutputToProto(output, request->target_ids_size() > 0, *model, *request,
                                      response);
                 }
                 reactor->Finish(ToGrpcStatus(status));
               });
  return reactor;
}

grpc::ServerBidiReactor<v1::ScoreRequest, v1::ScoreResponse>* ScoringServiceImpl::ScoreStream(
    grpc::CallbackServerContext* context) {
  auto* reactor = new ScoreStreamReactor(context_, context);
  HappensBefore(reactor);  // gRPC runs its callbacks on other threads
  return reactor;
}

}  // namespace vocabd
