// The one description of a model that every checkpoint loader produces.
#ifndef VOCABD_LIB_CHECKPOINT_MODEL_CONFIG_H_
#define VOCABD_LIB_CHECKPOINT_MODEL_CONFIG_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "lib/positions/rope_params.h"

namespace vocabd {

enum class PositionScheme { kNone, kRope, kLearned, kSinusoidal, kAlibi };
enum class NormKind { kNone, kRmsNorm, kLayerNorm };

struct ModelConfig {
  std::string architecture;  // "llama", "gpt2", ...
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
  bool tie_word_embeddings = true;
  // Default multiplier for Embed (sqrt(hidden_size) for Gemma, else 1).
  double embedding_scale = 1.0;
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
};

}  // namespace vocabd

#endif  // VOCABD_LIB_CHECKPOINT_MODEL_CONFIG_H_
