#include "lib/checkpoint/model_config.h"

#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"

namespace vocabd {
namespace {

absl::Status InvalidConfig(const std::string& field, const std::string& value, const std::string& rule) {
  return absl::InvalidArgumentError(absl::StrCat(field, " = ", value, " ", rule));
}

bool IsFinitePositive(double v) { return std::isfinite(v) && v > 0.0; }

}  // namespace

absl::Status ModelConfig::Validate() const {
  if (vocab_size <= 0) return InvalidConfig("vocab_size", absl::StrCat(vocab_size), "must be > 0");
  if (hidden_size <= 0) return InvalidConfig("hidden_size", absl::StrCat(hidden_size), "must be > 0");
  if (num_hidden_layers < 0) {
    return InvalidConfig("num_hidden_layers", absl::StrCat(num_hidden_layers), "must be >= 0");
  }
  if (num_attention_heads < 0) {
    return InvalidConfig("num_attention_heads", absl::StrCat(num_attention_heads), "must be >= 0");
  }
  if (num_key_value_heads < 0) {
    return InvalidConfig("num_key_value_heads", absl::StrCat(num_key_value_heads), "must be >= 0");
  }
  if (num_key_value_heads > 0 &&
      (num_attention_heads <= 0 || num_attention_heads % num_key_value_heads != 0)) {
    return InvalidConfig("num_key_value_heads", absl::StrCat(num_key_value_heads),
                   absl::StrCat("does not divide num_attention_heads = ", num_attention_heads));
  }
  if (head_dim < 0) return InvalidConfig("head_dim", absl::StrCat(head_dim), "must be >= 0");
  if (intermediate_size < 0) {
    return InvalidConfig("intermediate_size", absl::StrCat(intermediate_size), "must be >= 0");
  }
  if (max_position_embeddings < 0) {
    return InvalidConfig("max_position_embeddings", absl::StrCat(max_position_embeddings),
                   "must be >= 0");
  }
  if (position_scheme == PositionScheme::kRope) {
    if (num_attention_heads <= 0) {
      return InvalidConfig("num_attention_heads", absl::StrCat(num_attention_heads),
                     "must be > 0 for a RoPE model");
    }
    if (num_key_value_heads <= 0) {
      return InvalidConfig("num_key_value_heads", absl::StrCat(num_key_value_heads),
                     "must be > 0 for a RoPE model");
    }
    if (head_dim <= 0) {
      return InvalidConfig("head_dim", absl::StrCat(head_dim), "must be > 0 for a RoPE model");
    }
    if (rope.head_dim != head_dim) {
      return InvalidConfig("rope.head_dim", absl::StrCat(rope.head_dim),
                     absl::StrCat("differs from head_dim = ", head_dim));
    }
    if (absl::Status s = rope.Validate(); !s.ok()) return s;
  }
  if (position_scheme == PositionScheme::kLearned && max_position_embeddings <= 0) {
    return InvalidConfig("max_position_embeddings", absl::StrCat(max_position_embeddings),
                   "must be > 0 for learned absolute positions");
  }
  if (learned_position_offset < 0 ||
      (position_scheme == PositionScheme::kLearned &&
       learned_position_offset >= max_position_embeddings)) {
    return InvalidConfig("learned_position_offset", absl::StrCat(learned_position_offset),
                   absl::StrCat("must be in [0, max_position_embeddings = ",
                                max_position_embeddings, ")"));
  }
  if (learned_position_padding_idx < -1 || learned_position_padding_idx >= vocab_size ||
      (position_scheme == PositionScheme::kLearned &&
       learned_position_padding_idx >= max_position_embeddings)) {
    return InvalidConfig("learned_position_padding_idx", absl::StrCat(learned_position_padding_idx),
                   absl::StrCat("must be -1 (none) or a token id in [0, vocab_size = ", vocab_size,
                                ") and a row in [0, max_position_embeddings = ",
                                max_position_embeddings, ")"));
  }
  if (final_norm_kind != NormKind::kNone && !IsFinitePositive(norm_eps)) {
    return InvalidConfig("norm_eps", absl::StrCat(norm_eps), "must be finite and > 0");
  }
  if (embedding_layer_norm && !IsFinitePositive(embedding_norm_eps)) {
    return InvalidConfig("embedding_norm_eps", absl::StrCat(embedding_norm_eps), "must be finite and > 0");
  }
  if (!IsFinitePositive(embedding_scale)) {
    return InvalidConfig("embedding_scale", absl::StrCat(embedding_scale), "must be finite and > 0");
  }
  const LogitTransform& t = logit_transform;
  if (!std::isfinite(t.logit_scale) || t.logit_scale == 0.0) {
    return InvalidConfig("logit_scale", absl::StrCat(t.logit_scale), "must be finite and != 0");
  }
  if (!IsFinitePositive(t.logits_scaling)) {
    return InvalidConfig("logits_scaling", absl::StrCat(t.logits_scaling), "must be finite and > 0");
  }
  if (!std::isfinite(t.final_logit_softcapping) || t.final_logit_softcapping < 0.0) {
    return InvalidConfig("final_logit_softcapping", absl::StrCat(t.final_logit_softcapping),
                   "must be finite and >= 0 (0 = none)");
  }
  if (!layer_rope.empty()) {
    if (static_cast<int64_t>(layer_rope.size()) != num_hidden_layers) {
      return InvalidConfig("layer_rope", absl::StrCat(layer_rope.size(), " entries"),
                     absl::StrCat("differs from num_hidden_layers = ", num_hidden_layers));
    }
    for (size_t i = 0; i < layer_rope.size(); ++i) {
      if (!layer_rope[i].rotary) continue;
      if (absl::Status s = layer_rope[i].rope.Validate(absl::StrCat("layer_rope[", i, "].rope"));
          !s.ok()) {
        return s;
      }
    }
  }
  if (bos_token_id < -1 || bos_token_id >= vocab_size) {
    return InvalidConfig("bos_token_id", absl::StrCat(bos_token_id),
                   absl::StrCat("must be -1 (none) or in [0, vocab_size = ", vocab_size, ")"));
  }
  if (eos_token_id < -1 || eos_token_id >= vocab_size) {
    return InvalidConfig("eos_token_id", absl::StrCat(eos_token_id),
                   absl::StrCat("must be -1 (none) or in [0, vocab_size = ", vocab_size, ")"));
  }
  return absl::OkStatus();
}

absl::StatusOr<LayerRope> ModelConfig::RopeOfLayer(int64_t layer) const {
  if (position_scheme != PositionScheme::kRope) {
    return absl::FailedPreconditionError(
        absl::StrCat("model_type \"", architecture, "\" has no rotary positions"));
  }
  if (layer < 0 || layer >= num_hidden_layers) {
    return InvalidConfig("layer", absl::StrCat(layer),
                   absl::StrCat("is outside [0, num_hidden_layers = ", num_hidden_layers, ")"));
  }
  if (layer_rope.empty()) {
    LayerRope out;
    out.rope = rope;
    return out;
  }
  return layer_rope[static_cast<size_t>(layer)];
}

}  // namespace vocabd
