#include "lib/positions/rope_params.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace vocabd {
namespace {

absl::Status Invalid(const std::string& field, const std::string& value, const std::string& rule) {
  return absl::InvalidArgumentError(absl::StrCat(field, " = ", value, " ", rule));
}

bool FinitePositive(double v) { return std::isfinite(v) && v > 0.0; }

// Trained length the scaling types fall back on (see lib/positions/rope_freq.h).
int64_t OriginalLength(const RopeParams& p) {
  return p.scaling.original_max_position_embeddings > 0 ? p.scaling.original_max_position_embeddings
                                                        : p.max_position_embeddings;
}

absl::Status NeedLength(const RopeParams& p, const std::string& name, const char* type) {
  if (OriginalLength(p) > 0) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      name, ".scaling(", type, ").original_max_position_embeddings = 0 and ", name,
      ".max_position_embeddings = 0: ", type, " scaling needs one of them > 0"));
}

absl::Status ValidateScaling(const RopeParams& p, const std::string& name) {
  const RopeScaling& s = p.scaling;
  const int rotary_dim = p.rotary_dim;
  const std::string prefix = absl::StrCat(name, ".scaling(", RopeScalingTypeName(s.type), ").");
  if (s.type == RopeScalingType::kDefault) return absl::OkStatus();
  if (!FinitePositive(s.factor)) {
    return Invalid(prefix + "factor", absl::StrCat(s.factor), "must be finite and > 0");
  }
  if (s.original_max_position_embeddings < 0) {
    return Invalid(prefix + "original_max_position_embeddings",
                   absl::StrCat(s.original_max_position_embeddings), "must be >= 0");
  }
  if (!(s.attention_factor >= 0.0) || !std::isfinite(s.attention_factor)) {
    return Invalid(prefix + "attention_factor", absl::StrCat(s.attention_factor),
                   "must be finite and >= 0 (0 = HF default formula)");
  }
  switch (s.type) {
    case RopeScalingType::kDynamic:
      if (rotary_dim <= 2) {
        return Invalid(absl::StrCat(name, ".rotary_dim"), absl::StrCat(rotary_dim),
                       "must be > 2 for dynamic scaling (exponent r / (r - 2))");
      }
      return NeedLength(p, name, "dynamic");
    case RopeScalingType::kLlama3:
      if (s.original_max_position_embeddings <= 0) {
        return Invalid(prefix + "original_max_position_embeddings",
                       absl::StrCat(s.original_max_position_embeddings),
                       "must be > 0 for llama3 scaling");
      }
      if (!FinitePositive(s.low_freq_factor)) {
        return Invalid(prefix + "low_freq_factor", absl::StrCat(s.low_freq_factor),
                       "must be finite and > 0");
      }
      if (!std::isfinite(s.high_freq_factor) || !(s.high_freq_factor > s.low_freq_factor)) {
        return Invalid(prefix + "high_freq_factor", absl::StrCat(s.high_freq_factor),
                       absl::StrCat("must be finite and > low_freq_factor = ", s.low_freq_factor));
      }
      break;
    case RopeScalingType::kYarn:
      if (!FinitePositive(s.beta_fast)) {
        return Invalid(prefix + "beta_fast", absl::StrCat(s.beta_fast), "must be finite and > 0");
      }
      if (!FinitePositive(s.beta_slow)) {
        return Invalid(prefix + "beta_slow", absl::StrCat(s.beta_slow), "must be finite and > 0");
      }
      if (!(s.mscale >= 0.0) || !std::isfinite(s.mscale)) {
        return Invalid(prefix + "mscale", absl::StrCat(s.mscale), "must be finite and >= 0");
      }
      if (!(s.mscale_all_dim >= 0.0) || !std::isfinite(s.mscale_all_dim)) {
        return Invalid(prefix + "mscale_all_dim", absl::StrCat(s.mscale_all_dim),
                       "must be finite and >= 0");
      }
      return NeedLength(p, name, "yarn");
    case RopeScalingType::kLongrope: {
      const size_t want = static_cast<size_t>(rotary_dim / 2);
      if (s.short_factor.size() != want) {
        return Invalid(prefix + "short_factor.size()", absl::StrCat(s.short_factor.size()),
                       absl::StrCat("must equal rotary_dim / 2 = ", want));
      }
      if (s.long_factor.size() != want) {
        return Invalid(prefix + "long_factor.size()", absl::StrCat(s.long_factor.size()),
                       absl::StrCat("must equal rotary_dim / 2 = ", want));
      }
      for (size_t i = 0; i < want; ++i) {
        if (!FinitePositive(s.short_factor[i])) {
          return Invalid(absl::StrCat(prefix, "short_factor[", i, "]"),
                         absl::StrCat(s.short_factor[i]), "must be finite and > 0");
        }
        if (!FinitePositive(s.long_factor[i])) {
          return Invalid(absl::StrCat(prefix, "long_factor[", i, "]"),
                         absl::StrCat(s.long_factor[i]), "must be finite and > 0");
        }
      }
      // The length drives the short/long switch and the default attention
      // factor; neither matters when both lists are equal and the factor
      // is given (GGUF rope_freqs).
      if (s.attention_factor <= 0.0 || s.short_factor != s.long_factor) {
        return NeedLength(p, name, "longrope");
      }
      break;
    }
    default:
      break;
  }
  return absl::OkStatus();
}

}  // namespace

const char* RopeScalingTypeName(RopeScalingType type) {
  switch (type) {
    case RopeScalingType::kDefault:
      return "default";
    case RopeScalingType::kLinear:
      return "linear";
    case RopeScalingType::kDynamic:
      return "dynamic";
    case RopeScalingType::kYarn:
      return "yarn";
    case RopeScalingType::kLlama3:
      return "llama3";
    case RopeScalingType::kLongrope:
      return "longrope";
  }
  return "unknown";
}

absl::Status RopeParams::Validate(std::string_view name_view) const {
  const std::string name(name_view);
  auto field = [&name](const char* f) { return absl::StrCat(name, ".", f); };
  if (!FinitePositive(theta)) {
    return Invalid(field("theta"), absl::StrCat(theta), "must be a finite number > 0");
  }
  if (head_dim <= 0) return Invalid(field("head_dim"), absl::StrCat(head_dim), "must be > 0");
  if (head_dim % 2 != 0) return Invalid(field("head_dim"), absl::StrCat(head_dim), "is odd");
  if (head_dim > kMaxRopeHeadDim) {
    return Invalid(field("head_dim"), absl::StrCat(head_dim),
                   absl::StrCat("must be <= ", kMaxRopeHeadDim));
  }
  if (rotary_dim % 2 != 0) {
    return Invalid(field("rotary_dim"), absl::StrCat(rotary_dim), "is odd");
  }
  if (rotary_dim <= 0 || rotary_dim > head_dim) {
    return Invalid(field("rotary_dim"), absl::StrCat(rotary_dim),
                   absl::StrCat("is outside [2, ", field("head_dim"), " = ", head_dim, "]"));
  }
  if (max_position_embeddings < 0) {
    return Invalid(field("max_position_embeddings"), absl::StrCat(max_position_embeddings),
                   "is negative");
  }
  return ValidateScaling(*this, name);
}

}  // namespace vocabd
