#include "server/scoring_service.h"

#include <chrono>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/tensor_codec.h"
#include "lib/status_macros.h"
#include "server/grpc_status.h"
#include "server/output_dtype.h"
#include "server/unimplemented.h"

namespace vocabd {
namespace {

// Decoded `hidden` [rows, width] as F32.
struct HiddenRows {
  std::vector<float> values;
  int64_t rows = 0;
  int64_t width = 0;
};

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

float TemperatureOrDefault(float t) { return t == 0.0f ? 1.0f : t; }

}  // namespace

void ScoringServiceImpl::RunOnPool(grpc::CallbackServerContext* context,
                                   grpc::ServerUnaryReactor* reactor,
                                   std::function<absl::Status()> work) {
  absl::Status submitted = context_.compute_pool->Submit(
      [context, reactor, work = std::move(work)]() {
        if (context->IsCancelled()) {
          reactor->Finish(grpc::Status(grpc::StatusCode::CANCELLED,
                                       "call cancelled or deadline exceeded before compute"));
          return;
        }
        if (context->deadline() < std::chrono::system_clock::now()) {
          reactor->Finish(grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                                       "deadline exceeded while queued"));
          return;
        }
        reactor->Finish(ToGrpcStatus(work()));
      });
  if (!submitted.ok()) reactor->Finish(ToGrpcStatus(submitted));
}

grpc::ServerUnaryReactor* ScoringServiceImpl::ComputeLogits(
    grpc::CallbackServerContext* context, const v1::ComputeLogitsRequest* request,
    v1::ComputeLogitsResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
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
  RunOnPool(context, reactor,
            [model = *model, hidden_rows, request, response, dtype = *output_dtype]() {
              HeadInput input;
              input.hidden = hidden_rows->values.data();
              input.rows = hidden_rows->rows;
              input.width = hidden_rows->width;
              input.apply_final_norm =
                  !request->has_apply_final_norm() || request->apply_final_norm();
              input.temperature = TemperatureOrDefault(request->temperature());
              input.vocab_limit = request->vocab_limit();
              std::vector<float> logits;
              RETURN_IF_ERROR(model->ComputeLogits(input, request->log_softmax(), &logits));
              *response->mutable_logits() = EncodeFloatTensor(
                  logits, {input.rows, model->config().vocab_size}, dtype);
              response->set_model(model->name());
              response->set_request_id(request->request_id());
              return absl::OkStatus();
            });
  return reactor;
}

grpc::ServerUnaryReactor* ScoringServiceImpl::Score(grpc::CallbackServerContext* context,
                                                    const v1::ScoreRequest* request,
                                                    v1::ScoreResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
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
  RunOnPool(context, reactor, [model = *model, hidden_rows, request, response]() {
    ScoreInput input;
    input.head.hidden = hidden_rows->values.data();
    input.head.rows = hidden_rows->rows;
    input.head.width = hidden_rows->width;
    input.head.apply_final_norm = !request->has_apply_final_norm() || request->apply_final_norm();
    input.head.temperature = TemperatureOrDefault(request->temperature());
    input.head.vocab_limit = request->vocab_limit();
    input.target_ids.assign(request->target_ids().begin(), request->target_ids().end());
    input.top_k = request->top_k();
    ScoreOutput output;
    RETURN_IF_ERROR(model->Score(input, &output));
    for (const RowScoreResult& row : output.rows) {
      v1::RowScore* out = response->add_rows();
      out->set_logsumexp(row.logsumexp);
      if (!input.target_ids.empty()) {
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
    response->set_model(model->name());
    response->set_request_id(request->request_id());
    return absl::OkStatus();
  });
  return reactor;
}

grpc::ServerBidiReactor<v1::ScoreRequest, v1::ScoreResponse>* ScoringServiceImpl::ScoreStream(
    grpc::CallbackServerContext* context) {
  return new UnimplementedBidiReactor<v1::ScoreRequest, v1::ScoreResponse>(
      "ScoreStream is not implemented yet (scoring issue); use Score");
}

}  // namespace vocabd
