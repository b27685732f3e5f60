#include "lib/checkpoint/hf_config.h"

#include <cmath>
#include <limits>
#include <optional>
#include "absl/strings/string_view.h"

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "lib/checkpoint/checkpoint.h"
#include "lib/checkpoint/families.h"
#include "lib/core/status_macros.h"

namespace vocabd {
namespace {

using nlohmann::json;

// Reads typed values out of a JSON object and produces errors that name
// the file and the (dotted) key.
class ConfigReader {
 public:
  ConfigReader(const json& obj, std::string file, std::string prefix)
      : obj_(obj), file_(std::move(file)), prefix_(std::move(prefix)) {}

  absl::Status Error(absl::string_view key, absl::string_view rule) const {
    return absl::InvalidArgumentError(
        absl::StrCat(file_, ": key \"", prefix_, key, "\" ", rule));
  }
  absl::Status WrongType(absl::string_view key, const json& v, absl::string_view want) const {
    return Error(key, absl::StrCat("must be ", want, ", got ", v.type_name(), " ", v.dump()));
  }

  // nullptr when absent or JSON null.
  const json* Get(absl::string_view key) const {
    auto it = obj_.find(key);
    if (it == obj_.end() || it->is_null()) return nullptr;
    return &*it;
  }

  absl::StatusOr<int64_t> Int(absl::string_view key, std::optional<int64_t> fallback) const {
    const json* v = Get(key);
    if (v == nullptr) {
      if (fallback.has_value()) return *fallback;
      return Error(key, "is required but missing");
    }
    return AsInt(key, *v);
  }
  absl::StatusOr<int64_t> AsInt(absl::string_view key, const json& v) const {
    if (v.is_number_unsigned()) {
      const uint64_t u = v.get<uint64_t>();
      if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return Error(key, absl::StrCat("= ", v.dump(), " does not fit in int64"));
      }
      return static_cast<int64_t>(u);
    }
    if (v.is_number_integer()) return v.get<int64_t>();
    return WrongType(key, v, "an integer");
  }
  absl::StatusOr<double> Double(absl::string_view key, double fallback) const {
    const json* v = Get(key);
    if (v == nullptr) return fallback;
    return AsDouble(key, *v);
  }
  absl::StatusOr<double> AsDouble(absl::string_view key, const json& v) const {
    if (!v.is_number()) return WrongType(key, v, "a number");
    return v.get<double>();
  }
  absl::StatusOr<bool> Bool(absl::string_view key, bool fallback) const {
    const json* v = Get(key);
    if (v == nullptr) return fallback;
    if (!v->is_boolean()) return WrongType(key, *v, "a boolean");
    return v->get<bool>();
  }
  absl::StatusOr<std::optional<std::string>> String(absl::string_view key) const {
    const json* v = Get(key);
    if (v == nullptr) return std::optional<std::string>();
    if (!v->is_string()) return WrongType(key, *v, "a string");
    return std::optional<std::string>(v->get<std::string>());
  }
  absl::StatusOr<std::vector<double>> Doubles(absl::string_view key) const {
    std::vector<double> out;
    const json* v = Get(key);
    if (v == nullptr) return out;
    if (!v->is_array()) return WrongType(key, *v, "a list of numbers");
    for (size_t i = 0; i < v->size(); ++i) {
      const json& e = (*v)[i];
      if (!e.is_number()) {
        return WrongType(absl::StrCat(key, "[", i, "]"), e, "a number");
      }
      out.push_back(e.get<double>());
    }
    return out;
  }
  // A token id: an integer, a list of integers (the first is used, as for
  // Llama 3's eos list), or null/absent (-1).
  absl::StatusOr<int64_t> TokenId(absl::string_view key) const {
    const json* v = Get(key);
    if (v == nullptr) return int64_t{-1};
    if (v->is_array()) {
      if (v->empty()) return int64_t{-1};
      return AsInt(absl::StrCat(key, "[0]"), (*v)[0]);
    }
    return AsInt(key, *v);
  }

