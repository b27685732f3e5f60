// A request's RoPE fields over a model's RoPE defaults: the one place that
// decides which RopeParams a call uses (the server maps its proto onto
// RopeOverrides and calls MergeRopeParams, nothing more).
//
// Units: theta is the frequency base (HF `rope_theta`); head_dim and
// rotary_dim count float coordinates of one q/k head (rotary_dim even,
// <= head_dim; RoPE rotates rotary_dim / 2 pairs); max_position_embeddings
// counts positions (tokens); partial_rotary_factor is a fraction of head_dim.
//
// Merge rules, in order (an unset optional keeps what the model gave):
//   theta, max_position_embeddings: the request's value when set.
//   head_dim: the request's when set; with no model, the tensors' head_dim
//     (`tensor_head_dim`, the D axis of q/k; 0 when the call has none).
//   rotary_dim:
//     with no model it starts at the merged head_dim (every coordinate
//     rotates); then the first of
//       request rotary_dim                     -> that value
//       request partial_rotary_factor in (0,1] -> int(head_dim * factor)
//         (HF modeling_rope_utils._compute_default_rope_parameters:
//          `dim = int(head_dim * partial_rotary_factor)`, truncated toward
//          zero; RotaryDimFromPartialFactor in rope_params.h)
//       request head_dim                       -> the new head_dim (a
//         model's partial rotary fraction is not carried to a new head_dim)
//     applies; none of them keeps the model's rotary_dim.
//   pair_layout: the request's when set; required when there is no model.
//   scaling: a request scaling block replaces the model's whole block
//     (HF `rope_scaling` is one dict: its unset keys take the HF defaults of
//     RopeScaling, never the model's values).
//
// Validation: MergeRopeParams only refuses what the merge itself decides
// (the partial_rotary_factor range, a missing pair layout). The merged
// params are validated exactly once per call, by the computation that uses
// them -- ApplyRope / ComputeRopeCache / ComputeRopeFrequencies call
// RopeParams::Validate(params_name) -- so pass the same name there (the
// server: "rope") to get `rope.theta = 0 must be a finite number > 0` etc.
// Validating there (after the tensor and position checks) keeps which error
// a request with several mistakes gets.
#ifndef VOCABD_LIB_POSITIONS_ROPE_OVERRIDES_H_
#define VOCABD_LIB_POSITIONS_ROPE_OVERRIDES_H_

#include <cstdint>
#include <optional>
#include <string_view>

#include "absl/status/statusor.h"
#include "lib/positions/rope_params.h"

namespace vocabd {

// The RoPE fields a request sets; std::nullopt = not set (the proto's 0 /
// UNSPECIFIED / absent message).
struct RopeOverrides {
  std::optional<double> theta;
  std::optional<int> head_dim;
  std::optional<int> rotary_dim;
  // HF `partial_rotary_factor`; only used when rotary_dim is unset.
  std::optional<double> partial_rotary_factor;
  std::optional<RopePairLayout> pair_layout;
  // The complete scaling block (fields the request leaves out at the HF
  // defaults RopeScaling starts with); replaces the model's.
  std::optional<RopeScaling> scaling;
  std::optional<int64_t> max_position_embeddings;
};

// Whether a request starts from a model's RoPE params at all: it stands
// alone (MergeRopeParams with model_defaults = nullptr) when it names no
// model and sets its own pair layout; otherwise the named model's params,
// or the default model's when it names none, are its defaults.
bool RopeRequestStandsAlone(bool names_model, bool sets_pair_layout);

// `model_defaults` (nullptr = no model: theta 10000, head_dim from the
// request or `tensor_head_dim`, pair_layout from the request) with `request`
// applied by the rules above. INVALID_ARGUMENT, fields named under `name`:
//   rope.partial_rotary_factor = 1.5 is outside (0, 1]
//   rope.pair_layout is unset and no model gives one (set INTERLEAVED or HALF_SPLIT)
// The result is not validated (see above).
absl::StatusOr<RopeParams> MergeRopeParams(const RopeParams* model_defaults,
                                           const RopeOverrides& request, int64_t tensor_head_dim,
                                           std::string_view name = "rope");

}  // namespace vocabd

#endif  // VOCABD_LIB_POSITIONS_ROPE_OVERRIDES_H_
