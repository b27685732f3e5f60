// Local references for `vocabctl bench --verify`: recompute a response from
// the checkpoint file (lib/checkpoint/checkpoint.h LoadCheckpoint) without the server's
// code paths, so a load test also catches wrong answers (mixed-up rows in a
// batcher, torn buffers, wrong dtype conversion).
//
// Each Check* returns OK when the response matches, DATA_LOSS with a
// message naming the first differing field / index / values otherwise, and
// UNIMPLEMENTED when the request uses options the reference does not model
// (counted as "skipped", never as a pass).
//
// References and tolerances:
//   Embed    rows of model.embed_tokens.weight times the embedding scale
//            (fp32 multiply), converted to the output dtype with
//            round-to-nearest-even: must be bit-identical. Absolute
//            positions other than none (or a RoPE model's default) are skipped.
//   Logits   float64 RMSNorm (HF LlamaRMSNorm: x / sqrt(mean(x^2) + eps) * w)
//            and float64 dot products with lm_head rows; element j must be
//            within 2e-5 * (1 + S_j) where S_j = sum_k |y_k W_jk| / T (a
//            float32 accumulation bound with margin) plus the output
//            dtype's rounding (2^-8 BF16, 2^-11 F16, relative).
//   Score    the same logits; logsumexp and target log-prob within the
//            largest row tolerance (+1e-6 relative); each top-k id's
//            log-prob within it; the top-1 id's logit within it of the
//            row maximum; target rank consistent with the reference
//            logits up to that tolerance.
//   ApplyRope float64 angles pos / theta^(2i/r), both pair layouts, BHSD /
//            BSHD layouts with position_offsets; each value within
//            (1e-5 + 2.4e-7 * pos) * (|a| + |b|) + 1e-6 (fp32 angle error).
//            Scaling other than default, position_ids tensors and THD are
//            skipped.
#ifndef VOCABD_CLIENT_BENCH_VERIFY_H_
#define VOCABD_CLIENT_BENCH_VERIFY_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "lib/checkpoint/checkpoint.h"
#include "vocabd/v1/embedding.pb.h"
#include "vocabd/v1/position.pb.h"
#include "vocabd/v1/scoring.pb.h"

namespace vocabd {

class BenchReference {
 public:
  // LoadCheckpoint(path); NOT_FOUND / INVALID_ARGUMENT from the loader.
  static absl::StatusOr<std::unique_ptr<BenchReference>> Load(const std::string& path);
  explicit BenchReference(std::unique_ptr<Checkpoint> checkpoint);

  const Checkpoint& checkpoint() const { return *checkpoint_; }

  absl::Status CheckEmbed(const v1::EmbedRequest& request, const v1::EmbedResponse& response) const;
  absl::Status CheckLogits(const v1::ComputeLogitsRequest& request,
                           const v1::ComputeLogitsResponse& response) const;
  absl::Status CheckScore(const v1::ScoreRequest& request, const v1::ScoreResponse& response) const;
  absl::Status CheckRope(const v1::ApplyRopeRequest& request,
                         const v1::ApplyRopeResponse& response) const;

 private:
  struct RowLogits;
  // Reference logits of hidden row `row` (after norm, temperature, mask).
  absl::Status ComputeRow(const float* hidden, bool apply_norm, float temperature,
                          int64_t vocab_limit, RowLogits* out) const;
  std::unique_ptr<Checkpoint> checkpoint_;
};

}  // namespace vocabd

#endif  // VOCABD_CLIENT_BENCH_VERIFY_H_
