#include "lib/positions/rope_gguf.h"

#include <optional>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "lib/core/status_macros.h"

namespace vocabd {
namespace {

class Keys {
 public:
  explicit Keys(const GgufRopeInput& in) : in_(in) {}
  std::string Key(const char* suffix) const { return absl::StrCat(in_.arch, ".", suffix); }

  absl::StatusOr<std::optional<double>> Number(const std::string& key) const {
    auto it = in_.metadata.find(key);
    if (it == in_.metadata.end()) return std::optional<double>();
    const GgufRopeValue& v = it->second;
    if (v.kind == GgufRopeValue::Kind::kFloat) return std::optional<double>(v.f);
    if (v.kind == GgufRopeValue::Kind::kInt) return std::optional<double>(static_cast<double>(v.i));
    return absl::InvalidArgumentError(
        absl::StrCat("key \"", key, "\" must be a number, got string \"", v.s, "\""));
  }
  absl::StatusOr<std::optional<int64_t>> Integer(const std::string& key) const {
    auto it = in_.metadata.find(key);
    if (it == in_.metadata.end()) return std::optional<int64_t>();
    const GgufRopeValue& v = it->second;
    if (v.kind == GgufRopeValue::Kind::kInt) return std::optional<int64_t>(v.i);
    if (v.kind == GgufRopeValue::Kind::kFloat) {
      return absl::InvalidArgumentError(
          absl::StrCat("key \"", key, "\" must be an integer, got float ", v.f));
    }
    return absl::InvalidArgumentError(
        absl::StrCat("key \"", key, "\" must be an integer, got string \"", v.s, "\""));
  }
  absl::StatusOr<std::optional<std::string>> String(const std::string& key) const {
    auto it = in_.metadata.find(key);
    if (it == in_.metadata.end()) return std::optional<std::string>();
    if (it->second.kind != GgufRopeValue::Kind::kString) {
      return absl::InvalidArgumentError(absl::StrCat("key \"", key, "\" must be a string"));
    }
    return std::optional<std::string>(it->second.s);
  }

 private:
  const GgufRopeInput& in_;
};

}  // namespace

absl::StatusOr<RopeParams> RopeParamsFromGguf(const GgufRopeInput& in) {
  if (in.arch.empty()) return absl::InvalidArgumentError("general.architecture is empty");
  if (in.head_dim <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("head_dim = ", in.head_dim, " must be > 0"));
  }
  Keys k(in);
  RopeParams p;
  p.head_dim = in.head_dim;
  p.pair_layout = in.pair_layout;
  std::optional<int64_t> iv;
  std::optional<double> fv;
  ASSIGN_OR_RETURN(iv, k.Integer(k.Key("context_length")));
  p.max_position_embeddings = iv.value_or(0);
  ASSIGN_OR_RETURN(iv, k.Integer(k.Key("rope.dimension_count")));
  p.rotary_dim = static_cast<int>(iv.value_or(in.head_dim));
  ASSIGN_OR_RETURN(fv, k.Number(k.Key("rope.freq_base")));
  p.theta = fv.value_or(10000.0);

  std::optional<std::string> type;
  ASSIGN_OR_RETURN(type, k.String(k.Key("rope.scaling.type")));
  std::optional<double> factor;
  ASSIGN_OR_RETURN(factor, k.Number(k.Key("rope.scaling.factor")));
  // Phi-3 files carry rope_factors_long/short tensors but no scaling.type
  // key; llama.cpp uses the factors whenever they are present.
  if (!type.has_value() && !in.rope_factors_long.empty()) type = "longrope";
  ASSIGN_OR_RETURN(fv, k.Number(k.Key("rope.scale_linear")));
  if (!type.has_value() && fv.has_value() && *fv != 1.0) {
    type = "linear";
    factor = fv;
  }
  RopeScaling& s = p.scaling;
  if (type.has_value() && *type != "none") {
    if (*type == "linear") {
      s.type = RopeScalingType::kLinear;
    } else if (*type == "yarn") {
      s.type = RopeScalingType::kYarn;
    } else if (*type == "longrope") {
      s.type = RopeScalingType::kLongrope;
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("key \"", k.Key("rope.scaling.type"), "\" = \"", *type,
                       "\" is not supported (none, linear, yarn, longrope)"));
    }
    if (!factor.has_value() && s.type != RopeScalingType::kLongrope) {
      return absl::InvalidArgumentError(absl::StrCat("key \"", k.Key("rope.scaling.factor"),
                                                     "\" is required for rope.scaling.type \"",
                                                     *type, "\""));
    }
    s.factor = factor.value_or(1.0);
    ASSIGN_OR_RETURN(iv, k.Integer(k.Key("rope.scaling.original_context_length")));
    s.original_max_position_embeddings = iv.value_or(0);
    ASSIGN_OR_RETURN(fv, k.Number(k.Key("rope.scaling.attn_factor")));
    if (fv.has_value()) s.attention_factor = *fv;
    ASSIGN_OR_RETURN(fv, k.Number(k.Key("rope.scaling.yarn_log_multiplier")));
    if (fv.has_value() && *fv != 0.0) {
      s.mscale_all_dim = *fv / 0.1;
      s.mscale = s.mscale_all_dim;
    }
    ASSIGN_OR_RETURN(fv, k.Number(k.Key("rope.scaling.yarn_beta_fast")));
    if (fv.has_value()) s.beta_fast = *fv;
    ASSIGN_OR_RETURN(fv, k.Number(k.Key("rope.scaling.yarn_beta_slow")));
    if (fv.has_value()) s.beta_slow = *fv;
  }
  if (s.type == RopeScalingType::kLongrope) {
    s.long_factor = in.rope_factors_long;
    s.short_factor = in.rope_factors_short.empty() ? in.rope_factors_long : in.rope_factors_short;
  } else if (!in.rope_freqs.empty()) {
    if (s.type != RopeScalingType::kDefault) {
      return absl::InvalidArgumentError(absl::StrCat(
          "rope_freqs.weight is given together with key \"", k.Key("rope.scaling.type"),
          "\" = \"", type.value_or(""), "\"; only one frequency scaling is supported"));
    }
    s.type = RopeScalingType::kLongrope;
    s.short_factor = in.rope_freqs;
    s.long_factor = in.rope_freqs;
    s.attention_factor = 1.0;
    // No length switch: both factor sets are equal.
    s.original_max_position_embeddings = 0;
  }
  RETURN_IF_ERROR(p.Validate());
  return p;
}

}  // namespace vocabd
