// Scores computed from one row of logits (after temperature and masking).
//
//   logsumexp = m + log(sum_j exp(l_j - m)),  m = max_j l_j   (float64 sum)
//   logprob_j = l_j - logsumexp
//   rank(t)   = 1 + #{j : l_j > l_t} + #{j < t : l_j == l_t}
//   top_k     = k best (logprob desc, token id asc on ties)
//
// All rows are F32 logits of length `vocab`. Masked ids carry -inf (see
// PrepareLogits); they have logprob -inf and never appear in top_k. NaN
// logits (only from NaN inputs) rank below every number, including -inf,
// never appear in top_k, and make logsumexp NaN.
//
// Rows are processed in chunks of kScoreChunk ids, in parallel over the
// OpenMP threads (lib/parallel.h) when a row has more than one chunk (so a
// Llama-3 row of 128,256 ids is 8 chunks on both cores). Chunk boundaries are
// fixed, never derived from the thread count, so every result is the same
// for any number of threads: ranks, top-k and masking are exact merges of
// per-chunk results, and the float64 sum of exponentials is added up per
// chunk, then over chunks in order.
#ifndef VOCABD_LIB_SCORING_H_
#define VOCABD_LIB_SCORING_H_

#include <cstdint>
#include <utility>
#include <vector>

namespace vocabd {

// Ids per chunk (see above).
inline constexpr int64_t kScoreChunk = 16384;

struct RowScoreResult {
  float logsumexp = 0;
  float target_logprob = 0;  // valid when a target was given
  int64_t target_rank = 0;   // valid when a target was given (1-based; 0 = none)
  // (token id, logprob), best first. Size min(top_k, #ids with logit > -inf).
  std::vector<std::pair<int64_t, float>> top_k;
};

// Adds bias[j] (when bias is not null: an lm_head.bias), then divides
// logits[0, vocab) by temperature (if != 1 and > 0), and sets ids >=
// vocab_limit (if 0 < vocab_limit < vocab) to -inf, in place. Division (not
// multiplication by 1/T) matches `logits / T` in PyTorch/NumPy.
void PrepareLogits(float* logits, int64_t vocab, float temperature, int64_t vocab_limit,
                   const float* bias = nullptr);

// logsumexp of logits[0, vocab), accumulated in float64. -inf when every
// logit is -inf (or vocab <= 0), +inf if any logit is +inf, NaN if any is NaN.
double LogSumExp(const float* logits, int64_t vocab);

// In place: logits[j] = float(double(logits[j]) - logsumexp).
void LogSoftmaxInPlace(float* logits, int64_t vocab);

// Scores one prepared row in O(vocab + vocab * log(k)) time. target < 0 (or
// >= vocab) means no target: target_logprob and target_rank stay 0. top_k is
// clamped to [0, vocab].
RowScoreResult ScoreRow(const float* logits, int64_t vocab, int64_t target, int top_k);

}  // namespace vocabd

#endif  // VOCABD_LIB_SCORING_H_
