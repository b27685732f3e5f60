#include "lib/checkpoint/gguf_checkpoint.h"

#include <cmath>
#include <cstring>
#include <map>
#include <optional>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "lib/checkpoint/families.h"
#include "lib/core/dtype.h"
#include "lib/quant/dequantize.h"
#include "lib/quant/ggml_types.h"
#include "lib/positions/rope_gguf.h"
#include "lib/core/status_macros.h"

namespace vocabd {
namespace {

class Meta {
 public:
  Meta(const GgufFile& file, std::string path, std::string arch)
      : file_(file), path_(std::move(path)), arch_(std::move(arch)) {}

  absl::Status Error(const std::string& key, const std::string& rule) const {
    return absl::InvalidArgumentError(absl::StrCat(path_, ": GGUF key \"", key, "\" ", rule));
  }
  std::string Key(const std::string& suffix) const { return absl::StrCat(arch_, ".", suffix); }

  absl::StatusOr<std::optional<int64_t>> Int(const std::string& key) const {
    const GgufValue* v = file_.Find(key);
    if (v == nullptr) return std::optional<int64_t>();
    if (!v->is_integer()) return Error(key, "must be an integer");
    if (v->type == GgufValueType::kU64 && v->u > static_cast<uint64_t>(INT64_MAX)) {
      return Error(key, absl::StrCat("= ", v->u, " does not fit in int64"));
    }
    return std::optional<int64_t>(v->i);
  }
  absl::StatusOr<int64_t> PositiveInt(const std::string& key, std::optional<int64_t> fallback,
                                      int64_t max = INT32_MAX) const {
    std::optional<int64_t> v;
    ASSIGN_OR_RETURN(v, Int(key));
    if (!v.has_value()) {
      if (!fallback.has_value()) return Error(key, "is required but missing");
      v = fallback;
    }
    if (*v <= 0 || *v > max) return Error(key, absl::StrCat("= ", *v, " must be in [1, ", max, "]"));
    return *v;
  }
  absl::StatusOr<std::optional<double>> Float(const std::string& key) const {
    const GgufValue* v = file_.Find(key);
    if (v == nullptr) return std::optional<double>();
    if (v->is_float()) return std::optional<double>(v->f);
    if (v->is_integer()) return std::optional<double>(static_cast<double>(v->i));
    return Error(key, "must be a number");
  }
  absl::StatusOr<std::optional<std::string>> String(const std::string& key) const {
    const GgufValue* v = file_.Find(key);
    if (v == nullptr) return std::optional<std::string>();
    if (v->type != GgufValueType::kString) return Error(key, "must be a string");
    return std::optional<std::string>(v->s);
  }

