#include "server/proto_convert.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "proto/tensor_codec.h"
#include "server/model_serving_options.h"

namespace vocabd {
namespace {

absl::StatusOr<RopeScalingType> ScalingTypeFromProto(v1::RopeScalingType type) {
  switch (type) {
    case v1::ROPE_SCALING_TYPE_UNSPECIFIED:
    case v1::ROPE_SCALING_DEFAULT: return RopeScalingType::kDefault;
    case v1::ROPE_SCALING_LINEAR: return RopeScalingType::kLinear;
    case v1::ROPE_SCALING_DYNAMIC: return RopeScalingType::kDynamic;
    case v1::ROPE_SCALING_YARN: return RopeScalingType::kYarn;
    case v1::ROPE_SCALING_LLAMA3: return RopeScalingType::kLlama3;
    case v1::ROPE_SCALING_LONGROPE: return RopeScalingType::kLongrope;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("rope.scaling.type = ", static_cast<int>(type), " is not a known type"));
  }
}

v1::RopeScalingType ScalingTypeToProto(RopeScalingType type) {
  switch (type) {
    case RopeScalingType::kDefault: return v1::ROPE_SCALING_DEFAULT;
    case RopeScalingType::kLinear: return v1::ROPE_SCALING_LINEAR;
    case RopeScalingType::kDynamic: return v1::ROPE_SCALING_DYNAMIC;
    case RopeScalingType::kYarn: return v1::ROPE_SCALING_YARN;
    case RopeScalingType::kLlama3: return v1::ROPE_SCALING_LLAMA3;
    case RopeScalingType::kLongrope: return v1::ROPE_SCALING_LONGROPE;
  }
  return v1::ROPE_SCALING_TYPE_UNSPECIFIED;
}

v1::PositionScheme PositionSchemeToProto(PositionScheme scheme) {
  switch (scheme) {
    case PositionScheme::kNone: return v1::POSITION_NONE;
    case PositionScheme::kRope: return v1::POSITION_ROPE;
    case PositionScheme::kLearned: return v1::POSITION_LEARNED;
    case PositionScheme::kSinusoidal: return v1::POSITION_SINUSOIDAL;
    case PositionScheme::kAlibi: return v1::POSITION_ALIBI;
  }
  return v1::POSITION_SCHEME_UNSPECIFIED;
}

v1::NormKind NormKindToProto(NormKind kind) {
  switch (kind) {
    case NormKind::kNone: return v1::NORM_NONE;
    case NormKind::kRmsNorm: return v1::RMS_NORM;
    case NormKind::kLayerNorm: return v1::LAYER_NORM;
  }
  return v1::NORM_KIND_UNSPECIFIED;
}

}  // namespace

absl::StatusOr<RopeOverrides> RopeOverridesFromProto(const v1::RopeConfig& request) {
  RopeOverrides out;
  if (request.theta() != 0) out.theta = request.theta();
  if (request.head_dim() != 0) out.head_dim = request.head_dim();
  if (request.rotary_dim() != 0) out.rotary_dim = request.rotary_dim();
  if (request.partial_rotary_factor() != 0) {
    out.partial_rotary_factor = request.partial_rotary_factor();
  }
  switch (request.pair_layout()) {
    case v1::ROPE_PAIR_LAYOUT_UNSPECIFIED: break;
    case v1::INTERLEAVED: out.pair_layout = RopePairLayout::kInterleaved; break;
    case v1::HALF_SPLIT: out.pair_layout = RopePairLayout::kHalfSplit; break;
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          "rope.pair_layout = ", static_cast<int>(request.pair_layout()), " is not a known layout"));
  }
  if (request.has_scaling()) {
    const v1::RopeScaling& s = request.scaling();
    RopeScaling& scaling = out.scaling.emplace();
    auto type = ScalingTypeFromProto(s.type());
    if (!type.ok()) return type.status();
    scaling.type = *type;
    if (s.factor() != 0) scaling.factor = s.factor();
    scaling.original_max_position_embeddings = s.original_max_position_embeddings();
    if (s.has_low_freq_factor()) scaling.low_freq_factor = s.low_freq_factor();
    if (s.has_high_freq_factor()) scaling.high_freq_factor = s.high_freq_factor();
    if (s.has_beta_fast()) scaling.beta_fast = s.beta_fast();
    if (s.has_beta_slow()) scaling.beta_slow = s.beta_slow();
    if (s.has_mscale()) scaling.mscale = s.mscale();
    if (s.has_mscale_all_dim()) scaling.mscale_all_dim = s.mscale_all_dim();
    if (s.has_attention_factor()) scaling.attention_factor = s.attention_factor();
    if (s.has_truncate()) scaling.truncate = s.truncate();
    scaling.short_factor.assign(s.short_factor().begin(), s.short_factor().end());
    scaling.long_factor.assign(s.long_factor().begin(), s.long_factor().end());
  }
  if (request.max_position_embeddings() != 0) {
    out.max_position_embeddings = request.max_position_embeddings();
  }
  return out;
}

