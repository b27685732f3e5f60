#include "server/scoring_service.h"

#include <chrono>
#include <memory>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "proto/tensor_codec.h"
#include "lib/core/dtype.h"
#include "lib/core/happens_before.h"
#include "lib/core/shape.h"
#include "lib/core/status_macros.h"
#include "server/call_tracker.h"
#include "server/grpc_status.h"
#include "server/handler_guard.h"
#include "server/output_dtype.h"
#include "server/response_size.h"
#include "server/score_stream_reactor.h"
#include "server/tokenizer_service.h"

namespace vocabd {
namespace {

float TemperatureOrDefault(float t) { return t == 0.0f ? 1.0f : t; }

}  // namespace

absl::StatusOr<HiddenRows> DecodeHidden(const v1::Tensor& tensor) {
  if (tensor.shape_size() != 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "hidden.shape must be [num_rows, hidden_size], got ", tensor.shape_size(), " dims"));
  }
  HiddenRows out;
  ASSIGN_OR_RETURN(out.values, DecodeFloatTensor(tensor, "hidden"));
  out.rows = tensor.shape(0);
  out.width = tensor.shape(1);
  return out;
}

namespace {

int64_t DeclaredRows(const v1::Tensor& hidden) {
  return hidden.shape_size() == 2 ? hidden.shape(0) : 0;
}

}  // namespace

RequestMemory HeadRequestMemory(const v1::ComputeLogitsRequest& request, const Model& model) {
  auto dtype = OutputDType(request.output_dtype());
  return ComputeLogitsMemory(DeclaredRows(request.hidden()), model.config().hidden_size,
                             model.config().vocab_size, model.head_slice_rows(),
                             dtype.ok() ? static_cast<int64_t>(DTypeSize(*dtype)) : 4);
}

RequestMemory HeadRequestMemory(const v1::ScoreRequest& request, const Model& model) {
  return ScoreMemory(DeclaredRows(request.hidden()), model.config().hidden_size,
                     model.config().vocab_size, model.head_slice_rows(), request.top_k(),
                     request.candidate_ids_size(),
                     request.return_pieces() ? model.max_piece_bytes() : -1);
}

template <typename Request>
absl::StatusOr<HeadCall> PrepareHeadCall(const ModelRegistry& registry, const Request& request,
                                         int64_t memory_budget) {
  HeadCall call;
  ASSIGN_OR_RETURN(call.model, registry.Get(request.model()));
  if (request.hidden().shape_size() != 2) {
    return absl::InvalidArgumentError(absl::StrCat("hidden.shape must be [num_rows, hidden_size], got ",
                                                   request.hidden().shape_size(), " dims"));
  }
  RETURN_IF_ERROR(CheckRequestMemory(HeadRequestMemory(request, *call.model), memory_budget));
  ASSIGN_OR_RETURN(HiddenRows hidden, DecodeHidden(request.hidden()));
  call.hidden = std::make_shared<HiddenRows>(std::move(hidden));
  call.head.hidden = call.hidden->values.data();
  call.head.rows = call.hidden->rows;
  call.head.width = call.hidden->width;
  call.head.apply_final_norm = !request.has_apply_final_norm() || request.apply_final_norm();
  call.head.temperature = TemperatureOrDefault(request.temperature());
  call.head.vocab_limit = request.vocab_limit();
  call.head.allow_non_finite = request.allow_non_finite();
  return call;
}
template absl::StatusOr<HeadCall> PrepareHeadCall(const ModelRegistry&,
                                                  const v1::ComputeLogitsRequest&, int64_t);
template absl::StatusOr<HeadCall> PrepareHeadCall(const ModelRegistry&, const v1::ScoreRequest&,
                                                  int64_t);

absl::StatusOr<ScoreInput> ScoreInputFromProto(const v1::ScoreRequest& request,
                                               const HeadCall& call) {
  if (request.return_pieces()) RETURN_IF_ERROR(TokenizerOf(*call.model).status());
  ScoreInput input;
  input.head = call.head;
  input.target_ids.assign(request.target_ids().begin(), request.target_ids().end());
  input.top_k = request.top_k();
  input.candidate_ids.assign(request.candidate_ids().begin(), request.candidate_ids().end());
  return input;
}

