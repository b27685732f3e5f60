// vocabd.v1 messages <-> lib/ structs. Field copying and enum mapping only;
// every number a request carries is validated by lib/.
#ifndef VOCABD_SERVER_PROTO_CONVERT_H_
#define VOCABD_SERVER_PROTO_CONVERT_H_

#include "absl/status/statusor.h"
#include "lib/serving/model.h"
#include "lib/checkpoint/model_config.h"
#include "lib/positions/rope.h"
#include "vocabd/v1/embedding.pb.h"
#include "vocabd/v1/model.pb.h"
#include "vocabd/v1/position.pb.h"
#include "vocabd/v1/rope.pb.h"

namespace vocabd {

// The model's RoPE params with the fields set in `request` (non-zero /
// non-UNSPECIFIED) overriding them. `model` may be null (no model): then
// theta defaults to 10000 and head_dim/pair_layout must come from the
// request or the tensors. INVALID_ARGUMENT names `rope.<field>`.
absl::StatusOr<RopeParams> MergeRopeParams(const RopeParams* model, const v1::RopeConfig& request,
                                           int64_t tensor_head_dim);

v1::RopeConfig RopeParamsToProto(const RopeParams& params);

absl::StatusOr<QkvLayout> QkvLayoutFromProto(v1::QkvLayout layout);

// ModelInfo for a READY model.
v1::ModelInfo ModelToProto(const Model& model, bool is_default);

// EmbedRequest -> EmbedInput (ids copied; enums mapped).
absl::StatusOr<EmbedInput> EmbedInputFromProto(const v1::EmbedRequest& request);

}  // namespace vocabd

#endif  // VOCABD_SERVER_PROTO_CONVERT_H_