 private:
  const json& obj_;
  std::string file_;
  std::string prefix_;
};

absl::StatusOr<RopeScaling> ParseRopeScaling(const json& top, const json& rs,
                                             const std::string& file_name) {
  ConfigReader top_reader(top, file_name, "");
  if (!rs.is_object()) return top_reader.WrongType("rope_scaling", rs, "an object or null");
  ConfigReader r(rs, file_name, "rope_scaling.");
  RopeScaling s;
  std::optional<std::string> type;
  ASSIGN_OR_RETURN(type, r.String("rope_type"));
  if (!type.has_value()) {
    ASSIGN_OR_RETURN(type, r.String("type"));  // legacy key
  }
  if (!type.has_value()) return r.Error("rope_type", "(or legacy \"type\") is required but missing");
  if (*type == "default") {
    s.type = RopeScalingType::kDefault;
  } else if (*type == "linear") {
    s.type = RopeScalingType::kLinear;
  } else if (*type == "dynamic") {
    s.type = RopeScalingType::kDynamic;
  } else if (*type == "yarn") {
    s.type = RopeScalingType::kYarn;
  } else if (*type == "llama3") {
    s.type = RopeScalingType::kLlama3;
  } else if (*type == "longrope" || *type == "su") {  // "su": legacy Phi-3 name
    s.type = RopeScalingType::kLongrope;
  } else {
    return r.Error("rope_type", absl::StrCat("= \"", *type,
                                             "\" is not supported (default, linear, dynamic, "
                                             "yarn, llama3, longrope)"));
  }
  if (s.type == RopeScalingType::kDefault) return s;
  if (s.type != RopeScalingType::kLongrope && r.Get("factor") == nullptr) {
    return r.Error("factor", absl::StrCat("is required for rope_type \"", *type, "\""));
  }
  ASSIGN_OR_RETURN(s.factor, r.Double("factor", 1.0));
  // Phi-3 keeps original_max_position_embeddings at the top level.
  int64_t top_original = 0;
  ASSIGN_OR_RETURN(top_original, top_reader.Int("original_max_position_embeddings", int64_t{0}));
  ASSIGN_OR_RETURN(s.original_max_position_embeddings,
                r.Int("original_max_position_embeddings", top_original));
  ASSIGN_OR_RETURN(s.low_freq_factor, r.Double("low_freq_factor", s.low_freq_factor));
  ASSIGN_OR_RETURN(s.high_freq_factor, r.Double("high_freq_factor", s.high_freq_factor));
  ASSIGN_OR_RETURN(s.beta_fast, r.Double("beta_fast", s.beta_fast));
  ASSIGN_OR_RETURN(s.beta_slow, r.Double("beta_slow", s.beta_slow));
  ASSIGN_OR_RETURN(s.mscale, r.Double("mscale", s.mscale));
  ASSIGN_OR_RETURN(s.mscale_all_dim, r.Double("mscale_all_dim", s.mscale_all_dim));
  ASSIGN_OR_RETURN(s.attention_factor, r.Double("attention_factor", s.attention_factor));
  ASSIGN_OR_RETURN(s.truncate, r.Bool("truncate", s.truncate));
  ASSIGN_OR_RETURN(s.short_factor, r.Doubles("short_factor"));
  ASSIGN_OR_RETURN(s.long_factor, r.Doubles("long_factor"));
  return s;
}

absl::StatusOr<int> PositiveInt(const ConfigReader& r, const char* key, std::optional<int64_t> fallback) {
  int64_t v = 0;
  ASSIGN_OR_RETURN(v, r.Int(key, fallback));
  if (v <= 0 || v > std::numeric_limits<int>::max()) {
    return r.Error(key, absl::StrCat("= ", v, " must be in [1, 2^31)"));
  }
  return static_cast<int>(v);
}


// A head/embedding multiplier key: the class default when absent, `none`
// for JSON null (HF: `if self.config.final_logit_softcapping is not None`).
absl::StatusOr<double> MultiplierKey(const ConfigReader& r, const json& obj, const char* key,
                                     double class_default, double none) {
  auto it = obj.find(key);
  if (it == obj.end()) return class_default;
  if (it->is_null()) return none;
  return r.AsDouble(key, *it);
}

// Layers with sliding attention: `layer_types` when present (each
// "sliding_attention" or "full_attention"), else HF's default
// (i + 1) % sliding_window_pattern != 0.
absl::StatusOr<std::vector<bool>> SlidingLayers(const ConfigReader& r, int layers, int pattern_default) {
  std::vector<bool> sliding(static_cast<size_t>(layers));
  if (const json* types = r.Get("layer_types"); types != nullptr) {
    if (!types->is_array() || types->size() != static_cast<size_t>(layers)) {
      return r.WrongType("layer_types", *types,
                         absl::StrCat("a list of num_hidden_layers = ", layers, " strings"));
    }
    for (int i = 0; i < layers; ++i) {
      const json& v = (*types)[static_cast<size_t>(i)];
      const std::string key = absl::StrCat("layer_types[", i, "]");
      if (v == "sliding_attention") {
        sliding[static_cast<size_t>(i)] = true;
      } else if (v != "full_attention") {
        return r.Error(key, absl::StrCat("= ", v.dump(),
                                         " is not supported (sliding_attention, full_attention)"));
      }
    }
    return sliding;
  }
  int64_t pattern = 0;
  ASSIGN_OR_RETURN(pattern, r.Int("sliding_window_pattern", int64_t{pattern_default}));
  if (pattern <= 0) {
    return r.Error("sliding_window_pattern", absl::StrCat("= ", pattern, " must be > 0"));
  }
  for (int i = 0; i < layers; ++i) sliding[static_cast<size_t>(i)] = (i + 1) % pattern != 0;
  return sliding;
}

// Llama 4 / SmolLM3 `no_rope_layers` (1 = RoPE, 0 = NoPE; at least one
// entry per layer), else [(i + 1) % no_rope_layer_interval != 0].
absl::StatusOr<std::vector<bool>> RopeLayers(const ConfigReader& r, int layers) {
  std::vector<bool> rotary(static_cast<size_t>(layers));
  if (const json* list = r.Get("no_rope_layers"); list != nullptr && !list->empty()) {
    if (!list->is_array() || list->size() < static_cast<size_t>(layers)) {
      return r.WrongType("no_rope_layers", *list,
                         absl::StrCat("a list of at least num_hidden_layers = ", layers,
                                      " entries 0 / 1"));
    }
    for (int i = 0; i < layers; ++i) {
      const json& v = (*list)[static_cast<size_t>(i)];
      if (!v.is_number_integer() || (v.get<int64_t>() != 0 && v.get<int64_t>() != 1)) {
        return r.Error(absl::StrCat("no_rope_layers[", i, "]"),
                       absl::StrCat("= ", v.dump(), " must be 0 (NoPE) or 1 (RoPE)"));
      }
      rotary[static_cast<size_t>(i)] = v.get<int64_t>() == 1;
    }
    return rotary;
  }
  int64_t interval = 0;
  ASSIGN_OR_RETURN(interval, r.Int("no_rope_layer_interval", int64_t{4}));
  if (interval <= 0) {
    return r.Error("no_rope_layer_interval", absl::StrCat("= ", interval, " must be > 0"));
  }
  for (int i = 0; i < layers; ++i) rotary[static_cast<size_t>(i)] = (i + 1) % interval != 0;
  return rotary;
}

constexpr int kMaxPatternLayers = ModelConfig::kMaxPatternLayers;

}  // namespace