v1::RopeConfig RopeParamsToProto(const RopeParams& params) {
  v1::RopeConfig out;
  out.set_theta(params.theta);
  out.set_head_dim(params.head_dim);
  out.set_rotary_dim(params.rotary_dim);
  out.set_partial_rotary_factor(params.head_dim > 0 ? static_cast<double>(params.rotary_dim) /
                                                          params.head_dim
                                                    : 0.0);
  out.set_pair_layout(params.pair_layout == RopePairLayout::kInterleaved ? v1::INTERLEAVED
                                                                         : v1::HALF_SPLIT);
  out.set_max_position_embeddings(params.max_position_embeddings);
  v1::RopeScaling* s = out.mutable_scaling();
  const RopeScaling& p = params.scaling;
  s->set_type(ScalingTypeToProto(p.type));
  if (p.type != RopeScalingType::kDefault) {
    s->set_factor(p.factor);
    s->set_original_max_position_embeddings(p.original_max_position_embeddings);
    if (p.type == RopeScalingType::kLlama3) {
      s->set_low_freq_factor(p.low_freq_factor);
      s->set_high_freq_factor(p.high_freq_factor);
    }
    if (p.type == RopeScalingType::kYarn) {
      s->set_beta_fast(p.beta_fast);
      s->set_beta_slow(p.beta_slow);
      if (p.mscale != 0) s->set_mscale(p.mscale);
      if (p.mscale_all_dim != 0) s->set_mscale_all_dim(p.mscale_all_dim);
      s->set_truncate(p.truncate);
    }
    if (p.attention_factor != 0) s->set_attention_factor(p.attention_factor);
    for (double f : p.short_factor) s->add_short_factor(f);
    for (double f : p.long_factor) s->add_long_factor(f);
  }
  return out;
}

absl::StatusOr<QkvLayout> QkvLayoutFromProto(v1::QkvLayout layout) {
  switch (layout) {
    case v1::QKV_LAYOUT_UNSPECIFIED:
    case v1::BHSD: return QkvLayout::kBHSD;
    case v1::BSHD: return QkvLayout::kBSHD;
    case v1::THD: return QkvLayout::kTHD;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("layout = ", static_cast<int>(layout), " is not a known layout"));
  }
}

std::string HeadVariantName(const LogitTransform& t) {
  std::vector<std::string> parts;
  if (t.logit_scale != 1.0) parts.push_back(absl::StrCat("logit_scale(", t.logit_scale, ")"));
  if (t.logits_scaling != 1.0) {
    parts.push_back(absl::StrCat("logits_scaling(", t.logits_scaling, ")"));
  }
  if (t.final_logit_softcapping > 0.0) {
    parts.push_back(absl::StrCat("softcap(", t.final_logit_softcapping, ")"));
  }
  return parts.empty() ? "plain" : absl::StrJoin(parts, " + ");
}

