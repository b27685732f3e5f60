#include "lib/checkpoint/hf_config.h"

#include <cmath>
#include <limits>
#include <optional>
#include "absl/strings/string_view.h"

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "lib/checkpoint/checkpoint.h"
#include "lib/core/status_macros.h"

namespace vocabd {
namespace {

using nlohmann::json;

// Reads typed values out of a JSON object and produces errors that name
// the file and the (dotted) key.
class Reader {
 public:
  Reader(const json& obj, std::string file, std::string prefix)
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
  Reader top_reader(top, file_name, "");
  if (!rs.is_object()) return top_reader.WrongType("rope_scaling", rs, "an object or null");
  Reader r(rs, file_name, "rope_scaling.");
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

// One config.json family: which keys hold the sizes and what the HF config
// class defaults are.
struct Family {
  const char* hidden = "hidden_size";
  const char* layers = "num_hidden_layers";
  const char* heads = "num_attention_heads";
  const char* kv_heads = "num_key_value_heads";   // nullptr: = heads
  const char* intermediate = "intermediate_size";  // nullptr: 4 * hidden (gpt2 n_inner)
  const char* max_positions = "max_position_embeddings";
  const char* eps = "rms_norm_eps";
  double eps_default = 1e-6;
  NormKind norm = NormKind::kRmsNorm;
  bool tie_default = false;
  PositionScheme positions = PositionScheme::kRope;
  const char* theta = "rope_theta";
  const char* theta_fallback = nullptr;
  const char* partial = "partial_rotary_factor";
  double partial_default = 1.0;
  int head_dim_default = 0;  // 0: hidden / heads
  bool sqrt_hidden_scale = false;
  // RoBERTa / XLM-R: learned positions numbered from padding_idx + 1
  // (pad_token_id), pads on row padding_idx; Embed only (see hf_config.h).
  bool roberta = false;
};

std::optional<Family> FamilyFor(const std::string& model_type) {
  Family f;
  if (model_type == "llama" || model_type == "mistral" || model_type == "qwen2") return f;
  if (model_type == "gemma") {
    // GemmaConfig: head_dim 256, tie True, embeddings * sqrt(hidden_size).
    f.tie_default = true;
    f.head_dim_default = 256;
    f.sqrt_hidden_scale = true;
    return f;
  }
  if (model_type == "gpt2") {
    f.hidden = "n_embd";
    f.layers = "n_layer";
    f.heads = "n_head";
    f.kv_heads = nullptr;
    f.intermediate = nullptr;
    f.max_positions = "n_positions";
    f.eps = "layer_norm_epsilon";
    f.eps_default = 1e-5;
    f.norm = NormKind::kLayerNorm;
    f.tie_default = true;
    f.positions = PositionScheme::kLearned;
    return f;
  }
  if (model_type == "gpt_neox") {
    f.kv_heads = nullptr;
    f.eps = "layer_norm_eps";
    f.eps_default = 1e-5;
    f.norm = NormKind::kLayerNorm;
    f.theta = "rotary_emb_base";
    f.theta_fallback = "rope_theta";
    f.partial = "rotary_pct";
    f.partial_default = 0.25;
    return f;
  }
  if (model_type == "roberta" || model_type == "xlm-roberta") {
    // RobertaConfig / XLMRobertaConfig: layer_norm_eps 1e-12 (of the
    // embeddings LayerNorm, which vocabd does not apply: no final norm).
    f.kv_heads = nullptr;
    f.eps = "layer_norm_eps";
    f.eps_default = 1e-12;
    f.norm = NormKind::kNone;
    f.tie_default = true;
    f.positions = PositionScheme::kLearned;
    f.roberta = true;
    return f;
  }
  if (model_type == "phi") {
    f.eps = "layer_norm_eps";
    f.eps_default = 1e-5;
    f.norm = NormKind::kLayerNorm;
    f.partial_default = 0.5;
    return f;
  }
  return std::nullopt;
}

constexpr char kSupportedTypes[] =
    "llama, mistral, qwen2, gemma, gpt2, gpt_neox, phi, roberta, xlm-roberta";

absl::StatusOr<int> PositiveInt(const Reader& r, const char* key, std::optional<int64_t> fallback) {
  int64_t v = 0;
  ASSIGN_OR_RETURN(v, r.Int(key, fallback));
  if (v <= 0 || v > std::numeric_limits<int>::max()) {
    return r.Error(key, absl::StrCat("= ", v, " must be in [1, 2^31)"));
  }
  return static_cast<int>(v);
}

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
  Reader top(root, file_name, "");
  // Composite models (Llava, ...): the language model's keys sit in a
  // nested `text_config`.
  const json* text = top.Get("text_config");
  if (text != nullptr && !text->is_object()) {
    return top.WrongType("text_config", *text, "an object");
  }
  const json& obj = text != nullptr ? *text : root;
  Reader r(obj, file_name, text != nullptr ? "text_config." : "");
  ModelConfig c;

