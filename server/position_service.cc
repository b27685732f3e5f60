#include "server/position_service.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "proto/tensor_codec.h"
#include "lib/positions/alibi.h"
#include "server/metrics.h"
#include "lib/positions/position_ids.h"
#include "lib/positions/rope.h"
#include "lib/positions/rope_overrides.h"
#include "lib/positions/sinusoidal.h"
#include "lib/core/shape.h"
#include "lib/core/status_macros.h"
#include "server/call_tracker.h"
#include "server/grpc_status.h"
#include "server/handler_guard.h"
#include "lib/serving/request_memory.h"
#include "server/proto_convert.h"
#include "server/response_size.h"

namespace vocabd {
namespace {

// Error messages name RoPE parameters after the request field they come
// from (`rope.theta = 0 must be ...`).
constexpr char kRopeField[] = "rope";

// A decoded q or k tensor with its logical dims.
struct DecodedQk {
  std::vector<float> values;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  QkTensor view;
};

// Decodes q or k to F32 and reads its sizes for `layout`
// (lib/positions/rope.h QkTensorFromShape).
absl::StatusOr<DecodedQk> DecodeQk(const v1::Tensor& tensor, QkvLayout layout,
                                   const std::string& field) {
  DecodedQk out;
  out.shape.assign(tensor.shape().begin(), tensor.shape().end());
  ASSIGN_OR_RETURN(out.view, QkTensorFromShape(out.shape, layout, field));
  ASSIGN_OR_RETURN(out.values, DecodeFloatTensor(tensor, field));
  ASSIGN_OR_RETURN(out.dtype, DTypeFromProto(tensor.dtype(), field + ".dtype"));
  out.view.data = out.values.data();
  return out;
}

absl::StatusOr<std::vector<int64_t>> RequestPositions(const v1::ApplyRopeRequest& request,
                                                      QkvLayout layout, const QkTensor& q) {
  std::vector<int64_t> offsets(request.position_offsets().begin(),
                               request.position_offsets().end());
  if (request.has_position_ids()) {
    if (!offsets.empty()) {
      return absl::InvalidArgumentError("set either position_ids or position_offsets, not both");
    }
    const v1::Tensor& ids = request.position_ids();
    std::vector<int64_t> want = layout == QkvLayout::kTHD ? std::vector<int64_t>{q.seq_len}
                                                          : std::vector<int64_t>{q.batch, q.seq_len};
    std::vector<int64_t> got(ids.shape().begin(), ids.shape().end());
    if (got != want) {
      return absl::InvalidArgumentError(absl::StrCat(
          "position_ids.shape = ", ShapeString(got), " but q needs ", ShapeString(want), " (",
          layout == QkvLayout::kTHD ? "T" : "B, S", ")"));
    }
    return DecodeIntTensor(ids, "position_ids");
  }
  if (layout == QkvLayout::kTHD) {
    std::vector<int64_t> lengths(request.sequence_lengths().begin(),
                                 request.sequence_lengths().end());
    return PackedPositions(lengths, offsets, q.seq_len);
  }
  if (request.sequence_lengths_size() != 0) {
    return absl::InvalidArgumentError("sequence_lengths is only valid with layout THD");
  }
  return PositionsFromOffsets(offsets, q.batch, q.seq_len);
}

// RoPE params for a request (lib/positions/rope_overrides.h decides which
// model, if any, gives the defaults and how the request goes over them).
// With `layer`, the model's params of that layer (ModelConfig::RopeOfLayer);
// std::nullopt when that layer applies no RoPE.
absl::StatusOr<std::optional<RopeParams>> ResolveRopeParams(const ServiceContext& context,
                                                            const std::string& model_name,
                                                            const v1::RopeConfig& rope,
                                                            int64_t head_dim,
                                                            std::optional<int32_t> layer) {
  const RopeParams* model_params = nullptr;
  std::shared_ptr<const Model> model;
  const bool standalone = RopeRequestStandsAlone(
      !model_name.empty(), rope.pair_layout() != v1::ROPE_PAIR_LAYOUT_UNSPECIFIED);
  if (standalone && layer.has_value()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "layer = ", *layer, " needs a model (the request's rope config stands alone)"));
  }
  LayerRope layer_rope;
  if (!standalone) {
    ASSIGN_OR_RETURN(model, context.registry->Get(model_name));
    if (model->config().position_scheme != PositionScheme::kRope) {
      return absl::FailedPreconditionError(
          absl::StrCat("model '", model->name(), "' does not use RoPE"));
    }
    model_params = &model->config().rope;
    if (layer.has_value()) {
      ASSIGN_OR_RETURN(layer_rope, model->config().RopeOfLayer(*layer));
      model_params = &layer_rope.rope;
    }
  }
  ASSIGN_OR_RETURN(RopeOverrides overrides, RopeOverridesFromProto(rope));
  if (layer.has_value() && !layer_rope.rotary) {
    const bool any_override = overrides.theta || overrides.head_dim || overrides.rotary_dim ||
                              overrides.partial_rotary_factor || overrides.pair_layout ||
                              overrides.scaling || overrides.max_position_embeddings;
    if (any_override) {
      return absl::InvalidArgumentError(absl::StrCat(
          "rope overrides are set but layer ", *layer, " of model '", model->name(),
          "' applies no RoPE"));
    }
    return std::optional<RopeParams>();
  }
  ASSIGN_OR_RETURN(RopeParams params, MergeRopeParams(model_params, overrides, head_dim, kRopeField));
  return std::optional<RopeParams>(std::move(params));
}