void ScoreOutputToProto(const ScoreOutput& output, bool has_targets, const Model& model,
                        const v1::ScoreRequest& request, v1::ScoreResponse* response) {
  // ScoreInputFromProto refused return_pieces without a tokenizer.
  const Tokenizer* pieces = request.return_pieces() ? model.tokenizer() : nullptr;
  auto add = [pieces](google::protobuf::RepeatedPtrField<v1::TokenLogprob>* list, int64_t id,
                      float logprob) {
    v1::TokenLogprob* entry = list->Add();
    entry->set_token_id(id);
    entry->set_logprob(logprob);
    if (pieces != nullptr) {
      entry->set_piece(pieces->Piece(static_cast<int32_t>(id)));
      entry->set_token_bytes(pieces->TokenBytes(static_cast<int32_t>(id)));
    }
  };
  for (size_t r = 0; r < output.rows.size(); ++r) {
    const RowScoreResult& row = output.rows[r];
    v1::RowScore* out = response->add_rows();
    out->set_logsumexp(row.logsumexp);
    if (has_targets) {
      out->set_target_logprob(row.target_logprob);
      out->set_target_rank(row.target_rank);
      if (pieces != nullptr) {
        const auto target = static_cast<int32_t>(request.target_ids(static_cast<int>(r)));
        out->set_target_piece(pieces->Piece(target));
        out->set_target_token_bytes(pieces->TokenBytes(target));
      }
    }
    for (const auto& [id, logprob] : row.top_k) add(out->mutable_top_k(), id, logprob);
    for (size_t c = 0; c < row.candidate_logprobs.size(); ++c) {
      add(out->mutable_candidates(), request.candidate_ids(static_cast<int>(c)),
          row.candidate_logprobs[c]);
    }
  }
  response->set_sum_target_logprob(output.sum_target_logprob);
  response->set_num_targets(output.num_targets);
  response->set_model(model.name());
  response->set_request_id(request.request_id());
}

std::function<absl::Status()> ComputeCheck(grpc::CallbackServerContext* context, Metrics* metrics,
                                           const Model& model, int64_t rows) {
  const bool batched = model.batcher() != nullptr;
  return [context, metrics, batched, rows]() -> absl::Status {
    RETURN_IF_ERROR(CheckCallWanted(context, metrics, "while queued"));
    // Batched GEMM sizes are reported by the batcher's on_batch hook.
    if (!batched && metrics != nullptr) metrics->ObserveBatchSize(rows);
    return absl::OkStatus();
  };
}