v1::ModelInfo ModelToProto(const Model& model, bool is_default) {
  const ModelConfig& cfg = model.config();
  v1::ModelInfo info;
  info.set_name(model.name());
  info.set_state(v1::READY);
  info.set_architecture(cfg.architecture);
  info.set_vocab_size(cfg.vocab_size);
  info.set_hidden_size(cfg.hidden_size);
  info.set_num_hidden_layers(cfg.num_hidden_layers);
  info.set_num_attention_heads(cfg.num_attention_heads);
  info.set_num_key_value_heads(cfg.num_key_value_heads);
  info.set_head_dim(cfg.head_dim);
  info.set_max_position_embeddings(cfg.max_position_embeddings);
  info.set_dtype(DTypeToProto(model.serving_dtype()));
  info.set_tie_word_embeddings(cfg.tie_word_embeddings);
  info.set_position_scheme(PositionSchemeToProto(cfg.position_scheme));
  if (cfg.position_scheme == PositionScheme::kRope) {
    *info.mutable_rope() = RopeParamsToProto(cfg.rope);
  }
  info.mutable_final_norm()->set_kind(NormKindToProto(cfg.final_norm_kind));
  info.mutable_final_norm()->set_eps(cfg.norm_eps);
  info.mutable_final_norm()->set_eps_key(cfg.norm_eps_key);
  info.mutable_final_norm()->set_one_plus_weight(cfg.norm_one_plus_weight);
  info.mutable_final_norm()->set_without_bias(cfg.norm_without_bias);
  info.set_embedding_scale(cfg.embedding_scale);
  info.set_family(cfg.family);
  info.set_embedding_scale_source(cfg.embedding_scale_source);
  switch (cfg.embedding_scale_rounding) {
    case EmbeddingScaleRounding::kScaleAndProduct:
      info.set_embedding_scale_rounding("scale_and_product_in_dtype");
      break;
    case EmbeddingScaleRounding::kProduct: info.set_embedding_scale_rounding("product_in_dtype"); break;
    case EmbeddingScaleRounding::kFloat32: info.set_embedding_scale_rounding("float32"); break;
  }
  v1::EmbeddingNorm* embedding_norm = info.mutable_embedding_norm();
  embedding_norm->set_kind(cfg.embedding_layer_norm ? v1::LAYER_NORM : v1::NORM_NONE);
  if (cfg.embedding_layer_norm) {
    embedding_norm->set_eps(cfg.embedding_norm_eps);
    embedding_norm->set_eps_key(cfg.embedding_norm_eps_key);
  }
  info.set_embedding_token_type(cfg.embedding_token_type);
  v1::HeadVariant* head = info.mutable_head_variant();
  head->set_name(HeadVariantName(cfg.logit_transform));
  head->set_logit_scale(cfg.logit_transform.logit_scale);
  head->set_logits_scaling(cfg.logit_transform.logits_scaling);
  head->set_final_logit_softcapping(cfg.logit_transform.final_logit_softcapping);
  for (size_t i = 0; i < cfg.layer_rope.size(); ++i) {
    const LayerRope& l = cfg.layer_rope[i];
    v1::LayerRope* out = info.add_layer_rope();
    out->set_layer(static_cast<int32_t>(i));
    out->set_rotary(l.rotary);
    out->set_attention_type(l.attention_type);
    if (l.rotary) *out->mutable_rope() = RopeParamsToProto(l.rope);
  }
  info.set_learned_position_offset(cfg.learned_position_offset);
  info.set_learned_position_padding_idx(cfg.learned_position_padding_idx);
  info.set_lm_head_unsupported_reason(cfg.lm_head_unsupported_reason);
  info.set_bos_token_id(cfg.bos_token_id);
  info.set_eos_token_id(cfg.eos_token_id);
  info.set_resident_bytes(model.resident_bytes());
  for (const SourceFileInfo& f : model.checkpoint().SourceFilesSnapshot()) {
    v1::SourceFile* out = info.add_source_files();
    out->set_path(f.path);
    out->set_format(f.format);
    out->set_size_bytes(f.size_bytes);
    out->set_sha256(f.sha256);
    out->set_memory_mapped(f.memory_mapped);
    out->set_sha256_pending(f.sha256_pending);
  }
  info.set_is_default(is_default);
  switch (model.requested_weights_dtype()) {
    case WeightsDType::kAuto: info.set_requested_dtype(v1::DTYPE_UNSPECIFIED); break;
    case WeightsDType::kF32: info.set_requested_dtype(v1::F32); break;
    case WeightsDType::kBF16: info.set_requested_dtype(v1::BF16); break;
    case WeightsDType::kQ8_0: info.set_requested_dtype(v1::DTYPE_UNSPECIFIED); break;
  }
  info.set_requested_weights_type(WeightsDTypeName(model.requested_weights_dtype()));
  for (const auto& [name, t] : model.checkpoint().tensors()) {
    if (!IsCanonicalTensor(name)) continue;
    v1::ServedTensor* out = info.add_served_tensors();
    out->set_name(name);
    out->set_ggml_type(t.type_name());
    out->set_stored_ggml_type(quant::GgmlTypeName(t.stored_type));
    for (int64_t d : t.shape) out->add_shape(d);
    out->set_bytes(static_cast<int64_t>(t.nbytes));
  }
  info.set_dtype_fallback_reason(model.fallback_reason());
  info.set_lm_head_implementation(model.lm_head_implementation());
  info.set_lm_head_memory(model.head_memory());
  if (const Tokenizer* t = model.tokenizer(); t != nullptr) {
    v1::TokenizerInfo* out = info.mutable_tokenizer();
    out->set_kind(t->kind());
    out->set_source(t->source());
    out->set_vocab_size(t->vocab_size());
    out->set_bos_token_id(t->bos_id().value_or(-1));
    out->set_eos_token_id(t->eos_id().value_or(-1));
  } else {
    info.set_tokenizer_missing_reason(model.tokenizer_missing_reason());
  }
  if (const DynamicBatcher* b = model.batcher(); b != nullptr) {
    info.mutable_batching()->set_max_batch_rows(b->options().max_batch_rows);
    info.mutable_batching()->set_max_queue_delay_us(b->options().max_queue_delay_us);
    info.mutable_batching()->set_max_queue_rows(b->options().max_queue_rows);
  }
  return info;
}

