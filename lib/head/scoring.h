// Scores computed from one row of logits (after temperature and masking).
//
//   logsumexp = m + log(sum_j exp(l_j - m)),  m = max_j l_j   (float64 sum)
//   logprob_j = l_j - logsumexp
//   rank(t)   = 1 + #{j : l_j > l_t} + #{j < t : l_j == l_t}
//   top_k     = k best (logprob desc, token id asc on ties)
//   candidate logprob_c = l_c - logsumexp for each given id c, wherever it
//               ranks (float64 difference, rounded once to float)
//
// All rows are F32 logits of length `vocab`. Masked ids carry -inf (see
// PrepareLogits); they have logprob -inf and never appear in top_k. NaN
// logits (only from NaN inputs) rank below every number, including -inf,
// never appear in top_k, and make logsumexp NaN.
//
// A row is processed in chunks of kScoreChunk ids (max, rank counts and
// float64 sums of exponentials per chunk, merged exactly / added in chunk
// order); top-k is one buffered selection over the whole row. Scoring one
// row runs on the calling thread: it is cheap (a 128,256-wide row with a
// target and top-5: ~0.2 ms; top-1024: ~0.5 ms, AVX-512 exp and max where
// the CPU has them), and splitting it over threads measured slower (per-chunk
// top-k candidates, plus a parallel region's start/end, which stalls for
// milliseconds when another process holds the other core). Parallelism is
// one level up: Model scores a call's rows, and the dynamic batcher a batch's
// calls, in one OpenMP region each (lib/core/parallel.h).
#ifndef VOCABD_LIB_HEAD_SCORING_H_
#define VOCABD_LIB_HEAD_SCORING_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/status.h"

namespace vocabd {

// Ids per chunk (see above).
inline constexpr int64_t kScoreChunk = 16384;

struct RowScoreResult {
  float logsumexp = 0;
  float target_logprob = 0;  // valid when a target was given
  int64_t target_rank = 0;   // valid when a target was given (1-based; 0 = none)
  // (token id, logprob), best first. Size min(top_k, #ids with logit > -inf).
  std::vector<std::pair<int64_t, float>> top_k;
  // One logprob per candidate id given to ScoreRow, in its order.
  std::vector<float> candidate_logprobs;
};

// Adds bias[j] (when bias is not null: an lm_head.bias), then divides
// logits[0, vocab) by temperature (if != 1 and > 0), and sets ids >=
// vocab_limit (if 0 < vocab_limit < vocab) to -inf, in place. Division (not
// multiplication by 1/T) matches `logits / T` in PyTorch/NumPy.
void PrepareLogits(float* logits, int64_t vocab, float temperature, int64_t vocab_limit,
                   const float* bias = nullptr);

// The family's logit transform (ModelConfig::logit_transform), applied in
// float32 in transformers' order, after the bias and before temperature:
//   l = l * float(logit_scale)                     CohereForCausalLM.forward
//   l = l / float(logits_scaling)                  GraniteForCausalLM.forward
//   l = float(cap) * tanh(l / float(cap))          Gemma2ForCausalLM.forward
//                                                  (cap = final_logit_softcapping > 0)
struct LogitTransformValues {
  double logit_scale = 1.0;
  double logits_scaling = 1.0;
  double final_logit_softcapping = 0.0;
  bool identity() const {
    return logit_scale == 1.0 && logits_scaling == 1.0 && final_logit_softcapping == 0.0;
  }
};

// PrepareLogits with the family's transform between the bias and the
// temperature (`transform` may be null: none).
void PrepareLogits(float* logits, int64_t vocab, float temperature, int64_t vocab_limit,
                   const float* bias, const LogitTransformValues* transform);

// logsumexp of logits[0, vocab), accumulated in float64. -inf when every
// logit is -inf (or vocab <= 0), +inf if any logit is +inf, NaN if any is NaN.
double LogSumExp(const float* logits, int64_t vocab);

// In place: logits[j] = float(double(logits[j]) - logsumexp).
void LogSoftmaxInPlace(float* logits, int64_t vocab);

// The row scans (maximum, float64 sum of exponentials, rank counts, the
// top-k candidate scan) run AVX-512F code where the CPU has AVX-512F and
// portable C++ otherwise. Both give the same maxima, ranks and top-k ids and
// logprobs; the sums of exponentials differ by float64 rounding (the AVX-512
// exp is within a few ulp of std::exp, and it adds in 16 lanes).
enum class ScoringScans { kAvx512, kPortable };
// Whether this CPU has the AVX-512F scans.
bool ScoringScansAvx512Available();
// The scans every later call runs, process-wide (default: kAvx512 where
// available, else kPortable). FAILED_PRECONDITION for kAvx512 on a CPU
// without AVX-512F. For tests and benchmarks that compare the two; not to be
// changed while rows are being scored.
absl::Status SetScoringScans(ScoringScans scans);
ScoringScans CurrentScoringScans();

// Scores one prepared row in O(vocab + vocab * log(k) + candidates) time.
// target < 0 (or >= vocab) means no target: target_logprob and target_rank
// stay 0. top_k is clamped to [0, vocab]. `candidates` (may be null): ids
// whose logprobs are returned in candidate_logprobs; each must be in
// [0, vocab) (the caller validates; an id outside gives NaN).
RowScoreResult ScoreRow(const float* logits, int64_t vocab, int64_t target, int top_k,
                        const std::vector<int64_t>* candidates = nullptr);

}  // namespace vocabd

#endif  // VOCABD_LIB_HEAD_SCORING_H_
