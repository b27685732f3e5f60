#include "lib/scoring.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "lib/parallel.h"

namespace vocabd {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

int64_t NumChunks(int64_t vocab) { return (vocab + kScoreChunk - 1) / kScoreChunk; }
int64_t ChunkBegin(int64_t c) { return c * kScoreChunk; }
int64_t ChunkEnd(int64_t c, int64_t vocab) { return std::min(vocab, (c + 1) * kScoreChunk); }

// True when token a ranks before token b: higher logit, then lower id. NaN
// ranks after every number (including -inf), so this is a strict weak order.
inline bool Before(const float* l, int64_t a, int64_t b) {
  const bool a_nan = std::isnan(l[a]);
  const bool b_nan = std::isnan(l[b]);
  if (a_nan != b_nan) return b_nan;
  if (!a_nan && l[a] != l[b]) return l[a] > l[b];
  return a < b;
}

struct ChunkMax {
  float max = kNegInf;
  bool nan = false;
};

ChunkMax MaxOf(const float* l, int64_t begin, int64_t end) {
  // Branch-free so that the compiler vectorises it; a NaN never wins the
  // comparison and is reported separately.
  float m = kNegInf;
  bool nan = false;
  for (int64_t j = begin; j < end; ++j) {
    const float v = l[j];
    nan |= v != v;
    m = v > m ? v : m;
  }
  return {m, nan};
}

// The row maximum from per-chunk results; NaN if any chunk saw one.
double CombineMax(const std::vector<ChunkMax>& chunks) {
  double m = -std::numeric_limits<double>::infinity();
  for (const ChunkMax& c : chunks) {
    if (c.nan) return std::numeric_limits<double>::quiet_NaN();
    m = std::max<double>(m, c.max);
  }
  return m;
}

double SumExpOf(const float* l, int64_t begin, int64_t end, double m) {
  double sum = 0.0;
  for (int64_t j = begin; j < end; ++j) sum += std::exp(static_cast<double>(l[j]) - m);
  return sum;
}

// logsumexp given the row max `m` (finite): per-chunk float64 sums, added in
// chunk order.
double LseFromMax(const float* logits, int64_t vocab, double m) {
  const int64_t n = NumChunks(vocab);
  std::vector<double> sums(static_cast<size_t>(n));
  ParallelFor(n, [&](int64_t c) {
    sums[c] = SumExpOf(logits, ChunkBegin(c), ChunkEnd(c, vocab), m);
  });
  double sum = 0.0;
  for (double s : sums) sum += s;
  return m + std::log(sum);
}

// #{j in [begin, end), j != t : Before(j, t)}.
int64_t AheadOf(const float* l, int64_t begin, int64_t end, int64_t t) {
  const float lt = l[t];
  int64_t ahead = 0;
  if (std::isnan(lt)) {
    // Every number is ahead of a NaN, and NaNs with lower ids.
    for (int64_t j = begin; j < end; ++j) ahead += l[j] == l[j];
    for (int64_t j = begin; j < std::min(end, t); ++j) ahead += l[j] != l[j];
    return ahead;
  }
  for (int64_t j = begin; j < end; ++j) ahead += l[j] > lt;  // NaN: false
  for (int64_t j = begin; j < std::min(end, t); ++j) ahead += l[j] == lt;
  return ahead;
}

// The k best ids of [begin, end) (never -inf or NaN), best first.
std::vector<int64_t> TopKOf(const float* logits, int64_t begin, int64_t end, int64_t k) {
  // Bounded heap of the k best ids seen so far; the worst sits at the front
  // (a max-heap under "Before" keeps the element that ranks last on top).
  auto cmp = [logits](int64_t a, int64_t b) { return Before(logits, a, b); };
  std::vector<int64_t> heap;
  heap.reserve(static_cast<size_t>(std::min(k, end - begin)));
  for (int64_t j = begin; j < end; ++j) {
    const float v = logits[j];
    if (v == kNegInf || v != v) continue;  // zero probability
    if (static_cast<int64_t>(heap.size()) < k) {
      heap.push_back(j);
      std::push_heap(heap.begin(), heap.end(), cmp);
    } else if (v > logits[heap.front()]) {
      // Ids arrive in increasing order, so an equal logit never beats the
      // heap's worst (the lower id wins ties): only a larger one does.
      std::pop_heap(heap.begin(), heap.end(), cmp);
      heap.back() = j;
      std::push_heap(heap.begin(), heap.end(), cmp);
    }
  }
  std::sort_heap(heap.begin(), heap.end(), cmp);  // best first
  return heap;
}

}  // namespace

