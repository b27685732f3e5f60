#include "lib/scoring.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace vocabd {
namespace {

// True when token a ranks before token b: higher logit, then lower id. NaN
// ranks after every number (including -inf), so this is a strict weak order.
inline bool Before(const float* l, int64_t a, int64_t b) {
  const bool a_nan = std::isnan(l[a]);
  const bool b_nan = std::isnan(l[b]);
  if (a_nan != b_nan) return b_nan;
  if (!a_nan && l[a] != l[b]) return l[a] > l[b];
  return a < b;
}

}  // namespace

void PrepareLogits(float* logits, int64_t vocab, float temperature, int64_t vocab_limit) {
  if (vocab <= 0) return;
  if (temperature > 0.0f && temperature != 1.0f) {
    for (int64_t j = 0; j < vocab; ++j) logits[j] /= temperature;
  }
  if (vocab_limit > 0 && vocab_limit < vocab) {
    std::fill(logits + vocab_limit, logits + vocab, -std::numeric_limits<float>::infinity());
  }
}

double LogSumExp(const float* logits, int64_t vocab) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  if (vocab <= 0) return -kInf;
  double m = -kInf;
  for (int64_t j = 0; j < vocab; ++j) {
    const double v = logits[j];
    if (std::isnan(v)) return std::numeric_limits<double>::quiet_NaN();
    if (v > m) m = v;
  }
  if (std::isinf(m)) return m;  // all -inf, or some +inf
  double sum = 0.0;
  for (int64_t j = 0; j < vocab; ++j) sum += std::exp(static_cast<double>(logits[j]) - m);
  return m + std::log(sum);
}

void LogSoftmaxInPlace(float* logits, int64_t vocab) {
  const double lse = LogSumExp(logits, vocab);
  for (int64_t j = 0; j < vocab; ++j) {
    logits[j] = static_cast<float>(static_cast<double>(logits[j]) - lse);
  }
}

RowScoreResult ScoreRow(const float* logits, int64_t vocab, int64_t target, int top_k) {
  RowScoreResult result;
  if (vocab <= 0) return result;
  const double lse = LogSumExp(logits, vocab);
  result.logsumexp = static_cast<float>(lse);

  if (target >= 0 && target < vocab) {
    result.target_logprob = static_cast<float>(static_cast<double>(logits[target]) - lse);
    int64_t ahead = 0;
    for (int64_t j = 0; j < vocab; ++j) {
      if (j != target && Before(logits, j, target)) ++ahead;
    }
    result.target_rank = ahead + 1;
  }

  const int64_t k = std::clamp<int64_t>(top_k, 0, vocab);
  if (k == 0) return result;
  // Bounded heap of the k best ids seen so far; the worst sits at the front
  // (a max-heap under "Before" keeps the element that ranks last on top).
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  auto cmp = [logits](int64_t a, int64_t b) { return Before(logits, a, b); };
  std::vector<int64_t> heap;
  heap.reserve(static_cast<size_t>(k));
  for (int64_t j = 0; j < vocab; ++j) {
    if (logits[j] == kNegInf || std::isnan(logits[j])) continue;  // zero probability
    if (static_cast<int64_t>(heap.size()) < k) {
      heap.push_back(j);
      std::push_heap(heap.begin(), heap.end(), cmp);
    } else if (Before(logits, j, heap.front())) {
      std::pop_heap(heap.begin(), heap.end(), cmp);
      heap.back() = j;
      std::push_heap(heap.begin(), heap.end(), cmp);
    }
  }
  std::sort_heap(heap.begin(), heap.end(), cmp);  // best first
  result.top_k.reserve(heap.size());
  for (int64_t id : heap) {
    result.top_k.emplace_back(id,
                              static_cast<float>(static_cast<double>(logits[id]) - lse));
  }
  return result;
}

}  // namespace vocabd