std::optional<int32_t> RequestLayer(bool has_layer, int32_t layer) {
  return has_layer ? std::optional<int32_t>(layer) : std::nullopt;
}

// Work measures (see position_service.h): SaturatingMul (lib/core/shape.h)
// counts negative inputs as 0 (the call then fails its validation inline);
// overflow saturates.
int64_t SaturatingAdd(int64_t a, int64_t b) {
  int64_t out = 0;
  return __builtin_add_overflow(a, b, &out) ? std::numeric_limits<int64_t>::max() : out;
}

// Float values a q/k payload decodes to.
int64_t PayloadValues(const v1::Tensor& tensor) {
  const int64_t bytes = static_cast<int64_t>(tensor.data().size());
  return tensor.dtype() == v1::F16 || tensor.dtype() == v1::BF16 ? bytes / 2 : bytes / 4;
}

}  // namespace

grpc::ServerUnaryReactor* PositionServiceImpl::ApplyRope(grpc::CallbackServerContext* context,
                                                         const v1::ApplyRopeRequest* request,
                                                         v1::ApplyRopeResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (RejectIfNotAdmitted(context_.tracker, context, *request, reactor)) return reactor;
  const int64_t cost = SaturatingAdd(PayloadValues(request->q()), PayloadValues(request->k()));
  Run("ApplyRope", context, reactor, cost, response, [this, request, response](bool on_pool) {
    return DoApplyRope(*request, on_pool, response);
  });
  return reactor;
}

void PositionServiceImpl::Run(const char* rpc, grpc::CallbackServerContext* call,
                              grpc::ServerUnaryReactor* reactor, int64_t cost,
                              const google::protobuf::Message* response,
                              std::function<absl::Status(bool on_pool)> fill) {
  auto work = [rpc, fill = std::move(fill), response,
               max_send = context_.max_send_message_bytes](bool on_pool) {
    // No exception leaves the call (server/handler_guard.h).
    return CatchAll(rpc, nullptr, [&]() -> absl::Status {
      RETURN_IF_ERROR(fill(on_pool));
      return CheckResponseSize(*response, max_send);
    });
  };
  if (cost <= kPositionInlineMaxValues || context_.compute_pool == nullptr) {
    reactor->Finish(ToGrpcStatus(work(/*on_pool=*/false)));
    return;
  }
  Metrics* metrics = context_.metrics;
  absl::Status submitted = context_.compute_pool->Submit([call, reactor, metrics,
                                                          work = std::move(work)]() {
    // Checked again when a worker picks the call up (scoring does the same).
    if (absl::Status wanted = CheckCallWanted(call, metrics, "while queued"); !wanted.ok()) {
      reactor->Finish(ToGrpcStatus(wanted));
      return;
    }
    reactor->Finish(ToGrpcStatus(work(/*on_pool=*/true)));
  });
  if (!submitted.ok()) reactor->Finish(ToGrpcStatus(submitted));
}

