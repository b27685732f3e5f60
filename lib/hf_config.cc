#include "lib/hf_config.h"

#include <cmath>
#include <limits>
#include <optional>
#include "absl/strings/string_view.h"

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "lib/status_macros.h"

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

// HF default of `tie_word_embeddings` when config.json omits it: the
// model's config class default (LlamaConfig, MistralConfig, Qwen2Config set
// False; PretrainedConfig's default is True).
bool DefaultTieWordEmbeddings(const std::string& model_type) {
  return !(model_type == "llama" || model_type == "mistral" || model_type == "qwen2");
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
  Reader r(root, file_name, "");
  ModelConfig c;

  std::optional<std::string> model_type;
  ASSIGN_OR_RETURN(model_type, r.String("model_type"));
  if (!model_type.has_value()) {
    // Old configs may lack model_type; accept the Llama architecture name.
    const json* archs = r.Get("architectures");
    if (archs != nullptr && archs->is_array() && !archs->empty() &&
        (*archs)[0] == "LlamaForCausalLM") {
      model_type = "llama";
    } else {
      return r.Error("model_type", "is required but missing");
    }
  }
  if (*model_type != "llama" && *model_type != "mistral" && *model_type != "qwen2") {
    return r.Error("model_type", absl::StrCat("= \"", *model_type,
                                              "\" is not supported (llama, mistral, qwen2)"));
  }
  c.architecture = *model_type;

  ASSIGN_OR_RETURN(c.vocab_size, r.Int("vocab_size", std::nullopt));
  ASSIGN_OR_RETURN(c.hidden_size, r.Int("hidden_size", std::nullopt));
  int64_t v = 0;
  ASSIGN_OR_RETURN(v, r.Int("num_hidden_layers", std::nullopt));
  if (v < 0 || v > std::numeric_limits<int>::max()) {
    return r.Error("num_hidden_layers", absl::StrCat("= ", v, " is out of range"));
  }
  c.num_hidden_layers = static_cast<int>(v);
  ASSIGN_OR_RETURN(v, r.Int("num_attention_heads", std::nullopt));
  if (v <= 0 || v > std::numeric_limits<int>::max()) {
    return r.Error("num_attention_heads", absl::StrCat("= ", v, " must be > 0"));
  }
  c.num_attention_heads = static_cast<int>(v);
  ASSIGN_OR_RETURN(v, r.Int("num_key_value_heads", c.num_attention_heads));
  if (v <= 0 || v > std::numeric_limits<int>::max()) {
    return r.Error("num_key_value_heads", absl::StrCat("= ", v, " must be > 0"));
  }
  c.num_key_value_heads = static_cast<int>(v);
  if (c.hidden_size <= 0) {
    return r.Error("hidden_size", absl::StrCat("= ", c.hidden_size, " must be > 0"));
  }
  ASSIGN_OR_RETURN(v, r.Int("head_dim", c.hidden_size / c.num_attention_heads));
  if (v <= 0 || v > std::numeric_limits<int>::max()) {
    return r.Error("head_dim", absl::StrCat("= ", v, " must be > 0"));
  }
  c.head_dim = static_cast<int>(v);
  ASSIGN_OR_RETURN(c.intermediate_size, r.Int("intermediate_size", std::nullopt));
  ASSIGN_OR_RETURN(c.max_position_embeddings, r.Int("max_position_embeddings", std::nullopt));
  ASSIGN_OR_RETURN(c.norm_eps, r.Double("rms_norm_eps", 1e-6));  // HF LlamaConfig default
  c.final_norm_kind = NormKind::kRmsNorm;
  c.position_scheme = PositionScheme::kRope;
  ASSIGN_OR_RETURN(c.tie_word_embeddings,
                r.Bool("tie_word_embeddings", DefaultTieWordEmbeddings(*model_type)));
  ASSIGN_OR_RETURN(c.bos_token_id, r.TokenId("bos_token_id"));
  ASSIGN_OR_RETURN(c.eos_token_id, r.TokenId("eos_token_id"));
  c.embedding_scale = 1.0;

  RopeParams& rope = c.rope;
  ASSIGN_OR_RETURN(rope.theta, r.Double("rope_theta", 10000.0));
  rope.head_dim = c.head_dim;
  double partial = 1.0;
  ASSIGN_OR_RETURN(partial, r.Double("partial_rotary_factor", 1.0));
  if (!(partial > 0.0 && partial <= 1.0)) {
    return r.Error("partial_rotary_factor", absl::StrCat("= ", partial, " must be in (0, 1]"));
  }
  // HF: dim = int(head_dim * partial_rotary_factor).
  rope.rotary_dim = static_cast<int>(static_cast<double>(c.head_dim) * partial);
  rope.pair_layout = RopePairLayout::kHalfSplit;
  rope.max_position_embeddings = c.max_position_embeddings;
  if (const json* rs = r.Get("rope_scaling"); rs != nullptr) {
    ASSIGN_OR_RETURN(rope.scaling, ParseRopeScaling(root, *rs, file_name));
  }

  if (absl::Status s = c.Validate(); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(file_name, ": ", s.message()));
  }
  return c;
}

}  // namespace vocabd
