// The model family table: one entry per family holds every rule vocabd
// applies at the two ends of the model and to positions, for both file
// forms (Hugging Face config.json + safetensors, GGUF). The loaders
// (hf_config.cc, gguf_checkpoint.cc) only read keys the entry names;
// adding a family is one entry here plus its test
// (tests/lib/checkpoint/families_test.cc).
//
// Sources: transformers' configuration_<family>.py (key names, class
// defaults) and modeling_<family>.py (embedding, final norm, head and RoPE
// of each layer); llama.cpp's llama-arch.cpp (GGUF arch names and keys),
// llama-model.cpp (llama_model_rope_type: NORM = interleaved pairs, NEOX =
// half-split pairs; per-arch hparams) and convert_hf_to_gguf.py (what the
// converter writes, e.g. Gemma norm weights stored as 1 + w).
#ifndef VOCABD_LIB_CHECKPOINT_FAMILIES_H_
#define VOCABD_LIB_CHECKPOINT_FAMILIES_H_

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "lib/checkpoint/model_config.h"
#include "lib/positions/rope_params.h"

namespace vocabd {

// Embedding multiplier rule (ModelConfig::embedding_scale).
enum class EmbeddingScaleRule {
  kOne,         // no multiplier
  kSqrtHidden,  // Gemma: sqrt(hidden_size) rounded to the table dtype (HF);
                // GGUF: llama.cpp ggml_scale(sqrtf(n_embd)) in f32
  kConfigKey,   // the value of FamilyRules::embedding_key (HF, a Python float
                // times the tensor) / <arch>.embedding_scale (GGUF)
};

// How the per-layer RoPE pattern is derived (ModelConfig::layer_rope).
enum class LayerRopeRule {
  kUniform,  // one RoPE for every layer (layer_rope stays empty)
  // Every layer the same RoPE, but the attention types alternate and are
  // listed (Gemma 2, gpt-oss: HF `layer_types`, else Gemma 2's
  // sliding iff (i + 1) % 2 != 0).
  kUniformListAttention,
  // Gemma 3: sliding layers (HF `layer_types`, else (i + 1) %
  // sliding_window_pattern != 0) use theta = rope_local_base_freq and no
  // scaling (Gemma3TextModel.rotary_emb_local); full layers use rope_theta
  // with rope_scaling (Gemma3TextModel.rotary_emb).
  kGemma3LocalGlobal,
  // Cohere 2: sliding layers rotate, full layers apply no RoPE
  // (Cohere2Attention applies rotary only when sliding_window is set).
  kCohere2SlidingOnly,
  // Llama 4 text / SmolLM3: `no_rope_layers[i]` = 1 rotates, 0 is a NoPE
  // layer; absent: [(i + 1) % no_rope_layer_interval != 0] (interval 4).
  kNoRopeLayers,
};

// What a GGUF `<arch>.logit_scale` means (llama.cpp's graph for the arch).
enum class GgufLogitScaleRule {
  kNone,
  kMultiply,  // command-r, cohere2: logits * logit_scale
  kDivide,    // granite, granitemoe: the converter stores logits_scaling;
              // llama.cpp scales by 1 / logit_scale
};

struct FamilyRules {
  // Family name (GetModel `family`).
  const char* name = "";
  // HF `model_type` values (the text config's, for composite configs).
  std::vector<std::string> hf_model_types;
  // `architectures[0]` values accepted when a config.json lacks model_type.
  std::vector<std::string> hf_architectures;
  // GGUF `general.architecture` values (llama.cpp LLM_ARCH_NAMES); empty:
  // the family has no GGUF form vocabd reads.
  std::vector<std::string> gguf_archs;

  // config.json size keys and HF config-class defaults.
  const char* hidden = "hidden_size";
  const char* layers = "num_hidden_layers";
  const char* heads = "num_attention_heads";
  // Other names the config class accepts for the same size (its
  // attribute_map or backward-compatible kwargs), read when the key above
  // is absent: BloomConfig n_embed / n_layer / n_head, the RefinedWeb
  // configs of Falcon n_layer / n_head, MptConfig hidden_size ...
  const char* hidden_alt = nullptr;
  const char* layers_alt = nullptr;
  const char* heads_alt = nullptr;
  // FalconConfig: KV heads = num_kv_heads when new_decoder_architecture,
  // else 1 when multi_query (default true), else num_attention_heads.
  bool falcon_kv_heads = false;
  // MptConfig: intermediate = expansion_ratio (default 4) * d_model.
  const char* intermediate_ratio_key = nullptr;
  const char* kv_heads = "num_key_value_heads";   // nullptr: = heads
  const char* intermediate = "intermediate_size";  // nullptr: n_inner or 4 * hidden
  const char* max_positions = "max_position_embeddings";
  // The head width RoPE rotates (DeepSeek: qk_rope_head_dim).
  const char* head_dim_key = "head_dim";
  int head_dim_default = 0;  // 0: hidden / heads
  // Config-class defaults of keys a published config.json may omit (0:
  // required). Gemma 3's composite configs list only the text_config keys
  // that differ from Gemma3TextConfig's defaults.
  int64_t vocab_default = 0;
  int64_t heads_default = 0;
  int64_t kv_heads_default = 0;
  int64_t intermediate_default = 0;
  int64_t max_positions_default = 0;
  bool tie_default = false;

