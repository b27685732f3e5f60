// Scores computed from one row of logits (after temperature and masking).
//
//   logsumexp = m + log(sum_j exp(l_j - m)),  m = max_j l_j   (float64 sum)
//   logprob_j = l_j - logsumexp
//   rank(t)   = 1 + #{j : l_j > l_t} + #{j < t : l_j == l_t}
//   top_k     = k best (logprob desc, token id asc on ties)
#ifndef VOCABD_LIB_SCORING_H_
#define VOCABD_LIB_SCORING_H_

#include <cstdint>
#include <utility>
#include <vector>

namespace vocabd {

struct RowScoreResult {
  float logsumexp = 0;
  float target_logprob = 0;  // valid when a target was given
  int64_t target_rank = 0;   // valid when a target was given
  std::vector<std::pair<int64_t, float>> top_k;  // (token id, logprob)
};

// Divides logits[0, vocab) by temperature (if != 1) and sets ids >=
// vocab_limit (if 0 < vocab_limit < vocab) to -inf, in place.
void PrepareLogits(float* logits, int64_t vocab, float temperature, int64_t vocab_limit);

// logsumexp of logits[0, vocab), accumulated in float64.
double LogSumExp(const float* logits, int64_t vocab);

// In place: logits[j] -= logsumexp.
void LogSoftmaxInPlace(float* logits, int64_t vocab);

// Scores one prepared row. target < 0 means no target. top_k in [0, vocab].
RowScoreResult ScoreRow(const float* logits, int64_t vocab, int64_t target, int top_k);

}  // namespace vocabd

#endif  // VOCABD_LIB_SCORING_H_
