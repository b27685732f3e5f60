// A served model: a loaded checkpoint plus its LM head, with the operations
// the RPCs call. All methods are const and thread-safe.
#ifndef VOCABD_LIB_MODEL_H_
#define VOCABD_LIB_MODEL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "lib/checkpoint.h"
#include "lib/lm_head.h"
#include "lib/scoring.h"

namespace vocabd {

enum class AbsolutePositionsMode { kModelDefault, kNone, kSinusoidal, kLearned };
enum class EmbeddingScaleMode { kModelDefault, kNone, kSqrtHidden };

struct EmbedInput {
  // One entry per sequence.
  std::vector<std::vector<int64_t>> token_ids;
  // Per sequence: start position (used when position_ids[b] is empty).
  std::vector<int64_t> position_offsets;
  // Per sequence: explicit positions (empty or one per token).
  std::vector<std::vector<int64_t>> position_ids;
  AbsolutePositionsMode absolute_positions = AbsolutePositionsMode::kModelDefault;
  EmbeddingScaleMode embedding_scale = EmbeddingScaleMode::kModelDefault;
};

struct EmbedOutput {
  std::vector<float> embeddings;           // [total_tokens, hidden_size]
  std::vector<int64_t> sequence_offsets;   // [num_sequences + 1]
};

struct HeadInput {
  const float* hidden = nullptr;  // [rows, hidden_size] F32
  int64_t rows = 0;
  int64_t width = 0;              // must equal hidden_size
  bool apply_final_norm = true;
  float temperature = 1.0f;       // > 0
  int64_t vocab_limit = 0;        // 0 = none
};

struct ScoreInput {
  HeadInput head;
  std::vector<int64_t> target_ids;  // empty or [rows]
  int top_k = 0;                    // 0..1024
};

struct ScoreOutput {
  std::vector<RowScoreResult> rows;
  double sum_target_logprob = 0;
  int64_t num_targets = 0;
};

class Model {
 public:
  struct Options {
    std::string name;
    // Checkpoint path (see LoadCheckpoint).
    std::string path;
  };
  // Loads the checkpoint and builds the LM head primitive.
  static absl::StatusOr<std::unique_ptr<Model>> Create(const Options& options);

  const std::string& name() const { return name_; }
  const ModelConfig& config() const { return checkpoint_->config(); }
  const Checkpoint& checkpoint() const { return *checkpoint_; }

  // Ragged lookup. INVALID_ARGUMENT names `sequences[b].token_ids[i]` or
  // `sequences[b].position_ids` with the bad value; FAILED_PRECONDITION for
  // learned positions on a model without a table.
  absl::Status Embed(const EmbedInput& input, EmbedOutput* output) const;

  // logits [rows, vocab_size] (tempered, masked; log-softmax if asked).
  // INVALID_ARGUMENT names `hidden.shape` / `temperature` / `vocab_limit`.
  absl::Status ComputeLogits(const HeadInput& input, bool log_softmax,
                             std::vector<float>* logits) const;

  // Per-row scores. INVALID_ARGUMENT names `target_ids[i]` / `top_k`.
  absl::Status Score(const ScoreInput& input, ScoreOutput* output) const;

 private:
  Model() = default;
  absl::Status ValidateHead(const HeadInput& input) const;
  std::string name_;
  std::unique_ptr<Checkpoint> checkpoint_;
  std::unique_ptr<LmHead> lm_head_;
};

}  // namespace vocabd

#endif  // VOCABD_LIB_MODEL_H_