void PrepareLogits(float* logits, int64_t vocab, float temperature, int64_t vocab_limit,
                   const float* bias) {
  if (vocab <= 0) return;
  const bool temper = temperature > 0.0f && temperature != 1.0f;
  const int64_t limit = vocab_limit > 0 && vocab_limit < vocab ? vocab_limit : vocab;
  if (!temper && bias == nullptr && limit == vocab) return;
  ParallelFor(NumChunks(vocab), [&](int64_t c) {
    const int64_t begin = ChunkBegin(c);
    const int64_t end = ChunkEnd(c, vocab);
    const int64_t keep = std::clamp(limit, begin, end);
    if (bias != nullptr) {
      for (int64_t j = begin; j < keep; ++j) logits[j] += bias[j];
    }
    if (temper) {
      for (int64_t j = begin; j < keep; ++j) logits[j] /= temperature;
    }
    std::fill(logits + keep, logits + end, kNegInf);
  });
}

double LogSumExp(const float* logits, int64_t vocab) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  if (vocab <= 0) return -kInf;
  const int64_t n = NumChunks(vocab);
  std::vector<ChunkMax> maxes(static_cast<size_t>(n));
  ParallelFor(n, [&](int64_t c) { maxes[c] = MaxOf(logits, ChunkBegin(c), ChunkEnd(c, vocab)); });
  const double m = CombineMax(maxes);
  if (std::isnan(m) || std::isinf(m)) return m;  // NaN, all -inf, or some +inf
  return LseFromMax(logits, vocab, m);
}

void LogSoftmaxInPlace(float* logits, int64_t vocab) {
  const double lse = LogSumExp(logits, vocab);
  ParallelFor(NumChunks(vocab), [&](int64_t c) {
    const int64_t end = ChunkEnd(c, vocab);
    for (int64_t j = ChunkBegin(c); j < end; ++j) {
      logits[j] = static_cast<float>(static_cast<double>(logits[j]) - lse);
    }
  });
}

RowScoreResult ScoreRow(const float* logits, int64_t vocab, int64_t target, int top_k) {
  RowScoreResult result;
  if (vocab <= 0) return result;
  const bool has_target = target >= 0 && target < vocab;
  const int64_t k = std::clamp<int64_t>(top_k, 0, vocab);

  // Pass 1, per chunk: max and NaN, ids ahead of the target, the chunk's
  // top k. Every global top-k id is in its chunk's top k, and every count is
  // a sum over chunks, so the merged results are exact.
  const int64_t n = NumChunks(vocab);
  std::vector<ChunkMax> maxes(static_cast<size_t>(n));
  std::vector<int64_t> ahead(static_cast<size_t>(n), 0);
  std::vector<std::vector<int64_t>> tops(static_cast<size_t>(n));
  ParallelFor(n, [&](int64_t c) {
    const int64_t begin = ChunkBegin(c);
    const int64_t end = ChunkEnd(c, vocab);
    maxes[c] = MaxOf(logits, begin, end);
    if (has_target) ahead[c] = AheadOf(logits, begin, end, target);
    if (k > 0) tops[c] = TopKOf(logits, begin, end, k);
  });

  // Pass 2: the float64 sum of exp(l - max), per chunk, added in chunk order.
  double lse = CombineMax(maxes);
  if (!std::isnan(lse) && !std::isinf(lse)) lse = LseFromMax(logits, vocab, lse);
  result.logsumexp = static_cast<float>(lse);

  if (has_target) {
    result.target_logprob = static_cast<float>(static_cast<double>(logits[target]) - lse);
    int64_t total = 0;
    for (int64_t a : ahead) total += a;
    result.target_rank = total + 1;
  }
  if (k == 0) return result;
  std::vector<int64_t> merged;
  for (const std::vector<int64_t>& t : tops) merged.insert(merged.end(), t.begin(), t.end());
  const auto cmp = [logits](int64_t a, int64_t b) { return Before(logits, a, b); };
  const size_t keep = std::min(merged.size(), static_cast<size_t>(k));
  std::partial_sort(merged.begin(), merged.begin() + static_cast<std::ptrdiff_t>(keep),
                    merged.end(), cmp);
  result.top_k.reserve(keep);
  for (size_t i = 0; i < keep; ++i) {
    const int64_t id = merged[i];
    result.top_k.emplace_back(id, static_cast<float>(static_cast<double>(logits[id]) - lse));
  }
  return result;
}

}  // namespace vocabd