absl::StatusOr<EmbedInput> EmbedInputFromProto(const v1::EmbedRequest& request) {
  EmbedInput input;
  const int n = request.sequences_size();
  input.token_ids.resize(n);
  input.position_offsets.resize(n);
  input.position_ids.resize(n);
  for (int b = 0; b < n; ++b) {
    const v1::TokenSequence& seq = request.sequences(b);
    input.token_ids[b].assign(seq.token_ids().begin(), seq.token_ids().end());
    input.position_offsets[b] = seq.position_offset();
    input.position_ids[b].assign(seq.position_ids().begin(), seq.position_ids().end());
  }
  if (request.has_learned_position_offset()) {
    input.learned_position_offset = request.learned_position_offset();
  }
  input.allow_beyond_trained_length = request.allow_beyond_trained_length();
  switch (request.absolute_positions()) {
    case v1::ABSOLUTE_POSITIONS_MODEL_DEFAULT:
      input.absolute_positions = AbsolutePositionsMode::kModelDefault;
      break;
    case v1::ABSOLUTE_POSITIONS_NONE: input.absolute_positions = AbsolutePositionsMode::kNone; break;
    case v1::ABSOLUTE_POSITIONS_SINUSOIDAL:
      input.absolute_positions = AbsolutePositionsMode::kSinusoidal;
      break;
    case v1::ABSOLUTE_POSITIONS_LEARNED:
      input.absolute_positions = AbsolutePositionsMode::kLearned;
      break;
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          "absolute_positions = ", static_cast<int>(request.absolute_positions()),
          " is not a known value"));
  }
  switch (request.embedding_scale()) {
    case v1::EMBEDDING_SCALE_MODEL_DEFAULT:
      input.embedding_scale = EmbeddingScaleMode::kModelDefault;
      break;
    case v1::EMBEDDING_SCALE_NONE: input.embedding_scale = EmbeddingScaleMode::kNone; break;
    case v1::EMBEDDING_SCALE_SQRT_HIDDEN:
      input.embedding_scale = EmbeddingScaleMode::kSqrtHidden;
      break;
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          "embedding_scale = ", static_cast<int>(request.embedding_scale()),
          " is not a known value"));
  }
  return input;
}

}  // namespace vocabd