 private:
  const GgufFile& file_;
  std::string path_;
  std::string arch_;
};

// GGUF llama per-layer names -> HF names (checkpoint.h).
std::optional<std::string> LlamaLayerName(const std::string& name) {
  static const std::map<std::string, std::string>* const kNames =
      new std::map<std::string, std::string>{
          {"attn_norm", "input_layernorm"},      {"attn_q", "self_attn.q_proj"},
          {"attn_k", "self_attn.k_proj"},        {"attn_v", "self_attn.v_proj"},
          {"attn_output", "self_attn.o_proj"},   {"ffn_norm", "post_attention_layernorm"},
          {"ffn_gate", "mlp.gate_proj"},         {"ffn_up", "mlp.up_proj"},
          {"ffn_down", "mlp.down_proj"}};
  if (name.rfind("blk.", 0) != 0) return std::nullopt;
  const size_t dot = name.find('.', 4);
  if (dot == std::string::npos) return std::nullopt;
  const std::string layer = name.substr(4, dot - 4);
  const std::string rest = name.substr(dot + 1);
  const std::string suffix = ".weight";
  if (rest.size() <= suffix.size() || rest.substr(rest.size() - suffix.size()) != suffix) {
    return std::nullopt;
  }
  auto it = kNames->find(rest.substr(0, rest.size() - suffix.size()));
  if (it == kNames->end()) return std::nullopt;
  return absl::StrCat("model.layers.", layer, ".", it->second, ".weight");
}

std::optional<std::string> CanonicalName(const std::string& name) {
  if (name == "token_embd.weight") return std::string(kEmbedTokens);
  if (name == "output.weight") return std::string(kLmHead);
  if (name == "output.bias") return std::string(kLmHeadBias);
  if (name == "output_norm.weight") return std::string(kFinalNorm);
  if (name == "output_norm.bias") return std::string(kFinalNormBias);
  if (name == "position_embd.weight") return std::string(kPositionEmbeddings);
  if (name == "token_types.weight") return std::string(kTokenTypeEmbeddings);
  if (name == "token_embd_norm.weight") return std::string(kEmbedNorm);
  if (name == "token_embd_norm.bias") return std::string(kEmbedNormBias);
  return std::nullopt;
}

std::optional<DType> PlainDType(uint32_t type) {
  switch (type) {
    case static_cast<uint32_t>(quant::GgmlType::kF32): return DType::kF32;
    case static_cast<uint32_t>(quant::GgmlType::kF16): return DType::kF16;
    case static_cast<uint32_t>(quant::GgmlType::kBF16): return DType::kBF16;
    case 26: return DType::kI32;
    case 27: return DType::kI64;
    default: return std::nullopt;
  }
}

// F32/F16/BF16 1-D tensor -> doubles (GGUF rope factor tensors).
absl::StatusOr<std::vector<double>> FactorTensor(const GgufTensorInfo& t, const uint8_t* base,
                                                 const std::string& path) {
  const std::optional<DType> dtype = PlainDType(t.type);
  if (t.ne.size() != 1 || !dtype.has_value() ||
      (*dtype != DType::kF32 && *dtype != DType::kF16 && *dtype != DType::kBF16)) {
    const quant::GgmlTypeInfo* type = quant::FindGgmlType(t.type);
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": tensor \"", t.name, "\" must be a 1-D F32/F16/BF16 tensor, got ", t.ne.size(),
        " dims of ggml type ", type != nullptr ? type->name : "?"));
  }
  const size_t n = static_cast<size_t>(t.num_elements());
  std::vector<float> values(n);
  ConvertToF32(*dtype, base + t.offset, n, values.data());
  return std::vector<double>(values.begin(), values.end());
}

// The RoPE metadata (<arch>.context_length, <arch>.rope.*) and factor
// tensors of `gguf` for RopeParamsFromGguf.
absl::StatusOr<GgufRopeInput> RopeInputFromGguf(const GgufFile& gguf, const MappedFile& file,
                                                const std::string& arch, int head_dim,
                                                RopePairLayout layout, const std::string& path) {
  GgufRopeInput in;
  in.arch = arch;
  in.head_dim = head_dim;
  in.pair_layout = layout;
  const std::string context_key = absl::StrCat(arch, ".context_length");
  const std::string rope_prefix = absl::StrCat(arch, ".rope.");
  for (const auto& [key, value] : gguf.metadata) {
    if (key != context_key && key.rfind(rope_prefix, 0) != 0) continue;
    if (value.is_integer()) {
      if (value.type == GgufValueType::kU64 && value.u > static_cast<uint64_t>(INT64_MAX)) {
        return absl::InvalidArgumentError(absl::StrCat(path, ": GGUF key \"", key, "\" = ",
                                                       value.u, " does not fit in int64"));
      }
      in.metadata[key] = GgufRopeValue::Int(value.i);
    } else if (value.is_float()) {
      in.metadata[key] = GgufRopeValue::Float(value.f);
    } else if (value.type == GgufValueType::kString) {
      in.metadata[key] = GgufRopeValue::String(value.s);
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": GGUF key \"", key, "\" must be a number or string, got an array"));
    }
  }
  const std::pair<const char*, std::vector<double>*> tensors[] = {
      {"rope_factors_long.weight", &in.rope_factors_long},
      {"rope_factors_short.weight", &in.rope_factors_short},
      {"rope_freqs.weight", &in.rope_freqs}};
  for (const auto& [name, out] : tensors) {
    if (const GgufTensorInfo* t = gguf.FindTensor(name); t != nullptr) {
      ASSIGN_OR_RETURN(*out, FactorTensor(*t, file.data(), path));
    }
  }
  return in;
}