absl::Status PositionServiceImpl::DoApplyRope(const v1::ApplyRopeRequest& request, bool on_pool,
                                              v1::ApplyRopeResponse* response) {
  ASSIGN_OR_RETURN(QkvLayout layout, QkvLayoutFromProto(request.layout()));
  // Shapes first, then the memory bound, then anything sized by them (the
  // decoded copies, the positions table): q and k of shape
  // [32768, 0, 32768, 8] are refused here, before batch x seq positions.
  {
    const std::vector<int64_t> q_shape(request.q().shape().begin(), request.q().shape().end());
    const std::vector<int64_t> k_shape(request.k().shape().begin(), request.k().shape().end());
    ASSIGN_OR_RETURN(QkTensor qv, QkTensorFromShape(q_shape, layout, "q"));
    ASSIGN_OR_RETURN(QkTensor kv, QkTensorFromShape(k_shape, layout, "k"));
    RETURN_IF_ERROR(ValidateQkShapes(qv, kv, layout));
    const int64_t q_elements = SaturatingMul(SaturatingMul(qv.batch, qv.seq_len), qv.num_heads, qv.head_dim);
    const int64_t k_elements = SaturatingMul(SaturatingMul(kv.batch, kv.seq_len), kv.num_heads, kv.head_dim);
    const int64_t dtype_bytes =
        request.q().dtype() == v1::F16 || request.q().dtype() == v1::BF16 ? 2 : 4;
    RETURN_IF_ERROR(CheckRequestMemory(
        ApplyRopeMemory(q_elements, k_elements, SaturatingMul(qv.batch, qv.seq_len), qv.head_dim,
                        dtype_bytes),
        context_.max_request_memory_bytes));
  }
  ASSIGN_OR_RETURN(DecodedQk q, DecodeQk(request.q(), layout, "q"));
  ASSIGN_OR_RETURN(DecodedQk k, DecodeQk(request.k(), layout, "k"));
  // A model supplies the defaults unless the request's rope config stands on
  // its own (pair_layout set and no model named).
  ASSIGN_OR_RETURN(std::optional<RopeParams> resolved,
                   ResolveRopeParams(context_, request.model(), request.rope(), q.view.head_dim,
                                     RequestLayer(request.has_layer(), request.layer())));
  ASSIGN_OR_RETURN(std::vector<int64_t> positions, RequestPositions(request, layout, q.view));
  if (!resolved.has_value()) {
    // A layer without RoPE (NoPE layers, Cohere 2 global layers): q and k
    // unchanged, positions still validated as for any layer.
    RETURN_IF_ERROR(ValidateQkShapes(q.view, k.view, layout));
    *response->mutable_q() = request.q();
    *response->mutable_k() = request.k();
    response->set_attention_scaling(1.0);
    response->set_layer_without_rope(true);
    return absl::OkStatus();
  }
  const RopeParams& params = *resolved;
  ApplyRopeOptions options;
  options.layout = layout;
  options.allow_beyond_trained_length = request.allow_beyond_trained_length();
  options.high_precision = request.high_precision();
  options.allow_non_finite = request.allow_non_finite();
  options.params_name = kRopeField;
  // Inline on a reactor: never start threads. On the pool: threads for
  // q + k >= 4 MiB (lib/positions/rope.h).
  options.num_threads = on_pool ? 0 : 1;
  ASSIGN_OR_RETURN(ApplyRopeResult applied,
                   ::vocabd::ApplyRope(params, options, positions, q.view, k.view));
  *response->mutable_q() = EncodeFloatTensor(q.values, q.shape, q.dtype);
  *response->mutable_k() = EncodeFloatTensor(k.values, k.shape, k.dtype);
  response->set_attention_scaling(applied.attention_scaling);
  return absl::OkStatus();
}

absl::Status PositionServiceImpl::DoGetRopeCache(const RopeParams& params,
                                                 const v1::GetRopeCacheRequest& request,
                                                 v1::GetRopeCacheResponse* response) {
  RETURN_IF_ERROR(CheckRequestMemory(RopeCacheMemory(request.num_positions(), params.rotary_dim),
                                     context_.max_request_memory_bytes));
  ASSIGN_OR_RETURN(RopeCacheOutput out,
                   ComputeRopeCache(params, request.start_position(), request.num_positions(),
                                    request.allow_beyond_trained_length(),
                                    request.high_precision(), kRopeField));
  const int64_t half = static_cast<int64_t>(out.inv_freq.size());
  *response->mutable_inv_freq() = EncodeFloatTensor(out.inv_freq, {half}, DType::kF32);
  *response->mutable_cos() =
      EncodeFloatTensor(out.cos, {request.num_positions(), half}, DType::kF32);
  *response->mutable_sin() =
      EncodeFloatTensor(out.sin, {request.num_positions(), half}, DType::kF32);
  response->set_attention_scaling(out.attention_scaling);
  response->set_used_long_factor(out.used_long_factor);
  *response->mutable_rope() = RopeParamsToProto(params);
  return absl::OkStatus();
}

absl::Status PositionServiceImpl::DoGetSinusoidalPositions(
    const v1::GetSinusoidalPositionsRequest& request, v1::GetSinusoidalPositionsResponse* response) {
  SinusoidalLayout layout = SinusoidalLayout::kInterleaved;
  switch (request.layout()) {
    case v1::ROPE_PAIR_LAYOUT_UNSPECIFIED:
    case v1::INTERLEAVED: break;
    case v1::HALF_SPLIT: layout = SinusoidalLayout::kHalfSplit; break;
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          "layout = ", static_cast<int>(request.layout()), " is not a known layout"));
  }
  const double base = request.base() == 0 ? 10000.0 : request.base();
  RETURN_IF_ERROR(
      ValidateSinusoidalTable(request.start_position(), request.num_positions(), request.dim(), base));
  RETURN_IF_ERROR(CheckRequestMemory(SinusoidalMemory(request.num_positions(), request.dim()),
                                     context_.max_request_memory_bytes));
  ASSIGN_OR_RETURN(std::vector<float> table,
                   SinusoidalTable(request.start_position(), request.num_positions(),
                                   request.dim(), base, layout));
  *response->mutable_table() =
      EncodeFloatTensor(table, {request.num_positions(), request.dim()}, DType::kF32);
  return absl::OkStatus();
}

