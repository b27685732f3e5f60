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
    // GGUF deepseek2 (V2, V2-Lite, V3 and R1 files alike; read under the
    // deepseek_v3 entry): rope.dimension_count = qk_rope_head_dim, yarn with
    // rope.scaling.yarn_log_multiplier = 0.1 * mscale_all_dim (NORM).
    FamilyRules f = LlamaLike("deepseek_v3", {"deepseek_v3"}, {"deepseek2"}, kNorm);
    f.gguf_head_dim_is_rope_dim = true;
    f.head_dim_key = "qk_rope_head_dim";
    f.head_dim_default = 64;
    f.hf_pair_layout = RopePairLayout::kInterleaved;
    f.hf_interleave_key = "rope_interleave";
    t.push_back(f);
    f.name = "deepseek_v2";
    f.hf_model_types = {"deepseek_v2"};
    f.gguf_archs = {};
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
    // InternLM2 (modeling_internlm2.py of internlm/internlm2-7b,
    // trust_remote_code): InternLM2ForCausalLM model.tok_embeddings /
    // model.norm (InternLM2RMSNorm, rms_norm_eps 1e-6) / output, untied,
    // rotate_half RoPE with rope_scaling (dynamic / linear). GGUF internlm2:
    // the converter permutes q/k (NORM).
    FamilyRules f = LlamaLike("internlm2", {"internlm2"}, {"internlm2"}, kNorm);
    f.hf_architectures = {"InternLM2ForCausalLM"};
    f.hf_tensors = {{"model.tok_embeddings.weight", kEmbedTokens},
                    {"model.norm.weight", kFinalNorm},
                    {"output.weight", kLmHead}};
    t.push_back(f);
  }
  {
    // EXAONE 3.0 / 3.5 (modeling_exaone.py, trust_remote_code): ExaoneModel
    // transformer.wte / transformer.ln_f (ExaoneRMSNorm, layer_norm_epsilon
    // 1e-5) / lm_head, num_layers, rotate_half RoPE (rope_scaling llama3 in
    // 3.5); ExaoneConfig tie default True. GGUF exaone (NEOX).
    FamilyRules f = LlamaLike("exaone", {"exaone"}, {"exaone"}, kNeox);
    f.hf_architectures = {"ExaoneForCausalLM"};
    f.layers = "num_layers";
    f.layers_alt = "num_hidden_layers";
    f.eps = "layer_norm_epsilon";
    f.eps_default = 1e-5;
    f.max_positions_default = 2048;
    f.tie_default = true;
    f.hf_tensors = {{"transformer.wte.weight", kEmbedTokens},
                    {"transformer.ln_f.weight", kFinalNorm},
                    {"lm_head.weight", kLmHead}};
    t.push_back(f);
  }
  {
    // MiniCPM (modeling_minicpm.py of openbmb/MiniCPM-2B-sft-bf16,
    // trust_remote_code): MiniCPMModel.forward embed_tokens(ids) *
    // config.scale_emb (a Python float: one rounding of the product);
    // MiniCPMForCausalLM.forward lm_head(hidden / (hidden_size /
    // dim_model_base)); MiniCPMConfig defaults scale_emb 1, dim_model_base
    // 1, tie True. GGUF minicpm: convert_hf_to_gguf.py MiniCPMModel writes
    // embedding_scale = scale_emb and logit_scale = hidden_size /
    // dim_model_base; llama.cpp runs it with llm_build_granite, which
    // divides the logits by logit_scale (NORM: q/k permuted).
    FamilyRules f = LlamaLike("minicpm", {"minicpm"}, {"minicpm"}, kNorm);
    f.hf_architectures = {"MiniCPMForCausalLM"};
    f.tie_default = true;
    f.embedding = EmbeddingScaleRule::kConfigKey;
    f.embedding_key = "scale_emb";
    f.dim_model_base_key = "dim_model_base";
    f.gguf_logit_scale = GgufLogitScaleRule::kDivide;
    t.push_back(f);
  }
  {
    // FalconConfig (modeling_falcon.py; also the RefinedWeb configs of the
    // first Falcon uploads, with n_layer / n_head): FalconModel
    // transformer.word_embeddings / transformer.ln_f (nn.LayerNorm with
    // bias, layer_norm_epsilon 1e-5) / lm_head, tie default True; rotary
    // (FalconRotaryEmbedding, rotate_half, rope_theta 10000) unless
    // `alibi` (then build_alibi_tensor, BLOOM's slopes);
    // max_position_embeddings default 2048. GGUF falcon (NEOX).
    FamilyRules f = LlamaLike("falcon", {"falcon", "RefinedWebModel", "RefinedWeb"}, {"falcon"},
                              kNeox);
    f.hf_architectures = {"FalconForCausalLM", "RWForCausalLM"};
    f.layers_alt = "n_layer";
    f.heads_alt = "n_head";
    f.falcon_kv_heads = true;
    f.intermediate = nullptr;  // FalconConfig ffn_hidden_size None: 4 * hidden_size
    f.max_positions_default = 2048;
    f.norm = NormKind::kLayerNorm;
    f.eps = "layer_norm_epsilon";
    f.eps_default = 1e-5;
    f.tie_default = true;
    f.alibi_key = "alibi";
    f.hf_tensors = {{"transformer.word_embeddings.weight", kEmbedTokens},
                    {"transformer.ln_f.weight", kFinalNorm},
                    {"transformer.ln_f.bias", kFinalNormBias},
                    {"lm_head.weight", kLmHead}};
    t.push_back(f);
  }
  {
    // BloomConfig (modeling_bloom.py): BloomModel.forward
    // word_embeddings_layernorm(word_embeddings(ids)) (nn.LayerNorm with
    // bias, layer_norm_epsilon 1e-5), ln_f with bias, tied lm_head, ALiBi
    // (build_alibi_tensor); n_embed / n_layer / n_head aliases. GGUF bloom:
    // token_embd_norm, output_norm, ALiBi (max bias 8).
    FamilyRules f;
    f.name = "bloom";
    f.hf_model_types = {"bloom"};
    f.hf_architectures = {"BloomForCausalLM", "BloomModel"};
    f.gguf_archs = {"bloom"};
    f.hidden_alt = "n_embed";
    f.layers = "n_layer";
    f.layers_alt = "num_hidden_layers";
    f.heads = "n_head";
    f.heads_alt = "num_attention_heads";
    f.kv_heads = nullptr;
    f.intermediate = nullptr;
    f.max_positions = nullptr;
    f.norm = NormKind::kLayerNorm;
    f.eps = "layer_norm_epsilon";
    f.eps_default = 1e-5;
    f.tie_default = true;
    f.positions = PositionScheme::kAlibi;
    f.embedding_layer_norm = true;
    f.embedding_norm_eps = "layer_norm_epsilon";
    f.embedding_norm_eps_default = 1e-5;
    for (const char* prefix : {"transformer.", ""}) {
      const std::string p = prefix;
      f.hf_tensors.emplace_back(p + "word_embeddings.weight", kEmbedTokens);
      f.hf_tensors.emplace_back(p + "word_embeddings_layernorm.weight", kEmbedNorm);
      f.hf_tensors.emplace_back(p + "word_embeddings_layernorm.bias", kEmbedNormBias);
      f.hf_tensors.emplace_back(p + "ln_f.weight", kFinalNorm);
      f.hf_tensors.emplace_back(p + "ln_f.bias", kFinalNormBias);
    }
    f.hf_tensors.emplace_back("lm_head.weight", kLmHead);
    t.push_back(f);
  }
  {
    // MptConfig (modeling_mpt.py): MptModel transformer.wte /
    // transformer.norm_f (LayerNorm whose bias is set to None: no bias,
    // layer_norm_epsilon 1e-5), tied lm_head, ALiBi
    // (build_mpt_alibi_tensor, alibi_bias_max); d_model / n_layers /
    // n_heads / max_seq_len / expansion_ratio. GGUF mpt: ALiBi with
    // mpt.attention.max_alibi_bias.
    FamilyRules f;
    f.name = "mpt";
    f.hf_model_types = {"mpt"};
    f.hf_architectures = {"MPTForCausalLM", "MptForCausalLM"};
    f.gguf_archs = {"mpt"};
    f.hidden = "d_model";
    f.hidden_alt = "hidden_size";
    f.layers = "n_layers";
    f.layers_alt = "num_hidden_layers";
    f.heads = "n_heads";
    f.heads_alt = "num_attention_heads";
    f.kv_heads = nullptr;
    f.intermediate = nullptr;
    f.intermediate_ratio_key = "expansion_ratio";
    f.max_positions = "max_seq_len";
    f.max_positions_default = 2048;
    f.norm = NormKind::kLayerNorm;
    f.eps = "layer_norm_epsilon";
    f.eps_default = 1e-5;
    f.norm_without_bias = true;
    f.tie_default = true;
    f.positions = PositionScheme::kAlibi;
    f.mpt_attn_config = true;
    f.hf_tensors = {{"transformer.wte.weight", kEmbedTokens},
                    {"transformer.norm_f.weight", kFinalNorm},
                    {"transformer.norm_f.bias", kFinalNormBias},
                    {"lm_head.weight", kLmHead}};
    t.push_back(f);
  }
  {
    // BertConfig (modeling_bert.py): BertEmbeddings word + token_type(0) +
    // position (absolute, position_ids = arange) then LayerNorm
    // (layer_norm_eps 1e-12); Embed only (BertForMaskedLM's head applies
    // cls.predictions.transform first). BertForMaskedLM / BertForPreTraining
    // prefix `bert.`, BertModel none; old checkpoints name the LayerNorm
    // gamma / beta. GGUF bert: token_types, position_embd, token_embd_norm.
    FamilyRules f;
    f.name = "bert";
    f.hf_model_types = {"bert"};
    f.hf_architectures = {"BertForMaskedLM", "BertModel", "BertForPreTraining"};
    f.gguf_archs = {"bert"};
    f.kv_heads = nullptr;
    f.norm = NormKind::kNone;
    f.eps = "layer_norm_eps";
    f.eps_default = 1e-12;
    f.tie_default = true;
    f.positions = PositionScheme::kLearned;
    f.embedding_token_type = true;
    f.embedding_layer_norm = true;
    f.embedding_norm_eps = "layer_norm_eps";
    f.embedding_norm_eps_default = 1e-12;
    f.lm_head_unsupported =
        "its masked-LM head applies cls.predictions.transform (dense + gelu + LayerNorm) before "
        "the decoder, which vocabd does not implement";
    for (const char* prefix : {"bert.embeddings.", "embeddings."}) {
      const std::string p = prefix;
      f.hf_tensors.emplace_back(p + "word_embeddings.weight", kEmbedTokens);
      f.hf_tensors.emplace_back(p + "position_embeddings.weight", kPositionEmbeddings);
      f.hf_tensors.emplace_back(p + "token_type_embeddings.weight", kTokenTypeEmbeddings);
      f.hf_tensors.emplace_back(p + "LayerNorm.weight", kEmbedNorm);
      f.hf_tensors.emplace_back(p + "LayerNorm.bias", kEmbedNormBias);
      f.hf_tensors.emplace_back(p + "LayerNorm.gamma", kEmbedNorm);
      f.hf_tensors.emplace_back(p + "LayerNorm.beta", kEmbedNormBias);
    }
    t.push_back(f);
  }
  {
    // NomicBertConfig (modeling_hf_nomic_bert.py of
    // nomic-ai/nomic-embed-text-v1.5, trust_remote_code; a GPT2Config):
    // NomicBertEmbeddings word + token_type(0) (no learned positions when
    // rotary), then emb_ln (LayerNorm, layer_norm_epsilon) as
    // NomicBertModel.forward applies it (prenorm false); rotary
    // (rotary_emb_base 1000, rotary_emb_fraction, half-split when
    // rotary_emb_interleaved is false); Embed only. GGUF nomic-bert (NEOX).
    FamilyRules f;
    f.name = "nomic_bert";
    f.hf_model_types = {"nomic_bert"};
    f.hf_architectures = {"NomicBertModel"};
    f.gguf_archs = {"nomic-bert"};
    f.hidden = "n_embd";
    f.hidden_alt = "hidden_size";
    f.layers = "n_layer";
    f.layers_alt = "num_hidden_layers";
    f.heads = "n_head";
    f.heads_alt = "num_attention_heads";
    f.kv_heads = nullptr;
    f.intermediate = nullptr;
    f.max_positions = "n_positions";
    f.norm = NormKind::kNone;
    f.eps = "layer_norm_epsilon";
    f.eps_default = 1e-5;
    f.tie_default = true;
    f.gguf_pair_layout = kNeox;
    f.theta = "rotary_emb_base";
    f.theta_default = 1000.0;
    f.partial = "rotary_emb_fraction";
    f.partial_default = 0.0;
    f.nomic_checks = true;
    f.embedding_token_type = true;
    f.embedding_layer_norm = true;
    f.embedding_norm_eps = "layer_norm_epsilon";
    f.embedding_norm_eps_default = 1e-5;  // GPT2Config default
    f.lm_head_unsupported =
        "it is an embedding encoder (NomicBertModel) with no LM head vocabd implements";
    f.hf_tensors = {{"embeddings.word_embeddings.weight", kEmbedTokens},
                    {"embeddings.token_type_embeddings.weight", kTokenTypeEmbeddings},
                    {"emb_ln.weight", kEmbedNorm},
                    {"emb_ln.bias", kEmbedNormBias}};
    t.push_back(f);
  }
  {
    // RobertaConfig / XLMRobertaConfig (modeling_roberta.py,
    // modeling_xlm_roberta.py; see hf_config.h): RobertaEmbeddings.forward
    // word + token_type(0) + position (learned, numbered from padding_idx + 1
    // by create_position_ids_from_input_ids) then LayerNorm (layer_norm_eps,
    // RobertaConfig default 1e-12), as BERT's; Embed only.
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
    f.embedding_token_type = true;
    f.embedding_layer_norm = true;
    f.embedding_norm_eps = "layer_norm_eps";
    f.embedding_norm_eps_default = 1e-12;
    for (const char* prefix : {"roberta.embeddings.", "embeddings."}) {
      const std::string p = prefix;
      f.hf_tensors.emplace_back(p + "word_embeddings.weight", kEmbedTokens);
      f.hf_tensors.emplace_back(p + "position_embeddings.weight", kPositionEmbeddings);
      f.hf_tensors.emplace_back(p + "token_type_embeddings.weight", kTokenTypeEmbeddings);
      f.hf_tensors.emplace_back(p + "LayerNorm.weight", kEmbedNorm);
      f.hf_tensors.emplace_back(p + "LayerNorm.bias", kEmbedNormBias);
    }
    f.hf_tensors.emplace_back("lm_head.decoder.weight", kLmHead);
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