// llama.cpp's per-layer RoPE rules for the family (llama-model.cpp
// load_hparams and the arch's graph):
//   gemma2, gpt-oss: set_swa_pattern(2), one RoPE (attention types listed)
//   gemma3: set_swa_pattern(6); SWA layers rope_freq_base_train_swa = 10000
//     (<arch>.rope.freq_base_swa when present) with freq scale 1, the
//     others <arch>.rope.freq_base and the scaling keys
//   cohere2: set_swa_pattern(4); RoPE on SWA layers only
//   smollm3: n_no_rope_layer_step = 4: no RoPE where (il + 1) % 4 == 0
//   llama4: as smollm3, unless <arch>.attention.sliding_window = 0 (then
//     every layer rotates)
// set_swa_pattern(n): layer il is SWA iff il % n < n - 1
// (<arch>.attention.sliding_window_pattern overrides n when present).
absl::Status GgufLayerRope(const Meta& m, const FamilyRules& f, ModelConfig* c) {
  if (f.layer_rope == LayerRopeRule::kUniform) return absl::OkStatus();
  std::optional<int64_t> ov;
  if (f.layer_rope == LayerRopeRule::kNoRopeLayers && f.name == std::string("llama4")) {
    ASSIGN_OR_RETURN(ov, m.Int(m.Key("attention.sliding_window")));
    if (ov.has_value() && *ov == 0) return absl::OkStatus();
  }
  if (c->num_hidden_layers > ModelConfig::kMaxPatternLayers) {
    return m.Error(m.Key("block_count"), absl::StrCat("= ", c->num_hidden_layers,
                                                      " is more than ", ModelConfig::kMaxPatternLayers,
                                                      " layers for a per-layer RoPE pattern"));
  }
  int64_t pattern = f.sliding_window_pattern_default;
  ASSIGN_OR_RETURN(ov, m.Int(m.Key("attention.sliding_window_pattern")));
  if (ov.has_value()) pattern = *ov;
  if (f.layer_rope != LayerRopeRule::kNoRopeLayers && pattern <= 0) {
    return m.Error(m.Key("attention.sliding_window_pattern"),
                   absl::StrCat("= ", pattern, " must be > 0"));
  }
  RopeParams local = c->rope;
  if (f.layer_rope == LayerRopeRule::kGemma3LocalGlobal) {
    std::optional<double> base;
    ASSIGN_OR_RETURN(base, m.Float(m.Key("rope.freq_base_swa")));
    local.theta = base.value_or(f.local_theta_default);
    local.scaling = RopeScaling();
  }
  const int n = c->num_hidden_layers;
  c->layer_rope.resize(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    LayerRope& layer = c->layer_rope[static_cast<size_t>(i)];
    layer.rope = c->rope;
    if (f.layer_rope == LayerRopeRule::kNoRopeLayers) {
      layer.rotary = (i + 1) % 4 != 0;  // n_no_rope_layer_step = 4
      continue;
    }
    const bool swa = i % pattern < pattern - 1;
    layer.attention_type = swa ? "sliding_attention" : "full_attention";
    if (f.layer_rope == LayerRopeRule::kCohere2SlidingOnly) layer.rotary = swa;
    if (f.layer_rope == LayerRopeRule::kGemma3LocalGlobal && swa) layer.rope = local;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Checkpoint>> LoadGguf(const std::string& path) {
  ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> file, MappedFile::Open(path));
  ASSIGN_OR_RETURN(GgufFile gguf, ParseGguf(file->data(), file->size(), path));
  auto invalid = [&path](const std::string& rule) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", rule));
  };
  Meta top(gguf, path, "");
  std::optional<std::string> arch;
  ASSIGN_OR_RETURN(arch, top.String("general.architecture"));
  if (!arch.has_value()) return top.Error("general.architecture", "is required but missing");
  const FamilyRules* family = FindGgufFamily(*arch);
  if (family == nullptr) {
    return top.Error("general.architecture",
                     absl::StrCat("= \"", *arch, "\" is not supported (", KnownGgufArchs(), ")"));
  }
  const FamilyRules& f = *family;
  const Meta m(gguf, path, *arch);

  auto ckpt = std::make_unique<Checkpoint>();
  ModelConfig& c = ckpt->mutable_config();
  c.architecture = *arch;
  c.family = f.name;
  ASSIGN_OR_RETURN(c.hidden_size, m.PositiveInt(m.Key("embedding_length"), std::nullopt));
  ASSIGN_OR_RETURN(c.max_position_embeddings,
                   m.PositiveInt(m.Key("context_length"), std::nullopt, INT64_MAX));
  int64_t v = 0;
  std::optional<int64_t> ov;
  ASSIGN_OR_RETURN(ov, m.Int(m.Key("block_count")));
  if (!ov.has_value()) return m.Error(m.Key("block_count"), "is required but missing");
  if (*ov < 0 || *ov > INT32_MAX) return m.Error(m.Key("block_count"), absl::StrCat("= ", *ov, " is out of range"));
  c.num_hidden_layers = static_cast<int>(*ov);
  ASSIGN_OR_RETURN(v, m.PositiveInt(m.Key("attention.head_count"), std::nullopt));
  c.num_attention_heads = static_cast<int>(v);
  ASSIGN_OR_RETURN(v, m.PositiveInt(m.Key("attention.head_count_kv"), c.num_attention_heads));
  c.num_key_value_heads = static_cast<int>(v);
  ASSIGN_OR_RETURN(v, m.PositiveInt(m.Key("attention.key_length"),
                                    std::max<int64_t>(1, c.hidden_size / c.num_attention_heads)));
  c.head_dim = static_cast<int>(v);
  ASSIGN_OR_RETURN(ov, m.Int(m.Key("feed_forward_length")));
  c.intermediate_size = ov.value_or(0);

  // The family's norm and its llama.cpp eps key.
  std::optional<double> eps;
  c.final_norm_kind = f.norm;
  c.norm_without_bias = f.norm_without_bias;
  if (f.norm != NormKind::kNone) {
    c.norm_eps_key = m.Key(f.norm == NormKind::kRmsNorm ? "attention.layer_norm_rms_epsilon"
                                                        : "attention.layer_norm_epsilon");
    ASSIGN_OR_RETURN(eps, m.Float(c.norm_eps_key));
    if (!eps.has_value()) {
      return m.Error(c.norm_eps_key,
                     absl::StrCat("is required but missing (", f.name, " final norm is ",
                                  f.norm == NormKind::kRmsNorm ? "RMSNorm" : "LayerNorm", ")"));
    }
    c.norm_eps = *eps;
  }
  c.position_scheme = f.positions;
  if (f.embedding_layer_norm) {
    // llama.cpp: token_embd_norm with <arch>.attention.layer_norm_epsilon
    // (bert, nomic-bert, bloom).
    c.embedding_layer_norm = true;
    c.embedding_token_type = f.embedding_token_type;
    c.embedding_norm_eps_key = m.Key("attention.layer_norm_epsilon");
    ASSIGN_OR_RETURN(eps, m.Float(c.embedding_norm_eps_key));
    if (!eps.has_value()) {
      return m.Error(c.embedding_norm_eps_key,
                     absl::StrCat("is required but missing (", f.name,
                                  " applies a LayerNorm to the embeddings)"));
    }
    if (!std::isfinite(*eps) || *eps <= 0.0) {
      return m.Error(c.embedding_norm_eps_key, absl::StrCat("= ", *eps, " must be finite and > 0"));
    }
    c.embedding_norm_eps = *eps;
  }
  if (f.lm_head_unsupported != nullptr) {
    c.lm_head_unsupported_reason = absl::StrCat("architecture \"", *arch,
                                                "\" is served for Embed only: ",
                                                f.lm_head_unsupported);
  }
  if (f.mpt_attn_config) {
    // llama.cpp mpt: ALiBi with <arch>.attention.max_alibi_bias; BLOOM's
    // slopes (GetAlibiSlopes) only for 8 and a power-of-two head count.
    const std::string key = m.Key("attention.max_alibi_bias");
    ASSIGN_OR_RETURN(eps, m.Float(key));
    if (!eps.has_value()) return m.Error(key, "is required but missing (mpt ALiBi)");
    if (*eps != 8.0) {
      return m.Error(key, absl::StrCat("= ", *eps, " is not supported (only 8: the slopes "
                                               "GetAlibiSlopes serves)"));
    }
    if (gguf.FindTensor("position_embd.weight") != nullptr) {
      // llama.cpp adds a learned table when an mpt file has one (MPT
      // without ALiBi); transformers' MptModel has none.
      return invalid("tensor \"position_embd.weight\" is present but mpt is served with ALiBi "
                     "positions only (no learned position table)");
    }
    const int h = c.num_attention_heads;
    if ((h & (h - 1)) != 0) {
      return m.Error(m.Key("attention.head_count"),
                     absl::StrCat("= ", h, " is not supported for mpt: with a head count that is "
                                           "not a power of two its ALiBi slopes differ from the "
                                           "ones GetAlibiSlopes serves"));
    }
  }
  // Embedding multiplier, as llama.cpp's graph applies it to the f32 rows
  // ggml_get_rows returns (no rounding to the table's type).
  c.embedding_scale_rounding = EmbeddingScaleRounding::kFloat32;
  if (f.embedding == EmbeddingScaleRule::kSqrtHidden) {
    c.embedding_scale = std::sqrt(static_cast<double>(c.hidden_size));  // sqrtf(n_embd)
    c.embedding_scale_source = "sqrt(hidden_size)";
  } else if (f.embedding == EmbeddingScaleRule::kConfigKey) {
    const std::string key = m.Key("embedding_scale");
    ASSIGN_OR_RETURN(eps, m.Float(key));
    if (!eps.has_value()) return m.Error(key, absl::StrCat("is required for ", f.name));
    if (!std::isfinite(*eps) || *eps <= 0.0) {
      return m.Error(key, absl::StrCat("= ", *eps, " must be finite and > 0"));
    }
    c.embedding_scale = *eps;
    c.embedding_scale_source = key;
  }
  // Head transform.
  if (f.gguf_logit_scale != GgufLogitScaleRule::kNone) {
    const std::string key = m.Key("logit_scale");
    ASSIGN_OR_RETURN(eps, m.Float(key));
    if (!eps.has_value()) return m.Error(key, absl::StrCat("is required for ", f.name));
    if (!std::isfinite(*eps) || *eps <= 0.0) {
      return m.Error(key, absl::StrCat("= ", *eps, " must be finite and > 0"));
    }
    if (f.gguf_logit_scale == GgufLogitScaleRule::kMultiply) {
      c.logit_transform.logit_scale = *eps;
    } else {
      c.logit_transform.logits_scaling = *eps;
      c.logits_scaling_source = key;
    }
  }
  if (f.gguf_softcap) {
    const std::string key = m.Key("final_logit_softcapping");
    ASSIGN_OR_RETURN(eps, m.Float(key));
    const double cap = eps.value_or(f.gguf_softcap_default);
    if (!std::isfinite(cap) || cap < 0.0) {
      return m.Error(key, absl::StrCat("= ", cap, " must be finite and >= 0"));
    }
    c.logit_transform.final_logit_softcapping = cap;
  }

  if (f.gguf_head_dim_is_rope_dim && c.position_scheme == PositionScheme::kRope) {
    // deepseek2 (MLA): attention.key_length is the full q/k width (nope +
    // rope, or kv_lora_rank + rope); RoPE turns rope.dimension_count of it.
    const std::string key = m.Key("rope.dimension_count");
    ASSIGN_OR_RETURN(v, m.PositiveInt(key, std::nullopt));
    c.head_dim = static_cast<int>(v);
  }
  if (c.position_scheme == PositionScheme::kRope) {
    // Every <arch>.rope.* key and rope factor tensor is read by
    // RopeParamsFromGguf (lib/positions/rope_gguf.h), the one GGUF -> RoPE mapping.
    ASSIGN_OR_RETURN(GgufRopeInput rope_input,
                     RopeInputFromGguf(gguf, *file, *arch, c.head_dim, f.gguf_pair_layout, path));
    absl::StatusOr<RopeParams> rope = RopeParamsFromGguf(rope_input);
    if (!rope.ok()) return invalid(std::string(rope.status().message()));
    c.rope = *std::move(rope);
    RETURN_IF_ERROR(GgufLayerRope(m, f, &c));
  } else {
    // No rotary (gpt2: learned positions); rope.* keys are not read.
    c.rope.head_dim = c.head_dim;
    c.rope.rotary_dim = c.head_dim;
    c.rope.pair_layout = f.gguf_pair_layout;
    c.rope.max_position_embeddings = c.max_position_embeddings;
  }
  ASSIGN_OR_RETURN(ov, m.Int("tokenizer.ggml.bos_token_id"));
  c.bos_token_id = ov.value_or(-1);
  ASSIGN_OR_RETURN(ov, m.Int("tokenizer.ggml.eos_token_id"));
  c.eos_token_id = ov.value_or(-1);

  const GgufTensorInfo* embd = gguf.FindTensor("token_embd.weight");
  if (embd == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, ": required tensor \"token_embd.weight\" is missing"));
  }
  if (embd->ne.size() != 2) {
    return invalid(absl::StrCat("tensor \"token_embd.weight\" has ", embd->ne.size(),
                                " dims, expected 2 ([hidden, vocab] in ggml order)"));
  }
  c.vocab_size = static_cast<int64_t>(embd->ne[1]);
  ASSIGN_OR_RETURN(ov, m.Int(m.Key("vocab_size")));
  if (ov.has_value() && *ov != c.vocab_size) {
    return m.Error(m.Key("vocab_size"), absl::StrCat("= ", *ov, " but token_embd.weight has ",
                                                     c.vocab_size, " rows"));
  }
  // Token ids may be u32 -1 ("none") in some files.
  if (c.bos_token_id >= c.vocab_size || c.bos_token_id == UINT32_MAX) c.bos_token_id = -1;
  if (c.eos_token_id >= c.vocab_size || c.eos_token_id == UINT32_MAX) c.eos_token_id = -1;
  c.tie_word_embeddings = gguf.FindTensor("output.weight") == nullptr;

  bool any_mapped = false;
  for (const GgufTensorInfo& t : gguf.tensors) {
    std::optional<std::string> name = CanonicalName(t.name);
    const bool canonical = name.has_value();
    if (!canonical && *arch == "llama") name = LlamaLayerName(t.name);
    if (canonical && *name == kFinalNormBias && f.norm_without_bias) {
      return invalid(absl::StrCat("tensor \"", t.name, "\" is present but ", f.name,
                                  " has a LayerNorm without bias"));
    }
    if (!name.has_value()) name = t.name;
    const uint8_t* src = file->data() + t.offset;
    const size_t n = static_cast<size_t>(t.num_elements());
    WeightTensor w;
    w.shape = t.shape();
    const std::optional<DType> plain = PlainDType(t.type);
    const quant::GgmlTypeInfo* type = quant::FindGgmlType(t.type);  // known: ParseGguf checked
    const bool quantized = type->block_size > 1;
    // Quantized data holds F32 values once dequantized (as ggml computes).
    w.stored_dtype = plain.value_or(DType::kF32);
    w.stored_type = quant::GgmlType::kF32;
    if (plain.has_value()) {
      w.stored_type = *plain == DType::kF16    ? quant::GgmlType::kF16
                      : *plain == DType::kBF16 ? quant::GgmlType::kBF16
                                               : quant::GgmlType::kF32;
    } else if (quantized) {
      w.stored_type = static_cast<quant::GgmlType>(t.type);
    }
    const bool table = canonical && IsTableTensor(*name);
    const bool served_quant =
        quantized && quant::IsServedType(static_cast<quant::GgmlType>(t.type));
    if (table && quantized) {
      if (!served_quant) {
        return invalid(absl::StrCat(
            "tensor \"", t.name, "\" has ggml type ", type->name,
            ", which vocabd does not serve (served: f32, f16, bf16, q4_0, q4_1, q5_0, q5_1, "
            "q8_0, q2_K, q3_K, q4_K, q5_K, q6_K, iq4_nl)"));
      }
      // Served in place from the mapping: no dequantization, no copy (ggml
      // blocks are byte-aligned structs).
      w.quant_type = static_cast<quant::GgmlType>(t.type);
      w.dtype = DType::kF32;
      w.data = src;
      w.nbytes = static_cast<size_t>(t.nbytes);
      any_mapped = true;
    } else if (canonical && !table &&
               (served_quant || (plain.has_value() && (*plain == DType::kF16 ||
                                                       *plain == DType::kBF16)))) {
      // Small canonical tensors (norms, biases, positions): F32, converted
      // once (quantized ones dequantized exactly as ggml).
      std::vector<uint8_t> buffer(n * sizeof(float));
      quant::DequantizeRow(served_quant ? static_cast<quant::GgmlType>(t.type)
                                        : GgmlTypeOf(*plain),
                           src, static_cast<int64_t>(n), reinterpret_cast<float*>(buffer.data()));
      ckpt->AdoptBuffer(std::move(buffer));
      w.dtype = DType::kF32;
      w.data = ckpt->last_buffer().data();
      w.nbytes = n * sizeof(float);
    } else if (canonical && !plain.has_value()) {
      return invalid(absl::StrCat("tensor \"", t.name, "\" has ggml type ", type->name,
                                  ", which vocabd does not serve for it (f32, f16, bf16 or a "
                                  "served quant type)"));
    } else if (plain.has_value()) {
      // In place (data offsets are aligned to general.alignment >= 1; copy
      // when the element type needs more). F32/BF16/F16 tables included:
      // the model converts an F16 table once, from here, into its dtype.
      if (reinterpret_cast<uintptr_t>(src) % DTypeSize(*plain) != 0) {
        ckpt->AdoptBuffer(std::vector<uint8_t>(src, src + t.nbytes));
        w.data = ckpt->last_buffer().data();
      } else {
        w.data = src;
        any_mapped = true;
      }
      w.dtype = *plain;
      w.nbytes = static_cast<size_t>(t.nbytes);
    } else {
      continue;  // quantized non-canonical tensor: not exposed
    }
    ckpt->AddTensor(*name, std::move(w));
  }
  SourceFileInfo info = DescribeSourceFile(*file, "gguf");
  info.memory_mapped = any_mapped;
  ckpt->AddFile(std::move(file), std::move(info));
  RETURN_IF_ERROR(ckpt->Finalize());
  return ckpt;
}

}  // namespace vocabd
