#include "lib/positions/rope_overrides.h"

#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace vocabd {

bool RopeRequestStandsAlone(bool names_model, bool sets_pair_layout) {
  return !names_model && sets_pair_layout;
}

absl::StatusOr<RopeParams> MergeRopeParams(const RopeParams* model_defaults,
                                           const RopeOverrides& request, int64_t tensor_head_dim,
                                           std::string_view name) {
  RopeParams params;
  if (model_defaults != nullptr) params = *model_defaults;
  if (request.theta.has_value()) params.theta = *request.theta;
  if (request.head_dim.has_value()) {
    params.head_dim = *request.head_dim;
  } else if (model_defaults == nullptr) {
    params.head_dim = static_cast<int>(tensor_head_dim);
  }
  if (model_defaults == nullptr) params.rotary_dim = params.head_dim;
  if (request.rotary_dim.has_value()) {
    params.rotary_dim = *request.rotary_dim;
  } else if (request.partial_rotary_factor.has_value()) {
    const double f = *request.partial_rotary_factor;
    if (!PartialRotaryFactorInRange(f)) {
      return absl::InvalidArgumentError(
          absl::StrCat(std::string(name), ".partial_rotary_factor = ", f, " is outside (0, 1]"));
    }
    params.rotary_dim = RotaryDimFromPartialFactor(params.head_dim, f);
  } else if (request.head_dim.has_value()) {
    params.rotary_dim = params.head_dim;
  }
  if (request.pair_layout.has_value()) {
    params.pair_layout = *request.pair_layout;
  } else if (model_defaults == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        std::string(name),
        ".pair_layout is unset and no model gives one (set INTERLEAVED or HALF_SPLIT)"));
  }
  if (request.scaling.has_value()) params.scaling = *request.scaling;
  if (request.max_position_embeddings.has_value()) {
    params.max_position_embeddings = *request.max_position_embeddings;
  }
  return params;
}

}  // namespace vocabd
