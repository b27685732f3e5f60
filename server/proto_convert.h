// vocabd.v1 messages <-> lib/ structs. Field copying and enum mapping only;
// every number a request carries is validated by lib/.
#ifndef VOCABD_SERVER_PROTO_CONVERT_H_
#define VOCABD_SERVER_PROTO_CONVERT_H_

#include "absl/status/statusor.h"
#include "lib/serving/model.h"
#include "lib/checkpoint/model_config.h"
#include "lib/positions/rope.h"
#include "lib/positions/rope_overrides.h"
#include "vocabd/v1/embedding.pb.h"
#include "vocabd/v1/model.pb.h"
#include "vocabd/v1/position.pb.h"
#include "vocabd/v1/rope.pb.h"

namespace vocabd {

// The fields `request` sets (non-zero / non-UNSPECIFIED / present) as
// RopeOverrides, for MergeRopeParams (lib/positions/rope_overrides.h, which
// owns the merge rules). A scaling message maps to a complete RopeScaling
// (unset fields at its HF defaults; factor 0 = 1). INVALID_ARGUMENT only
// for enum values the proto does not define (`rope.pair_layout = 9 is not
// a known layout`, `rope.scaling.type = 9 is not a known type`).
absl::StatusOr<RopeOverrides> RopeOverridesFromProto(const v1::RopeConfig& request);

v1::RopeConfig RopeParamsToProto(const RopeParams& params);
// HeadVariant.name: "plain", or "softcap(30)", "logit_scale(0.0625)",
// "logits_scaling(8)" joined by " + ".
std::string HeadVariantName(const LogitTransform& transform);

absl::StatusOr<QkvLayout> QkvLayoutFromProto(v1::QkvLayout layout);

// ModelInfo for a READY model.
v1::ModelInfo ModelToProto(const Model& model, bool is_default);

// EmbedRequest -> EmbedInput (ids copied; enums mapped).
absl::StatusOr<EmbedInput> EmbedInputFromProto(const v1::EmbedRequest& request);

}  // namespace vocabd

#endif  // VOCABD_SERVER_PROTO_CONVERT_H_