absl::StatusOr<ModelConfig> ParseHfConfig(const std::string& json_text,
                                          const std::string& file_name) {
  json root = json::parse(json_text, /*cb=*/nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) {
    return absl::InvalidArgumentError(absl::StrCat(file_name, ": not valid JSON"));
  }
  if (!root.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(file_name, ": top level is a JSON ", root.type_name(), ", not an object"));
  }
  ConfigReader top(root, file_name, "");
  // Composite models (Llava, ...): the language model's keys sit in a
  // nested `text_config`.
  const json* text = top.Get("text_config");
  if (text != nullptr && !text->is_object()) {
    return top.WrongType("text_config", *text, "an object");
  }
  const json& obj = text != nullptr ? *text : root;
  ConfigReader r(obj, file_name, text != nullptr ? "text_config." : "");
  ModelConfig c;

  std::optional<std::string> model_type;
  ASSIGN_OR_RETURN(model_type, r.String("model_type"));
  if (!model_type.has_value()) {
    // Old configs may lack model_type; accept the architecture name.
    const json* archs = top.Get("architectures");
    if (archs != nullptr && archs->is_array() && !archs->empty() && (*archs)[0].is_string()) {
      const FamilyRules* by_arch = FindHfFamilyByArchitecture((*archs)[0].get<std::string>());
      if (by_arch != nullptr) model_type = by_arch->hf_model_types.front();
    }
    if (!model_type.has_value()) return r.Error("model_type", "is required but missing");
  }
  const FamilyRules* family = FindHfFamily(*model_type);
  if (family == nullptr) {
    return r.Error("model_type", absl::StrCat("= \"", *model_type, "\" is not supported (",
                                              KnownHfModelTypes(), ")"));
  }
  const FamilyRules& f = *family;
  c.architecture = *model_type;
  c.family = f.name;

  ASSIGN_OR_RETURN(c.vocab_size, r.Int("vocab_size", f.vocab_default > 0 ? std::optional<int64_t>(f.vocab_default) : std::nullopt));
  // A size under its key, else under the config class's other name for it
  // (BloomConfig's n_embed, ...). Both present with different values is
  // refused: the config classes do not agree on which one wins.
  auto size_key = [&r](const char* key, const char* alt) -> absl::StatusOr<const char*> {
    if (alt == nullptr || r.Get(alt) == nullptr) return key;
    const json* primary = r.Get(key);
    if (primary == nullptr) return alt;
    if (*primary != *r.Get(alt)) {
      return r.Error(key, absl::StrCat("= ", primary->dump(), " disagrees with key \"", alt,
                                       "\" = ", r.Get(alt)->dump(),
                                       " (the same size under two names)"));
    }
    return key;
  };
  const char* hidden_key = nullptr;
  const char* layers_key = nullptr;
  const char* heads_key = nullptr;
  ASSIGN_OR_RETURN(hidden_key, size_key(f.hidden, f.hidden_alt));
  ASSIGN_OR_RETURN(layers_key, size_key(f.layers, f.layers_alt));
  ASSIGN_OR_RETURN(heads_key, size_key(f.heads, f.heads_alt));
  int hidden = 0;
  ASSIGN_OR_RETURN(hidden, PositiveInt(r, hidden_key, std::nullopt));
  c.hidden_size = hidden;
  int64_t v = 0;
  ASSIGN_OR_RETURN(v, r.Int(layers_key, std::nullopt));
  if (v < 0 || v > std::numeric_limits<int>::max()) {
    return r.Error(layers_key, absl::StrCat("= ", v, " is out of range"));
  }
  c.num_hidden_layers = static_cast<int>(v);
  ASSIGN_OR_RETURN(c.num_attention_heads, PositiveInt(r, heads_key, f.heads_default > 0 ? std::optional<int64_t>(f.heads_default) : std::nullopt));
  if (f.falcon_kv_heads) {
    // FalconConfig / FalconAttention: num_kv_heads if new_decoder_architecture,
    // else 1 if multi_query, else num_attention_heads.
    bool new_arch = false, multi_query = true;
    ASSIGN_OR_RETURN(new_arch, r.Bool("new_decoder_architecture", false));
    ASSIGN_OR_RETURN(multi_query, r.Bool("multi_query", true));
    if (new_arch) {
      // RefinedWeb configs (falcon-40b's first upload) name it n_head_kv.
      const char* kv_key = r.Get("num_kv_heads") == nullptr && r.Get("n_head_kv") != nullptr
                               ? "n_head_kv"
                               : "num_kv_heads";
      ASSIGN_OR_RETURN(c.num_key_value_heads, PositiveInt(r, kv_key, c.num_attention_heads));
    } else {
      c.num_key_value_heads = multi_query ? 1 : c.num_attention_heads;
    }
  } else if (f.kv_heads != nullptr) {
    ASSIGN_OR_RETURN(c.num_key_value_heads,
                     PositiveInt(r, f.kv_heads,
                                 f.kv_heads_default > 0 ? f.kv_heads_default : c.num_attention_heads));
  } else {
    c.num_key_value_heads = c.num_attention_heads;
  }
  const int64_t head_dim_default =
      f.head_dim_default > 0 ? f.head_dim_default : c.hidden_size / c.num_attention_heads;
  ASSIGN_OR_RETURN(c.head_dim, PositiveInt(r, f.head_dim_key, head_dim_default));
  if (f.intermediate != nullptr) {
    ASSIGN_OR_RETURN(c.intermediate_size, r.Int(f.intermediate, f.intermediate_default > 0 ? std::optional<int64_t>(f.intermediate_default) : std::nullopt));
  } else if (f.intermediate_ratio_key != nullptr) {
    int64_t ratio = 0;
    ASSIGN_OR_RETURN(ratio, r.Int(f.intermediate_ratio_key, int64_t{4}));
    c.intermediate_size = ratio * c.hidden_size;
  } else {
    ASSIGN_OR_RETURN(c.intermediate_size, r.Int("n_inner", 4 * c.hidden_size));  // gpt2
  }
  if (f.max_positions != nullptr) {
    ASSIGN_OR_RETURN(c.max_position_embeddings, r.Int(f.max_positions, f.max_positions_default > 0 ? std::optional<int64_t>(f.max_positions_default) : std::nullopt));
  }
  ASSIGN_OR_RETURN(c.norm_eps, r.Double(f.eps, f.eps_default));
  c.final_norm_kind = f.norm;
  c.norm_eps_key = f.norm == NormKind::kNone ? "" : f.eps;
  c.norm_one_plus_weight = f.norm_one_plus_weight;
  c.norm_without_bias = f.norm_without_bias;
  c.position_scheme = f.positions;
  // tie_word_embeddings: text_config's value wins (HF get_text_config()),
  // then the top level, then the config class default.
  bool tie = f.tie_default;
  ASSIGN_OR_RETURN(tie, top.Bool("tie_word_embeddings", tie));
  if (text != nullptr) {
    ASSIGN_OR_RETURN(tie, r.Bool("tie_word_embeddings", tie));
  }
  c.tie_word_embeddings = tie;
  ASSIGN_OR_RETURN(c.bos_token_id, r.TokenId("bos_token_id"));
  if (c.bos_token_id < 0) {
    ASSIGN_OR_RETURN(c.bos_token_id, top.TokenId("bos_token_id"));
  }
  ASSIGN_OR_RETURN(c.eos_token_id, r.TokenId("eos_token_id"));
  if (c.eos_token_id < 0) {
    ASSIGN_OR_RETURN(c.eos_token_id, top.TokenId("eos_token_id"));
  }
  switch (f.embedding) {
    case EmbeddingScaleRule::kOne:
      break;
    case EmbeddingScaleRule::kSqrtHidden:
      // GemmaModel / Gemma2Model: torch.tensor(hidden_size**0.5, dtype=hidden.dtype);
      // Gemma3TextScaledWordEmbedding: embed_scale.to(weight.dtype).
      c.embedding_scale = std::sqrt(static_cast<double>(c.hidden_size));
      c.embedding_scale_source = "sqrt(hidden_size)";
      c.embedding_scale_rounding = EmbeddingScaleRounding::kScaleAndProduct;
      break;
    case EmbeddingScaleRule::kConfigKey:
      // GraniteModel.forward: inputs_embeds * self.embedding_multiplier (a
      // Python float: product in float32, rounded once to the dtype).
      ASSIGN_OR_RETURN(c.embedding_scale, r.Double(f.embedding_key, f.embedding_default));
      if (!std::isfinite(c.embedding_scale) || c.embedding_scale <= 0.0) {
        return r.Error(f.embedding_key,
                       absl::StrCat("= ", c.embedding_scale, " must be finite and > 0"));
      }
      c.embedding_scale_source = f.embedding_key;
      c.embedding_scale_rounding = EmbeddingScaleRounding::kProduct;
      break;
  }
  // Head transform keys (class default when absent, none for null).
  LogitTransform& head = c.logit_transform;
  if (f.logit_scale_key != nullptr) {
    ASSIGN_OR_RETURN(head.logit_scale,
                     MultiplierKey(r, obj, f.logit_scale_key, f.logit_scale_default, 1.0));
    if (!std::isfinite(head.logit_scale) || head.logit_scale == 0.0) {
      return r.Error(f.logit_scale_key,
                     absl::StrCat("= ", head.logit_scale, " must be finite and != 0"));
    }
  }
  if (f.logits_scaling_key != nullptr) {
    ASSIGN_OR_RETURN(head.logits_scaling,
                     MultiplierKey(r, obj, f.logits_scaling_key, f.logits_scaling_default, 1.0));
    if (!std::isfinite(head.logits_scaling) || head.logits_scaling <= 0.0) {
      return r.Error(f.logits_scaling_key,
                     absl::StrCat("= ", head.logits_scaling, " must be finite and > 0"));
    }
  }
  if (f.softcap_key != nullptr) {
    ASSIGN_OR_RETURN(head.final_logit_softcapping,
                     MultiplierKey(r, obj, f.softcap_key, f.softcap_default, 0.0));
    if (!std::isfinite(head.final_logit_softcapping) || head.final_logit_softcapping < 0.0) {
      return r.Error(f.softcap_key, absl::StrCat("= ", head.final_logit_softcapping,
                                                 " must be finite and > 0 (or null: none)"));
    }
  }
  if (f.roberta) {
    std::optional<std::string> type;
    ASSIGN_OR_RETURN(type, r.String("position_embedding_type"));
    if (type.has_value() && *type != "absolute") {
      return r.Error("position_embedding_type",
                     absl::StrCat("= \"", *type, "\" is not supported (only \"absolute\": a learned "
                                  "table added to the embeddings)"));
    }
    // HF RobertaEmbeddings: padding_idx = config.pad_token_id (RobertaConfig
    // default 1); real tokens are numbered from padding_idx + 1.
    int64_t pad = 0;
    ASSIGN_OR_RETURN(pad, r.Int("pad_token_id", int64_t{1}));
    if (pad < 0) return r.Error("pad_token_id", absl::StrCat("= ", pad, " must be >= 0"));
    c.learned_position_padding_idx = pad;
    c.learned_position_offset = pad + 1;
    c.lm_head_unsupported_reason = absl::StrCat(
        "model_type \"", *model_type,
        "\" is served for Embed only: its masked-LM head applies lm_head.dense + gelu + "
        "lm_head.layer_norm before the decoder and bias, which vocabd does not implement");
  }

  if (f.embedding_layer_norm) {
    c.embedding_layer_norm = true;
    c.embedding_token_type = f.embedding_token_type;
    c.embedding_norm_eps_key = f.embedding_norm_eps;
    ASSIGN_OR_RETURN(c.embedding_norm_eps, r.Double(f.embedding_norm_eps, f.embedding_norm_eps_default));
    if (!std::isfinite(c.embedding_norm_eps) || c.embedding_norm_eps <= 0.0) {
      return r.Error(f.embedding_norm_eps,
                     absl::StrCat("= ", c.embedding_norm_eps, " must be finite and > 0"));
    }
  }
  if (f.embedding_layer_norm && f.positions == PositionScheme::kLearned && !f.roberta) {
    // BertEmbeddings: position_ids = arange (no padding offset).
    std::optional<std::string> type;
    ASSIGN_OR_RETURN(type, r.String("position_embedding_type"));
    if (type.has_value() && *type != "absolute") {
      return r.Error("position_embedding_type",
                     absl::StrCat("= \"", *type, "\" is not supported (only \"absolute\": a learned "
                                  "table added to the embeddings)"));
    }
  }
  if (f.embedding_token_type) {
    int64_t types = 0;
    ASSIGN_OR_RETURN(types, r.Int("type_vocab_size", int64_t{2}));
    if (types <= 0) {
      return r.Error("type_vocab_size",
                     absl::StrCat("= ", types, " must be > 0 (", f.name,
                                  " adds token_type_embeddings row 0 to every token)"));
    }
  }
  if (f.lm_head_unsupported != nullptr) {
    c.lm_head_unsupported_reason =
        absl::StrCat("model_type \"", *model_type, "\" is served for Embed only: ", f.lm_head_unsupported);
  }
  if (f.dim_model_base_key != nullptr) {
    // MiniCPMForCausalLM.forward: lm_head(hidden_states / (hidden_size / dim_model_base)).
    double base = 0.0;
    ASSIGN_OR_RETURN(base, r.Double(f.dim_model_base_key, f.dim_model_base_default));
    if (!std::isfinite(base) || base <= 0.0) {
      return r.Error(f.dim_model_base_key, absl::StrCat("= ", base, " must be finite and > 0"));
    }
    head.logits_scaling = static_cast<double>(c.hidden_size) / base;
    c.logits_scaling_source = absl::StrCat("hidden_size / ", f.dim_model_base_key);
  } else if (f.logits_scaling_key != nullptr) {
    c.logits_scaling_source = f.logits_scaling_key;
  }
  if (f.alibi_key != nullptr) {
    bool alibi = false;
    ASSIGN_OR_RETURN(alibi, r.Bool(f.alibi_key, false));
    if (alibi) c.position_scheme = PositionScheme::kAlibi;
  }
  if (f.mpt_attn_config) {
    // MptModel builds ALiBi with build_mpt_alibi_tensor(num_heads, ..., alibi_bias_max);
    // its slopes equal BLOOM's (GetAlibiSlopes) for alibi_bias_max 8 and a
    // power-of-two head count only.
    const json* attn = r.Get("attn_config");
    if (attn != nullptr && !attn->is_object()) return r.WrongType("attn_config", *attn, "an object");
    const json empty = json::object();
    ConfigReader a(attn != nullptr ? *attn : empty, file_name, "attn_config.");
    bool alibi = true;
    ASSIGN_OR_RETURN(alibi, a.Bool("alibi", true));
    if (!alibi) {
      return a.Error("alibi", "= false is not supported (vocabd serves MPT with ALiBi positions, "
                              "as transformers' MptModel applies them)");
    }
    double bias_max = 8.0;
    ASSIGN_OR_RETURN(bias_max, a.Double("alibi_bias_max", 8.0));
    if (bias_max != 8.0) {
      return a.Error("alibi_bias_max",
                     absl::StrCat("= ", bias_max, " is not supported (only 8: the slopes "
                                  "GetAlibiSlopes serves)"));
    }
    const int h = c.num_attention_heads;
    if ((h & (h - 1)) != 0) {
      return r.Error(heads_key, absl::StrCat("= ", h, " is not supported for MPT: with a head count "
                                             "that is not a power of two its ALiBi slopes differ "
                                             "from the ones GetAlibiSlopes serves"));
    }
  }
  if (f.nomic_checks) {
    double fraction = 0.0;
    ASSIGN_OR_RETURN(fraction, r.Double("rotary_emb_fraction", 0.0));
    if (!(fraction > 0.0)) {
      return r.Error("rotary_emb_fraction",
                     absl::StrCat("= ", fraction, " is not supported (only rotary Nomic BERT "
                                  "models, rotary_emb_fraction > 0)"));
    }
    if (const json* s = r.Get("rotary_scaling_factor"); s != nullptr) {
      return r.Error("rotary_scaling_factor",
                     absl::StrCat("= ", s->dump(), " is not supported (only null: no dynamic NTK "
                                  "scaling)"));
    }
    bool prenorm = false;
    ASSIGN_OR_RETURN(prenorm, r.Bool("prenorm", false));
    if (prenorm) {
      return r.Error("prenorm", "= true is not supported (emb_ln is then not applied to the "
                                "embeddings)");
    }
    bool interleaved = false;
    ASSIGN_OR_RETURN(interleaved, r.Bool("rotary_emb_interleaved", false));
    if (interleaved) {
      return r.Error("rotary_emb_interleaved", "= true is not supported (only half-split pairs)");
    }
  }

  RopeParams& rope = c.rope;
  rope.head_dim = c.head_dim;
  rope.max_position_embeddings = c.max_position_embeddings;
  if (c.position_scheme == PositionScheme::kRope) {
    // transformers 5 writes theta, scaling and the partial factor inside
    // `rope_parameters` (per attention type for some families); vocabd
    // reads the transformers 4 keys only, so a config in the new layout is
    // refused rather than served with the defaults.
    if (const json* rp = r.Get("rope_parameters"); rp != nullptr) {
      return r.Error("rope_parameters",
                     absl::StrCat("= ", rp->dump(), " is not supported (the transformers 5 "
                                  "RoPE layout; vocabd reads rope_theta, rope_scaling and "
                                  "partial_rotary_factor)"));
    }
    double theta = f.theta_default;
    if (f.theta_fallback != nullptr) {
      ASSIGN_OR_RETURN(theta, r.Double(f.theta_fallback, theta));
    }
    ASSIGN_OR_RETURN(rope.theta, r.Double(f.theta, theta));
    double partial = 1.0;
    ASSIGN_OR_RETURN(partial, r.Double(f.partial, f.partial_default));
    if (!PartialRotaryFactorInRange(partial)) {
      return r.Error(f.partial, absl::StrCat("= ", partial, " must be in (0, 1]"));
    }
    // HF: dim = int(head_dim * partial_rotary_factor) (GPT-NeoX: rotary_pct).
    rope.rotary_dim = RotaryDimFromPartialFactor(c.head_dim, partial);
    rope.pair_layout = f.hf_pair_layout;
    if (f.hf_interleave_key != nullptr) {
      bool interleave = true;
      ASSIGN_OR_RETURN(interleave, r.Bool(f.hf_interleave_key, true));
      rope.pair_layout = interleave ? RopePairLayout::kInterleaved : RopePairLayout::kHalfSplit;
    }
    if (const json* rs = r.Get("rope_scaling"); rs != nullptr) {
      ASSIGN_OR_RETURN(rope.scaling, ParseRopeScaling(obj, *rs, file_name));
    }
    if (f.layer_rope != LayerRopeRule::kUniform) {
      if (c.num_hidden_layers > kMaxPatternLayers) {
        return r.Error(f.layers, absl::StrCat("= ", c.num_hidden_layers, " is more than ",
                                              kMaxPatternLayers,
                                              " layers for a per-layer RoPE pattern"));
      }
      const int n = c.num_hidden_layers;
      std::vector<bool> sliding(static_cast<size_t>(n), false);
      std::vector<bool> rotary(static_cast<size_t>(n), true);
      if (f.layer_rope == LayerRopeRule::kNoRopeLayers) {
        ASSIGN_OR_RETURN(rotary, RopeLayers(r, n));
      } else {
        ASSIGN_OR_RETURN(sliding, SlidingLayers(r, n, f.sliding_window_pattern_default));
      }
      RopeParams local = rope;
      if (f.layer_rope == LayerRopeRule::kGemma3LocalGlobal) {
        // Gemma3TextModel.__init__: rotary_emb_local copies the config with
        // rope_theta = rope_local_base_freq and rope_scaling default.
        ASSIGN_OR_RETURN(local.theta, r.Double("rope_local_base_freq", f.local_theta_default));
        local.scaling = RopeScaling();
      }
      c.layer_rope.resize(static_cast<size_t>(n));
      for (int i = 0; i < n; ++i) {
        LayerRope& layer = c.layer_rope[static_cast<size_t>(i)];
        const bool is_sliding = sliding[static_cast<size_t>(i)];
        if (f.layer_rope != LayerRopeRule::kNoRopeLayers) {
          layer.attention_type = is_sliding ? "sliding_attention" : "full_attention";
        }
        layer.rotary = rotary[static_cast<size_t>(i)] &&
                       !(f.layer_rope == LayerRopeRule::kCohere2SlidingOnly && !is_sliding);
        layer.rope = f.layer_rope == LayerRopeRule::kGemma3LocalGlobal && is_sliding ? local : rope;
      }
    }
  } else {
    rope.rotary_dim = c.head_dim;  // unused: no rotary
  }

  if (absl::Status s = c.Validate(); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(file_name, ": ", s.message()));
  }
  return c;
}

std::vector<std::pair<std::string, std::string>> HfCanonicalTensorNames(
    const std::string& architecture) {
  const FamilyRules* family = FindHfFamily(architecture);
  if (family == nullptr) family = FindFamily("llama");
  const std::vector<std::pair<std::string, std::string>>& base = family->hf_tensors;
  // Composite checkpoints prefix the language model: "language_model.X"
  // (older Llava) or "model.language_model.Y" for "model.Y" (newer).
  std::vector<std::pair<std::string, std::string>> out = base;
  for (const auto& [file_name, canonical] : base) {
    out.emplace_back("language_model." + file_name, canonical);
    if (file_name.rfind("model.", 0) == 0) {
      out.emplace_back("model.language_model." + file_name.substr(6), canonical);
    }
  }
  return out;
}

}  // namespace vocabd