  std::optional<std::string> model_type;
  ASSIGN_OR_RETURN(model_type, r.String("model_type"));
  if (!model_type.has_value()) {
    // Old configs may lack model_type; accept the architecture name.
    const json* archs = top.Get("architectures");
    if (archs != nullptr && archs->is_array() && !archs->empty() && (*archs)[0].is_string()) {
      const std::string arch = (*archs)[0].get<std::string>();
      if (arch == "LlamaForCausalLM") model_type = "llama";
      if (arch == "GPT2LMHeadModel") model_type = "gpt2";
      if (arch == "GPTNeoXForCausalLM") model_type = "gpt_neox";
      if (arch == "RobertaForMaskedLM" || arch == "RobertaModel") model_type = "roberta";
      if (arch == "XLMRobertaForMaskedLM" || arch == "XLMRobertaModel") model_type = "xlm-roberta";
    }
    if (!model_type.has_value()) return r.Error("model_type", "is required but missing");
  }
  const std::optional<Family> family = FamilyFor(*model_type);
  if (!family.has_value()) {
    return r.Error("model_type", absl::StrCat("= \"", *model_type, "\" is not supported (",
                                              kSupportedTypes, ")"));
  }
  const Family& f = *family;
  c.architecture = *model_type;

  ASSIGN_OR_RETURN(c.vocab_size, r.Int("vocab_size", std::nullopt));
  int hidden = 0;
  ASSIGN_OR_RETURN(hidden, PositiveInt(r, f.hidden, std::nullopt));
  c.hidden_size = hidden;
  int64_t v = 0;
  ASSIGN_OR_RETURN(v, r.Int(f.layers, std::nullopt));
  if (v < 0 || v > std::numeric_limits<int>::max()) {
    return r.Error(f.layers, absl::StrCat("= ", v, " is out of range"));
  }
  c.num_hidden_layers = static_cast<int>(v);
  ASSIGN_OR_RETURN(c.num_attention_heads, PositiveInt(r, f.heads, std::nullopt));
  if (f.kv_heads != nullptr) {
    ASSIGN_OR_RETURN(c.num_key_value_heads, PositiveInt(r, f.kv_heads, c.num_attention_heads));
  } else {
    c.num_key_value_heads = c.num_attention_heads;
  }
  const int64_t head_dim_default =
      f.head_dim_default > 0 ? f.head_dim_default : c.hidden_size / c.num_attention_heads;
  ASSIGN_OR_RETURN(c.head_dim, PositiveInt(r, "head_dim", head_dim_default));
  if (f.intermediate != nullptr) {
    ASSIGN_OR_RETURN(c.intermediate_size, r.Int(f.intermediate, std::nullopt));
  } else {
    ASSIGN_OR_RETURN(c.intermediate_size, r.Int("n_inner", 4 * c.hidden_size));  // gpt2
  }
  ASSIGN_OR_RETURN(c.max_position_embeddings, r.Int(f.max_positions, std::nullopt));
  ASSIGN_OR_RETURN(c.norm_eps, r.Double(f.eps, f.eps_default));
  c.final_norm_kind = f.norm;
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
  c.embedding_scale = f.sqrt_hidden_scale ? std::sqrt(static_cast<double>(c.hidden_size)) : 1.0;
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

  RopeParams& rope = c.rope;
  rope.head_dim = c.head_dim;
  rope.max_position_embeddings = c.max_position_embeddings;
  if (c.position_scheme == PositionScheme::kRope) {
    double theta = 10000.0;
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
    rope.pair_layout = RopePairLayout::kHalfSplit;
    if (const json* rs = r.Get("rope_scaling"); rs != nullptr) {
      ASSIGN_OR_RETURN(rope.scaling, ParseRopeScaling(obj, *rs, file_name));
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
  std::vector<std::pair<std::string, std::string>> base;
  if (architecture == "gpt2") {
    base = {{"transformer.wte.weight", kEmbedTokens}, {"wte.weight", kEmbedTokens},
            {"transformer.wpe.weight", kPositionEmbeddings}, {"wpe.weight", kPositionEmbeddings},
            {"transformer.ln_f.weight", kFinalNorm},  {"ln_f.weight", kFinalNorm},
            {"transformer.ln_f.bias", kFinalNormBias}, {"ln_f.bias", kFinalNormBias},
            {"lm_head.weight", kLmHead}};
  } else if (architecture == "gpt_neox") {
    base = {{"gpt_neox.embed_in.weight", kEmbedTokens},
            {"embed_out.weight", kLmHead},
            {"gpt_neox.final_layer_norm.weight", kFinalNorm},
            {"gpt_neox.final_layer_norm.bias", kFinalNormBias}};
  } else if (architecture == "roberta" || architecture == "xlm-roberta") {
    // RobertaForMaskedLM / XLMRobertaForMaskedLM ("roberta." prefix) or
    // RobertaModel / XLMRobertaModel (no prefix).
    base = {{"roberta.embeddings.word_embeddings.weight", kEmbedTokens},
            {"embeddings.word_embeddings.weight", kEmbedTokens},
            {"roberta.embeddings.position_embeddings.weight", kPositionEmbeddings},
            {"embeddings.position_embeddings.weight", kPositionEmbeddings},
            {"lm_head.decoder.weight", kLmHead}};
  } else if (architecture == "phi") {
    base = {{"model.embed_tokens.weight", kEmbedTokens},
            {"lm_head.weight", kLmHead},
            {"lm_head.bias", kLmHeadBias},
            {"model.final_layernorm.weight", kFinalNorm},
            {"model.final_layernorm.bias", kFinalNormBias}};
  } else {
    base = {{"model.embed_tokens.weight", kEmbedTokens},
            {"lm_head.weight", kLmHead},
            {"model.norm.weight", kFinalNorm}};
  }
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
