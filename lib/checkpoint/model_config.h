// The one description of a model that every checkpoint loader produces.
#ifndef VOCABD_LIB_CHECKPOINT_MODEL_CONFIG_H_
#define VOCABD_LIB_CHECKPOINT_MODEL_CONFIG_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "lib/positions/rope_params.h"

namespace vocabd {

enum class PositionScheme { kNone, kRope, kLearned, kSinusoidal, kAlibi };
enum class NormKind { kNone, kRmsNorm, kLayerNorm };

// Where Embed's multiplier rounds, relative to the embedding table's stored
// dtype (BF16/F16; F32 tables are the same in every mode):
//   kScaleAndProduct: the scale is rounded to the dtype, then each product
//     (Gemma: `hidden * torch.tensor(hidden_size**0.5, dtype=hidden.dtype)`)
//   kProduct: float32 product rounded once to the dtype (a Python float times
//     a tensor: Granite `inputs_embeds * self.embedding_multiplier`)
//   kFloat32: float32 product, not rounded (llama.cpp: ggml_scale on the f32
//     rows of ggml_get_rows)
enum class EmbeddingScaleRounding { kScaleAndProduct, kProduct, kFloat32 };

// The RoPE of one transformer layer (ModelConfig::layer_rope).
struct LayerRope {
  // false: the layer applies no rotary embedding (Llama 4 / SmolLM3 NoPE
  // layers, Cohere 2 global layers); `rope` is then unused.
  bool rotary = true;
  // HF layer_types name of the layer's attention ("sliding_attention",
  // "full_attention"), empty when the family has one kind.
  std::string attention_type;
  RopeParams rope;
};

// What the LM head does to the logits after the matmul (and lm_head.bias),
// in transformers' order, before temperature / masking / log-softmax:
//   logits = logits * logit_scale                 (Cohere `logit_scale`)
//   logits = logits / logits_scaling              (Granite `logits_scaling`;
//                                                  MiniCPM hidden_size / dim_model_base)
//   logits = cap * tanh(logits / cap)             (Gemma 2 `final_logit_softcapping`)
// Defaults are the identity (scale 1, scaling 1, cap 0 = none).
struct LogitTransform {
  double logit_scale = 1.0;
  double logits_scaling = 1.0;
  double final_logit_softcapping = 0.0;
  bool identity() const {
    return logit_scale == 1.0 && logits_scaling == 1.0 && final_logit_softcapping == 0.0;
  }
};

struct ModelConfig {
  std::string architecture;  // HF model_type or GGUF general.architecture: "llama", "gpt2", ...
  // The family table entry (lib/checkpoint/families.h) the loader used.
  std::string family;
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int num_hidden_layers = 0;
  int num_attention_heads = 0;
  int num_key_value_heads = 0;
  int head_dim = 0;
  int64_t intermediate_size = 0;
  int64_t max_position_embeddings = 0;
  PositionScheme position_scheme = PositionScheme::kRope;
  RopeParams rope;
  NormKind final_norm_kind = NormKind::kRmsNorm;
  double norm_eps = 1e-5;
  // The config key the eps came from ("rms_norm_eps", GGUF
  // "<arch>.attention.layer_norm_rms_epsilon", ...), for GetModel.
  std::string norm_eps_key;
  // Gemma RMSNorm multiplies by (1 + weight); the loader folds the 1 into
  // the served weight (GemmaRMSNorm.forward, fp32), so the served norm is a
  // plain RMSNorm. Reported by GetModel.
  bool norm_one_plus_weight = false;
  // LayerNorm without a bias (Cohere's CohereLayerNorm, MPT): a bias tensor
  // in the file is refused.
  bool norm_without_bias = false;
  bool tie_word_embeddings = true;
  // Default multiplier for Embed (sqrt(hidden_size) for Gemma, else 1).
  double embedding_scale = 1.0;
  // Where embedding_scale comes from: "" (1), "sqrt(hidden_size)" (Gemma),
  // or the config key (Granite "embedding_multiplier", GGUF
  // "<arch>.embedding_scale").
  std::string embedding_scale_source;
  // How the product is rounded (lib/embedding/embedding_scale.h).
  EmbeddingScaleRounding embedding_scale_rounding = EmbeddingScaleRounding::kScaleAndProduct;
  // The embedding module beyond the lookup (BERT, RoBERTa / XLM-R, Nomic BERT, BLOOM): Embed
  // adds token_type_embeddings row 0 (token_type_ids = 0) after the scaled
  // rows and before the learned position row, then applies a LayerNorm
  // (weight + bias, eps embedding_norm_eps, from the key
  // embedding_norm_eps_key) to the sum. Off for every decoder family except
  // BLOOM (word_embeddings_layernorm).
  bool embedding_token_type = false;
  bool embedding_layer_norm = false;
  double embedding_norm_eps = 0.0;
  std::string embedding_norm_eps_key;
  // Where logit_transform.logits_scaling comes from ("logits_scaling",
  // "hidden_size / dim_model_base", GGUF "<arch>.logit_scale"); empty = 1.
  std::string logits_scaling_source;
  // Applied to the logits by every ComputeLogits / Score call.
  LogitTransform logit_transform;
  // Per-layer RoPE, [num_hidden_layers] entries, or empty when every layer
  // uses `rope` (RopeOfLayer).
  std::vector<LayerRope> layer_rope;
  // Most layers a per-layer RoPE pattern is built for (published models have
  // <= 128); bounds what a config alone can make vocabd allocate.
  static constexpr int kMaxPatternLayers = 1 << 16;
  // Learned absolute positions: token position p reads row p + this
  // (RoBERTa-style tables: padding_idx + 1; GPT-2: 0).
  int64_t learned_position_offset = 0;
  // RoBERTa-style numbering of learned positions (-1 = off; else the
  // padding token id, which is also the padding row of the table, HF
  // `padding_idx = config.pad_token_id`). For a sequence without explicit
  // position_ids, Embed numbers learned positions as HF's
  // create_position_ids_from_input_ids: tokens equal to it read row
  // learned_position_padding_idx, the others read row
  // learned_position_offset + position_offset + (non-pad tokens before it).
  int64_t learned_position_padding_idx = -1;
  // Non-empty: the model's LM head is not served and ComputeLogits / Score
  // answer FAILED_PRECONDITION with this reason (encoder-only families whose
  // head vocabd does not implement, e.g. RoBERTa's masked-LM head).
  std::string lm_head_unsupported_reason;
  int64_t bos_token_id = -1;
  int64_t eos_token_id = -1;

  // INVALID_ARGUMENT naming the field for non-positive sizes, heads not
  // dividing, head_dim mismatch, invalid rope, a learned position offset or
  // padding row outside the table (max_position_embeddings rows).
  absl::Status Validate() const;

  // The RoPE of layer `layer` (0-based): layer_rope[layer], or `rope` for
  // every layer when layer_rope is empty. INVALID_ARGUMENT "layer = L is
  // outside [0, num_hidden_layers = N)"; FAILED_PRECONDITION when the model
  // has no rotary positions.
  absl::StatusOr<LayerRope> RopeOfLayer(int64_t layer) const;
  // True when some layer's RoPE differs from `rope` or is absent.
  bool has_per_layer_rope() const { return !layer_rope.empty(); }
};

}  // namespace vocabd

#endif  // VOCABD_LIB_CHECKPOINT_MODEL_CONFIG_H_