grpc::ServerUnaryReactor* ScoringServiceImpl::ComputeLogits(grpc::CallbackServerContext* context,
                                                            const v1::ComputeLogitsRequest* request,
                                                            v1::ComputeLogitsResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (RejectIfNotAdmitted(context_.tracker, context, *request, reactor)) return reactor;
  // Any error before the compute call (or an exception anywhere in this
  // thread's part) finishes here; after it, `done` finishes.
  bool dispatched = false;
  absl::Status status = CatchAll("ComputeLogits", nullptr, [&]() -> absl::Status {
    ASSIGN_OR_RETURN(DType output_dtype, OutputDType(request->output_dtype()));
    ASSIGN_OR_RETURN(HeadCall call,
                     PrepareHeadCall(*context_.registry, *request, context_.max_request_memory_bytes));
    const Model& m = *call.model;
    const int64_t vocab = m.config().vocab_size;
    const int64_t dtype_size = static_cast<int64_t>(DTypeSize(output_dtype));
    RETURN_IF_ERROR(CheckResponseBytes(
        SaturatingMul(call.head.rows, vocab, dtype_size),
        absl::StrCat(call.head.rows, " rows x vocab_size ", vocab, " x ",
                     std::string(DTypeName(output_dtype))),
        context_.max_send_message_bytes));
    // The response tensor is sized once, when the first slice of logits rows
    // is ready (after the model validated the call); each slice is encoded
    // straight into it (no whole-call logits copy).
    v1::Tensor* logits = response->mutable_logits();
    logits->set_dtype(DTypeToProto(output_dtype));
    logits->add_shape(call.head.rows);
    logits->add_shape(vocab);
    auto out_of_memory = std::make_shared<bool>(false);
    dispatched = true;
    m.ComputeLogitsAsync(
        call.head, request->log_softmax(), ComputeCheck(context, context_.metrics, m, call.head.rows),
        [data = logits->mutable_data(), total = call.head.rows * vocab * dtype_size, vocab,
         dtype_size, output_dtype, out_of_memory](int64_t first, int64_t rows, const float* values) {
          if (*out_of_memory) return;
          if (data->empty()) {
            try {
              data->resize(static_cast<size_t>(total));
            } catch (const std::bad_alloc&) {
              *out_of_memory = true;  // `done` answers RESOURCE_EXHAUSTED
              return;
            }
          }
          ConvertFromF32(values, static_cast<size_t>(rows * vocab), output_dtype,
                         data->data() + first * vocab * dtype_size);
        },
        [model = call.model, hidden_rows = call.hidden, request, response, reactor, out_of_memory,
         max_send = context_.max_send_message_bytes](absl::Status st) {
          st = CatchAll("ComputeLogits", nullptr, [&]() -> absl::Status {
            RETURN_IF_ERROR(st);
            if (*out_of_memory) {
              RequestMemory need = HeadRequestMemory(*request, *model);
              return OutOfMemoryStatus("ComputeLogits", need.bytes(), need.formula());
            }
            response->set_model(model->name());
            response->set_request_id(request->request_id());
            return CheckResponseSize(*response, max_send);
          });
          if (!st.ok()) response->Clear();
          reactor->Finish(ToGrpcStatus(st));
        });
    return absl::OkStatus();
  });
  if (!dispatched) {
    response->Clear();
    reactor->Finish(ToGrpcStatus(status));
  }
  return reactor;
}

grpc::ServerUnaryReactor* ScoringServiceImpl::Score(grpc::CallbackServerContext* context,
                                                    const v1::ScoreRequest* request,
                                                    v1::ScoreResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (RejectIfNotAdmitted(context_.tracker, context, *request, reactor)) return reactor;
  bool dispatched = false;
  absl::Status status = CatchAll("Score", nullptr, [&]() -> absl::Status {
    ASSIGN_OR_RETURN(HeadCall call,
                     PrepareHeadCall(*context_.registry, *request, context_.max_request_memory_bytes));
    ASSIGN_OR_RETURN(const ScoreInput input, ScoreInputFromProto(*request, call));
    const Model& m = *call.model;
    dispatched = true;
    m.ScoreAsync(input, ComputeCheck(context, context_.metrics, m, input.head.rows),
                 [model = call.model, hidden_rows = call.hidden, request, response, reactor,
                  max_send = context_.max_send_message_bytes](absl::Status st, ScoreOutput output) {
                   st = CatchAll("Score", nullptr, [&]() -> absl::Status {
                     RETURN_IF_ERROR(st);
                     ScoreOutputToProto(output, request->target_ids_size() > 0, *model, *request,
                                        response);
                     return CheckResponseSize(*response, max_send);
                   });
                   if (!st.ok()) response->Clear();
                   reactor->Finish(ToGrpcStatus(st));
                 });
    return absl::OkStatus();
  });
  if (!dispatched) reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

grpc::ServerBidiReactor<v1::ScoreRequest, v1::ScoreResponse>* ScoringServiceImpl::ScoreStream(
    grpc::CallbackServerContext* context) {
  auto* reactor = new ScoreStreamReactor(context_, context);
  HappensBefore(reactor);  // gRPC runs its callbacks on other threads
  return reactor;
}

}  // namespace vocabd