  // Final norm.
  NormKind norm = NormKind::kRmsNorm;
  const char* eps = "rms_norm_eps";
  double eps_default = 1e-6;
  bool norm_one_plus_weight = false;  // Gemma x * (1 + w) (HF form; GGUF stores 1 + w)
  bool norm_without_bias = false;     // Cohere LayerNorm

  // Positions.
  PositionScheme positions = PositionScheme::kRope;
  RopePairLayout hf_pair_layout = RopePairLayout::kHalfSplit;
  // DeepSeek-V3 `rope_interleave` (default true): true = interleaved.
  const char* hf_interleave_key = nullptr;
  RopePairLayout gguf_pair_layout = RopePairLayout::kHalfSplit;
  const char* theta = "rope_theta";
  const char* theta_fallback = nullptr;
  double theta_default = 10000.0;
  const char* partial = "partial_rotary_factor";
  double partial_default = 1.0;
  LayerRopeRule layer_rope = LayerRopeRule::kUniform;
  int sliding_window_pattern_default = 0;  // Gemma 3: 6, Cohere 2: 4, Gemma 2: 2
  double local_theta_default = 10000.0;    // Gemma 3 rope_local_base_freq

  // Embedding multiplier.
  EmbeddingScaleRule embedding = EmbeddingScaleRule::kOne;
  const char* embedding_key = nullptr;  // HF key for kConfigKey
  double embedding_default = 1.0;

  // Embedding module beyond the table lookup (BERT-style encoders, BLOOM):
  // Embed returns LayerNorm(word + token_type_embeddings[0] + position),
  // the module's output for token_type_ids = 0 (BertEmbeddings.forward,
  // RobertaEmbeddings.forward, NomicBertEmbeddings + emb_ln, BloomModel
  // word_embeddings_layernorm).
  bool embedding_token_type = false;  // adds token_type_embeddings row 0
  bool embedding_layer_norm = false;  // LayerNorm (weight and bias) after the sum
  const char* embedding_norm_eps = nullptr;  // HF eps key of that LayerNorm
  double embedding_norm_eps_default = 1e-12;
  // Non-null: the LM head is not served (ModelConfig::lm_head_unsupported_reason).
  const char* lm_head_unsupported = nullptr;

  // ALiBi positions: HF bool key that selects them (Falcon `alibi`), or
  // always (BLOOM, MPT: positions = kAlibi).
  const char* alibi_key = nullptr;
  // MPT: attn_config.alibi must be true and the slopes BLOOM's
  // (alibi_bias_max 8 with a power-of-two head count), which GetAlibiSlopes
  // serves; anything else is refused.
  bool mpt_attn_config = false;
  // Nomic BERT: rotary_emb_fraction > 0 (else learned positions),
  // rotary_scaling_factor null, prenorm false (else refused).
  bool nomic_checks = false;
  // GGUF: the rotary width is <arch>.rope.dimension_count and is the
  // head_dim vocabd reports (DeepSeek-V2/V3 MLA: qk_rope_head_dim).
  bool gguf_head_dim_is_rope_dim = false;

  // Head transform (HF keys; nullptr = none). Defaults are the config
  // class's (used when the key is absent; JSON null means none).
  const char* logit_scale_key = nullptr;  // Cohere: logits * logit_scale
  double logit_scale_default = 1.0;
  const char* logits_scaling_key = nullptr;  // Granite: logits / logits_scaling
  double logits_scaling_default = 1.0;
  // MiniCPM: logits_scaling = hidden_size / dim_model_base (MiniCPMForCausalLM
  // divides the hidden states by it before lm_head; linear, so the same as
  // dividing the logits).
  const char* dim_model_base_key = nullptr;
  double dim_model_base_default = 1.0;
  const char* softcap_key = nullptr;  // Gemma 2: cap * tanh(logits / cap)
  double softcap_default = 0.0;
  // GGUF head transform.
  GgufLogitScaleRule gguf_logit_scale = GgufLogitScaleRule::kNone;
  bool gguf_softcap = false;           // reads <arch>.final_logit_softcapping
  double gguf_softcap_default = 0.0;   // when that key is absent

  // (HF tensor name, canonical name of checkpoint.h) pairs of the ends.
  std::vector<std::pair<std::string, std::string>> hf_tensors;
  // RoBERTa / XLM-R learned positions and Embed-only head (hf_config.h).
  bool roberta = false;
};

// The entry whose hf_model_types holds `model_type`, or nullptr.
const FamilyRules* FindHfFamily(std::string_view model_type);
// The entry whose hf_architectures holds `architecture`, or nullptr.
const FamilyRules* FindHfFamilyByArchitecture(std::string_view architecture);
// The entry whose gguf_archs holds `arch`, or nullptr.
const FamilyRules* FindGgufFamily(std::string_view arch);
// By FamilyRules::name, or nullptr.
const FamilyRules* FindFamily(std::string_view name);
// Every entry, in table order.
const std::vector<FamilyRules>& AllFamilies();
// "llama, mistral, ..." (every HF model_type / every GGUF arch), for errors.
std::string KnownHfModelTypes();
std::string KnownGgufArchs();

}  // namespace vocabd

#endif  // VOCABD_LIB_CHECKPOINT_FAMILIES_H_
