#include "lib/checkpoint/families.h"

#include "absl/strings/str_join.h"
#include "lib/checkpoint/checkpoint.h"

namespace vocabd {
namespace {

using TensorNames = std::vector<std::pair<std::string, std::string>>;

// model.embed_tokens / model.norm / lm_head (LlamaForCausalLM and the many
// families that copy its module names).
TensorNames LlamaNames() {
  return {{"model.embed_tokens.weight", kEmbedTokens},
          {"model.norm.weight", kFinalNorm},
          {"lm_head.weight", kLmHead}};
}
// The same with a LayerNorm bias (model.norm.bias).
TensorNames LlamaNamesWithNormBias() {
  TensorNames names = LlamaNames();
  names.emplace_back("model.norm.bias", kFinalNormBias);
  return names;
}
// GPT2LMHeadModel / GPTBigCodeForCausalLM: transformer.{wte,wpe,ln_f}.
TensorNames Gpt2Names() {
  return {{"transformer.wte.weight", kEmbedTokens},  {"wte.weight", kEmbedTokens},
          {"transformer.wpe.weight", kPositionEmbeddings}, {"wpe.weight", kPositionEmbeddings},
          {"transformer.ln_f.weight", kFinalNorm},    {"ln_f.weight", kFinalNorm},
          {"transformer.ln_f.bias", kFinalNormBias},  {"ln_f.bias", kFinalNormBias},
          {"lm_head.weight", kLmHead}};
}

// The llama-like entry every decoder family below starts from: RMSNorm
// (rms_norm_eps), RoPE half-split in HF form, untied by default.
FamilyRules LlamaLike(const char* name, std::vector<std::string> hf_types,
                      std::vector<std::string> gguf_archs, RopePairLayout gguf_layout) {
  FamilyRules f;
  f.name = name;
  f.hf_model_types = std::move(hf_types);
  f.gguf_archs = std::move(gguf_archs);
  f.gguf_pair_layout = gguf_layout;
  f.hf_tensors = LlamaNames();
  return f;
}

constexpr RopePairLayout kNorm = RopePairLayout::kInterleaved;  // llama.cpp LLAMA_ROPE_TYPE_NORM
constexpr RopePairLayout kNeox = RopePairLayout::kHalfSplit;    // llama.cpp LLAMA_ROPE_TYPE_NEOX

std::vector<FamilyRules> BuildTable() {
  std::vector<FamilyRules> t;
  // LlamaConfig (rms_norm_eps 1e-6, tie False); GGUF "llama" (also Mistral
  // and Mixtral files: convert_hf_to_gguf.py LlamaModel permutes q/k, NORM).
  {
    FamilyRules f = LlamaLike("llama", {"llama"}, {"llama"}, kNorm);
    f.hf_architectures = {"LlamaForCausalLM"};
    t.push_back(f);
  }
  t.push_back(LlamaLike("mistral", {"mistral"}, {}, kNorm));
  {
    FamilyRules f = LlamaLike("mixtral", {"mixtral"}, {}, kNorm);  // MixtralConfig rms 1e-5
    f.eps_default = 1e-5;
    t.push_back(f);
  }
  t.push_back(LlamaLike("qwen2", {"qwen2"}, {"qwen2"}, kNeox));
  t.push_back(LlamaLike("qwen2_moe", {"qwen2_moe"}, {"qwen2moe"}, kNeox));
  {
    FamilyRules f = LlamaLike("qwen3", {"qwen3"}, {"qwen3"}, kNeox);  // Qwen3Config head_dim 128
    f.head_dim_default = 128;
    t.push_back(f);
  }
  t.push_back(LlamaLike("qwen3_moe", {"qwen3_moe"}, {"qwen3moe"}, kNeox));
  {
    FamilyRules f = LlamaLike("olmo2", {"olmo2"}, {"olmo2"}, kNeox);  // Olmo2Config rms 1e-5
    f.eps_default = 1e-5;
    t.push_back(f);
  }
  {
    // SmolLM3Config: NoPE on layers with no_rope_layers[i] = 0 (default
    // every 4th); GGUF smollm3: llama.cpp n_no_rope_layer_step = 4, NORM.
    FamilyRules f = LlamaLike("smollm3", {"smollm3"}, {"smollm3"}, kNorm);
    f.layer_rope = LayerRopeRule::kNoRopeLayers;
    f.tie_default = true;
    t.push_back(f);
  }
  {
    // Llama4TextConfig (composite Llama4Config's text_config): rms 1e-5,
    // head_dim 128, rope_theta 500000, interleaved pairs (apply_rotary_emb
    // multiplies view_as_complex(x.reshape(..., -1, 2)) by freqs_cis), NoPE
    // layers by no_rope_layers; GGUF llama4 (NORM).
    FamilyRules f = LlamaLike("llama4", {"llama4_text", "llama4"}, {"llama4"}, kNorm);
    f.eps_default = 1e-5;
    f.head_dim_default = 128;
    f.theta_default = 500000.0;
    f.hf_pair_layout = RopePairLayout::kInterleaved;
    f.layer_rope = LayerRopeRule::kNoRopeLayers;
    t.push_back(f);
  }
  {
    // GptOssConfig: rms 1e-5, head_dim 64, yarn; layer_types alternate
    // sliding / full with one RoPE (GptOssRotaryEmbedding); GGUF gpt-oss NEOX.
    FamilyRules f = LlamaLike("gpt_oss", {"gpt_oss"}, {"gpt-oss"}, kNeox);
    f.eps_default = 1e-5;
    f.head_dim_default = 64;
    f.theta_default = 150000.0;
    f.layer_rope = LayerRopeRule::kUniformListAttention;
    f.sliding_window_pattern_default = 2;
    t.push_back(f);
  }
  {
    // Phi3Config (Phi-3, 3.5, 4, 4-mini): rms 1e-5, partial_rotary_factor,
    // longrope ("su"); GGUF phi3 (NEOX, rope_factors_* tensors).
    FamilyRules f = LlamaLike("phi3", {"phi3"}, {"phi3"}, kNeox);
    f.eps_default = 1e-5;
    t.push_back(f);
  }
  {
    // DeepseekV2Config / DeepseekV3Config: RoPE on qk_rope_head_dim (the
    // config's head_dim), interleaved pairs (V2 apply_rotary_emb on
    // view_as_complex; V3 apply_rotary_pos_emb_interleave when
    // rope_interleave, default true), yarn with mscale / mscale_all_dim.
    FamilyRules f = LlamaLike("deepseek_v3", {"deepseek_v3"}, {}, kNorm);
    f.head_dim_key = "qk_rope_head_dim";
    f.head_dim_default = 64;
    f.hf_pair_layout = RopePairLayout::kInterleaved;
    f.hf_interleave_key = "rope_interleave";
    t.push_back(f);
    f.name = "deepseek_v2";
    f.hf_model_types = {"deepseek_v2"};
    f.hf_interleave_key = nullptr;
    t.push_back(f);
  }
  {
    // GraniteConfig / GraniteMoeConfig: embeddings * embedding_multiplier,
    // logits / logits_scaling (GraniteForCausalLM.forward); GGUF granite:
    // <arch>.embedding_scale, <arch>.logit_scale divides (NORM).
    FamilyRules f = LlamaLike("granite", {"granite"}, {"granite"}, kNorm);
    f.embedding = EmbeddingScaleRule::kConfigKey;
    f.embedding_key = "embedding_multiplier";
    f.logits_scaling_key = "logits_scaling";
    f.gguf_logit_scale = GgufLogitScaleRule::kDivide;
    t.push_back(f);
    f.name = "granitemoe";
    f.hf_model_types = {"granitemoe"};
    f.gguf_archs = {"granitemoe"};
    t.push_back(f);
  }
  {
    // GemmaConfig: head_dim 256, tie True, embeddings * sqrt(hidden) in the
    // model dtype (GemmaModel.forward normalizer), GemmaRMSNorm x * (1 + w).
    FamilyRules f = LlamaLike("gemma", {"gemma"}, {"gemma"}, kNeox);
    f.tie_default = true;
    f.head_dim_default = 256;
    f.embedding = EmbeddingScaleRule::kSqrtHidden;
    f.norm_one_plus_weight = true;
    t.push_back(f);
    // Gemma2Config: as gemma, plus final_logit_softcapping (default 30.0;
    // Gemma2ForCausalLM.forward: logits / cap, tanh, * cap), layer_types
    // alternate sliding / full with one RoPE. GGUF gemma2: llama.cpp reads
    // gemma2.final_logit_softcapping (default 30).
    f.name = "gemma2";
    f.hf_model_types = {"gemma2"};
    f.gguf_archs = {"gemma2"};
    f.softcap_key = "final_logit_softcapping";
    f.softcap_default = 30.0;
    f.gguf_softcap = true;
    f.gguf_softcap_default = 30.0;
    f.layer_rope = LayerRopeRule::kUniformListAttention;
    f.sliding_window_pattern_default = 2;
    t.push_back(f);
    // Gemma3TextConfig (also the text_config of Gemma3Config): softcap
    // default None, rope_theta 1e6 on full layers, rope_local_base_freq
    // (10000) on sliding ones (sliding_window_pattern 6 / layer_types).
    // GGUF gemma3: llama.cpp set_swa_pattern(6), rope_freq_base_train_swa
    // = 10000, no final softcap key written by the converter.
    f.name = "gemma3";
    f.hf_model_types = {"gemma3_text", "gemma3"};
    f.gguf_archs = {"gemma3"};
    f.softcap_default = 0.0;
    f.gguf_softcap_default = 0.0;
    f.theta_default = 1000000.0;
    f.layer_rope = LayerRopeRule::kGemma3LocalGlobal;
    f.sliding_window_pattern_default = 6;
    // Gemma3TextConfig defaults (gemma-3-4b's text_config omits these).
    f.vocab_default = 262208;
    f.heads_default = 8;
    f.kv_heads_default = 4;
    f.intermediate_default = 9216;
    f.max_positions_default = 131072;
    f.local_theta_default = 10000.0;
    t.push_back(f);
  }
  {
    // CohereConfig: CohereLayerNorm (mean-centred, no bias, layer_norm_eps
    // 1e-5), tie True, logits * logit_scale (0.0625 default,
    // CohereForCausalLM.forward), interleaved rotary (CohereRotaryEmbedding
    // repeat_interleave + rotate_half on x[..., ::2] / x[..., 1::2]).
    // GGUF command-r: LayerNorm eps, <arch>.logit_scale multiplies (NORM).
    FamilyRules f = LlamaLike("cohere", {"cohere"}, {"command-r"}, kNorm);
    f.norm = NormKind::kLayerNorm;
    f.eps = "layer_norm_eps";
    f.eps_default = 1e-5;
    f.norm_without_bias = true;
    f.tie_default = true;
    f.hf_pair_layout = RopePairLayout::kInterleaved;
    f.logit_scale_key = "logit_scale";
    f.logit_scale_default = 0.0625;
    f.gguf_logit_scale = GgufLogitScaleRule::kMultiply;
    t.push_back(f);
    // Cohere2Config: as cohere; RoPE only on sliding layers
    // (sliding_window_pattern 4 / layer_types). GGUF cohere2: llama.cpp
    // set_swa_pattern(4), rope on SWA layers only.
    f.name = "cohere2";
    f.hf_model_types = {"cohere2"};
    f.gguf_archs = {"cohere2"};
    f.layer_rope = LayerRopeRule::kCohere2SlidingOnly;
    f.sliding_window_pattern_default = 4;
    t.push_back(f);
  }
  {
    // Starcoder2Config: nn.LayerNorm with bias (norm_epsilon 1e-5), tie
    // True; GGUF starcoder2 (NEOX, output_norm.bias).
    FamilyRules f = LlamaLike("starcoder2", {"starcoder2"}, {"starcoder2"}, kNeox);
    f.norm = NormKind::kLayerNorm;
    f.eps = "norm_epsilon";
    f.eps_default = 1e-5;
    f.tie_default = true;
    f.hf_tensors = LlamaNamesWithNormBias();
    t.push_back(f);
    // StableLmConfig: nn.LayerNorm with bias (layer_norm_eps 1e-5),
    // partial_rotary_factor 0.25, tie False; GGUF stablelm (NEOX).
    f.name = "stablelm";
    f.hf_model_types = {"stablelm"};
    f.gguf_archs = {"stablelm"};
    f.eps = "layer_norm_eps";
    f.tie_default = false;
    f.partial_default = 0.25;
    t.push_back(f);
  }
  {
    // PhiConfig: LayerNorm with bias (layer_norm_eps), partial 0.5, untied,
    // lm_head.bias; GGUF phi2 (NEOX).
    FamilyRules f = LlamaLike("phi", {"phi"}, {"phi2"}, kNeox);
    f.norm = NormKind::kLayerNorm;
    f.eps = "layer_norm_eps";
    f.eps_default = 1e-5;
    f.partial_default = 0.5;
    f.hf_tensors = {{"model.embed_tokens.weight", kEmbedTokens},
                    {"lm_head.weight", kLmHead},
                    {"lm_head.bias", kLmHeadBias},
                    {"model.final_layernorm.weight", kFinalNorm},
                    {"model.final_layernorm.bias", kFinalNormBias}};
    t.push_back(f);
  }
  {
    // GPTNeoXConfig: LayerNorm with bias (layer_norm_eps), rotary_pct 0.25,
    // rotary_emb_base (or rope_theta); GGUF gptneox (NEOX).
    FamilyRules f = LlamaLike("gpt_neox", {"gpt_neox"}, {"gptneox"}, kNeox);
    f.hf_architectures = {"GPTNeoXForCausalLM"};
    f.kv_heads = nullptr;
    f.norm = NormKind::kLayerNorm;
    f.eps = "layer_norm_eps";
    f.eps_default = 1e-5;
    f.theta = "rotary_emb_base";
    f.theta_fallback = "rope_theta";
    f.partial = "rotary_pct";
    f.partial_default = 0.25;
    f.hf_tensors = {{"gpt_neox.embed_in.weight", kEmbedTokens},
                    {"embed_out.weight", kLmHead},
                    {"gpt_neox.final_layer_norm.weight", kFinalNorm},
                    {"gpt_neox.final_layer_norm.bias", kFinalNormBias}};
    t.push_back(f);
  }
  {
    // GPT2Config: n_* keys, LayerNorm with bias (layer_norm_epsilon),
    // learned positions (wpe), tie True; GGUF gpt2.
    FamilyRules f;
    f.name = "gpt2";
    f.hf_model_types = {"gpt2"};
    f.hf_architectures = {"GPT2LMHeadModel"};
    f.gguf_archs = {"gpt2"};
    f.hidden = "n_embd";
    f.layers = "n_layer";
    f.heads = "n_head";
    f.kv_heads = nullptr;
    f.intermediate = nullptr;
    f.max_positions = "n_positions";
    f.norm = NormKind::kLayerNorm;
    f.eps = "layer_norm_epsilon";
    f.eps_default = 1e-5;
    f.tie_default = true;
    f.positions = PositionScheme::kLearned;
    f.hf_tensors = Gpt2Names();
    t.push_back(f);
    // GPTBigCodeConfig (StarCoder, SantaCoder): GPT-2's ends and keys;
    // GGUF starcoder.
    f.name = "gpt_bigcode";
    f.hf_model_types = {"gpt_bigcode"};
    f.hf_architectures = {"GPTBigCodeForCausalLM"};
    f.gguf_archs = {"starcoder"};
    t.push_back(f);
  }
  {
    // RobertaConfig / XLMRobertaConfig (see hf_config.h): Embed only.
    FamilyRules f;
    f.name = "roberta";
    f.hf_model_types = {"roberta"};
    f.hf_architectures = {"RobertaForMaskedLM", "RobertaModel"};
    f.kv_heads = nullptr;
    f.eps = "layer_norm_eps";
    f.eps_default = 1e-12;
    f.norm = NormKind::kNone;
    f.tie_default = true;
    f.positions = PositionScheme::kLearned;
    f.roberta = true;
    f.hf_tensors = {{"roberta.embeddings.word_embeddings.weight", kEmbedTokens},
                    {"embeddings.word_embeddings.weight", kEmbedTokens},
                    {"roberta.embeddings.position_embeddings.weight", kPositionEmbeddings},
                    {"embeddings.position_embeddings.weight", kPositionEmbeddings},
                    {"lm_head.decoder.weight", kLmHead}};
    t.push_back(f);
    f.name = "xlm-roberta";
    f.hf_model_types = {"xlm-roberta"};
    f.hf_architectures = {"XLMRobertaForMaskedLM", "XLMRobertaModel"};
    t.push_back(f);
  }
  return t;
}

template <typename Field>
const FamilyRules* FindBy(std::string_view value, Field field) {
  for (const FamilyRules& f : AllFamilies()) {
    for (const std::string& v : f.*field) {
      if (v == value) return &f;
    }
  }
  return nullptr;
}

}  // namespace

const std::vector<FamilyRules>& AllFamilies() {
  static const std::vector<FamilyRules>* const kTable = new std::vector<FamilyRules>(BuildTable());
  return *kTable;
}

const FamilyRules* FindHfFamily(std::string_view model_type) {
  return FindBy(model_type, &FamilyRules::hf_model_types);
}
const FamilyRules* FindHfFamilyByArchitecture(std::string_view architecture) {
  return FindBy(architecture, &FamilyRules::hf_architectures);
}
const FamilyRules* FindGgufFamily(std::string_view arch) {
  return FindBy(arch, &FamilyRules::gguf_archs);
}
const FamilyRules* FindFamily(std::string_view name) {
  for (const FamilyRules& f : AllFamilies()) {
    if (name == f.name) return &f;
  }
  return nullptr;
}

std::string KnownHfModelTypes() {
  std::vector<std::string> all;
  for (const FamilyRules& f : AllFamilies()) {
    all.insert(all.end(), f.hf_model_types.begin(), f.hf_model_types.end());
  }
  return absl::StrJoin(all, ", ");
}

std::string KnownGgufArchs() {
  std::vector<std::string> all;
  for (const FamilyRules& f : AllFamilies()) {
    all.insert(all.end(), f.gguf_archs.begin(), f.gguf_archs.end());
  }
  return absl::StrJoin(all, ", ");
}

}  // namespace vocabd
