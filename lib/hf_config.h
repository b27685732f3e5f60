// Hugging Face config.json -> ModelConfig.
#ifndef VOCABD_LIB_HF_CONFIG_H_
#define VOCABD_LIB_HF_CONFIG_H_

#include <string>

#include "absl/status/statusor.h"
#include "lib/model_config.h"

namespace vocabd {

// Maps a config.json text (Llama family in the Foundation issue:
// vocab_size, hidden_size, num_hidden_layers, num_attention_heads,
// num_key_value_heads (default = heads), head_dim (default hidden/heads),
// intermediate_size, max_position_embeddings, rms_norm_eps, rope_theta
// (default 10000), partial_rotary_factor, tie_word_embeddings (default
// true for llama as HF PretrainedConfig), bos/eos_token_id). Pair layout is
// HALF_SPLIT (HF rotate_half). INVALID_ARGUMENT naming `file_name` and the
// key for missing required fields or wrong JSON types.
absl::StatusOr<ModelConfig> ParseHfConfig(const std::string& json_text,
                                          const std::string& file_name);

}  // namespace vocabd

#endif  // VOCABD_LIB_HF_CONFIG_H_
