// Hugging Face config.json -> ModelConfig.
#ifndef VOCABD_LIB_HF_CONFIG_H_
#define VOCABD_LIB_HF_CONFIG_H_

#include <string>

#include "absl/status/statusor.h"
#include "lib/model_config.h"

namespace vocabd {

// Maps a config.json text of the Llama family (model_type "llama",
// "mistral", "qwen2"; or no model_type with architectures[0] ==
// "LlamaForCausalLM") to a ModelConfig.
//
// Required integer keys: vocab_size, hidden_size, num_hidden_layers,
// num_attention_heads, intermediate_size, max_position_embeddings.
// Optional keys and their defaults (HF LlamaConfig defaults):
//   num_key_value_heads = num_attention_heads, head_dim = hidden / heads
//   (null counts as absent), rms_norm_eps = 1e-6, rope_theta = 10000,
//   partial_rotary_factor = 1 (rotary_dim = int(head_dim * factor)),
//   tie_word_embeddings = false (LlamaConfig/MistralConfig/Qwen2Config set
//   False; HF always writes the key, so this only matters for hand-written
//   files -- an untied config without lm_head.weight is then refused rather
//   than served with random weights), bos/eos_token_id = -1 (a list, as in
//   Llama 3, gives its first id).
// `rope_scaling`: null/absent = default; otherwise `rope_type` (or legacy
// `type`; "su" = longrope) and the HF parameters (factor, original_max_...,
// low/high_freq_factor, beta_fast/slow, mscale, mscale_all_dim,
// attention_factor, truncate, short/long_factor; Phi-3's top-level
// original_max_position_embeddings is used when the object lacks it).
// Pair layout is HALF_SPLIT (HF rotate_half); final norm RMSNorm.
//
// Errors: INVALID_ARGUMENT naming `file_name` and the key for invalid JSON,
// missing required keys, wrong JSON types, unsupported model_type or
// rope_type, and for values ModelConfig::Validate() rejects.
absl::StatusOr<ModelConfig> ParseHfConfig(const std::string& json_text,
                                          const std::string& file_name);

}  // namespace vocabd

#endif  // VOCABD_LIB_HF_CONFIG_H_