absl::Status PositionServiceImpl::DoGetAlibiSlopes(const v1::GetAlibiSlopesRequest& request,
                                                   int64_t heads,
                                                   v1::GetAlibiSlopesResponse* response) {
  RETURN_IF_ERROR(CheckRequestMemory(
      AlibiMemory(heads, request.q_len(), request.k_len(), request.include_bias()),
      context_.max_request_memory_bytes));
  ASSIGN_OR_RETURN(std::vector<float> slopes, AlibiSlopes(heads));
  if (request.include_bias()) {
    ASSIGN_OR_RETURN(std::vector<float> bias, AlibiBias(slopes, request.q_len(), request.k_len(),
                                                        !request.bidirectional()));
    *response->mutable_bias() =
        EncodeFloatTensor(bias, {heads, request.q_len(), request.k_len()}, DType::kF32);
  }
  *response->mutable_slopes() = EncodeFloatTensor(slopes, {heads}, DType::kF32);
  return absl::OkStatus();
}

grpc::ServerUnaryReactor* PositionServiceImpl::GetRopeCache(
    grpc::CallbackServerContext* context, const v1::GetRopeCacheRequest* request,
    v1::GetRopeCacheResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (RejectIfNotAdmitted(context_.tracker, context, *request, reactor)) return reactor;
  // Resolving the config is cheap (a registry lookup); it also gives the
  // table width for the cost.
  absl::StatusOr<std::optional<RopeParams>> params = absl::UnknownError("not resolved");
  absl::Status resolved = CatchAll("GetRopeCache", nullptr, [&]() -> absl::Status {
    params = ResolveRopeParams(context_, request->model(), request->rope(), 0,
                               RequestLayer(request->has_layer(), request->layer()));
    return absl::OkStatus();
  });
  if (!resolved.ok()) params = resolved;
  if (!params.ok()) {
    reactor->Finish(ToGrpcStatus(params.status()));
    return reactor;
  }
  if (!params->has_value()) {
    // A layer without RoPE: no tables.
    Run("GetRopeCache", context, reactor, 0, response, [response](bool) {
      response->set_layer_without_rope(true);
      return absl::OkStatus();
    });
    return reactor;
  }
  const int64_t cost = SaturatingMul(request->num_positions(), (*params)->rotary_dim);
  Run("GetRopeCache", context, reactor, cost, response,
      [this, params = **std::move(params), request, response](bool) {
        return DoGetRopeCache(params, *request, response);
      });
  return reactor;
}

grpc::ServerUnaryReactor* PositionServiceImpl::GetSinusoidalPositions(
    grpc::CallbackServerContext* context, const v1::GetSinusoidalPositionsRequest* request,
    v1::GetSinusoidalPositionsResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (RejectIfNotAdmitted(context_.tracker, context, *request, reactor)) return reactor;
  const int64_t cost = SaturatingMul(request->num_positions(), request->dim());
  Run("GetSinusoidalPositions", context, reactor, cost, response, [this, request, response](bool) {
    return DoGetSinusoidalPositions(*request, response);
  });
  return reactor;
}

grpc::ServerUnaryReactor* PositionServiceImpl::GetAlibiSlopes(
    grpc::CallbackServerContext* context, const v1::GetAlibiSlopesRequest* request,
    v1::GetAlibiSlopesResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (RejectIfNotAdmitted(context_.tracker, context, *request, reactor)) return reactor;
  int64_t heads = request->num_heads();
  if (heads == 0) {
    absl::StatusOr<std::shared_ptr<const Model>> model = context_.registry->Get(request->model());
    if (!model.ok()) {
      reactor->Finish(ToGrpcStatus(model.status()));
      return reactor;
    }
    heads = (*model)->config().num_attention_heads;
  }
  const int64_t cost =
      request->include_bias()
          ? SaturatingMul(SaturatingMul(heads, request->q_len()), request->k_len())
          : heads;
  Run("GetAlibiSlopes", context, reactor, cost, response, [this, request, response, heads](bool) {
    return DoGetAlibiSlopes(*request, heads, response);
  });
  return reactor;
}

}  // namespace vocabd
