#include "lib/head/scoring.h"

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <vector>


namespace vocabd {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

int64_t NumChunks(int64_t vocab) { return (vocab + kScoreChunk - 1) / kScoreChunk; }

int64_t ChunkBegin(int64_t c) { return c * kScoreChunk; }
int64_t ChunkEnd(int64_t c, int64_t vocab) { return std::min(vocab, (c + 1) * kScoreChunk); }

struct ChunkMax {
  float max = kNegInf;
  bool nan = false;
};

ChunkMax MaxOfScalar(const float* l, int64_t begin, int64_t end) {
  // A NaN never wins the comparison and is reported separately.
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

double SumExpScalar(const float* l, int64_t begin, int64_t end, double m) {
  double sum = 0.0;
  for (int64_t j = begin; j < end; ++j) sum += std::exp(static_cast<double>(l[j]) - m);
  return sum;
}

// AVX-512 float64 exp for x <= 0 (x = l - max): exp(x) = 2^k exp(r),
// k = round(x / ln 2), r = x - k ln 2 (two-part ln 2, |r| <= 0.347), exp(r)
// by its Taylor series to r^13 (truncation < 2e-16 relative), 2^k by vscalefpd
// (gradual underflow to 0; x is clamped at -746 so -inf gives 0). Within a
// few ulp of std::exp: far below the float32 logits' own rounding.
#pragma GCC push_options
#pragma GCC target("avx512f")
#if defined(__clang__)  // clang ignores GCC target pragmas
#pragma clang attribute push(__attribute__((target("avx512f"))), apply_to = function)
#endif
// (The maskz forms with a full mask are the plain instructions; the unmasked
// intrinsics trip GCC 12's -Wmaybe-uninitialized.)
constexpr __mmask8 kAll8 = 0xFF;

inline __m512d ExpNonPositive(__m512d x) {
  x = _mm512_maskz_max_pd(kAll8, x, _mm512_set1_pd(-746.0));
  const __m512d k =
      _mm512_maskz_roundscale_pd(kAll8, _mm512_mul_pd(x, _mm512_set1_pd(1.4426950408889634)),
                                 _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512d r = _mm512_fnmadd_pd(k, _mm512_set1_pd(6.93147180369123816490e-01), x);
  r = _mm512_fnmadd_pd(k, _mm512_set1_pd(1.90821492927058770002e-10), r);
  // Horner: 1 + r (1 + r/2 (1 + r/3 (... (1 + r/13))))
  __m512d p = _mm512_set1_pd(1.0 / 6227020800.0);  // 1/13!
  constexpr double kInvFact[13] = {1.0 / 479001600.0, 1.0 / 39916800.0, 1.0 / 3628800.0,
                                   1.0 / 362880.0,    1.0 / 40320.0,    1.0 / 5040.0,
                                   1.0 / 720.0,       1.0 / 120.0,      1.0 / 24.0,
                                   1.0 / 6.0,         1.0 / 2.0,        1.0,
                                   1.0};
  for (double c : kInvFact) p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(c));
  return _mm512_maskz_scalef_pd(kAll8, p, k);
}

double SumExpAvx512(const float* l, int64_t begin, int64_t end, double m) {
  const __m512d vm = _mm512_set1_pd(m);
  __m512d acc0 = _mm512_setzero_pd(), acc1 = _mm512_setzero_pd();
  int64_t j = begin;
  for (; j + 16 <= end; j += 16) {
    const __m512d a = _mm512_maskz_cvtps_pd(kAll8, _mm256_loadu_ps(l + j));
    const __m512d b = _mm512_maskz_cvtps_pd(kAll8, _mm256_loadu_ps(l + j + 8));
    acc0 = _mm512_add_pd(acc0, ExpNonPositive(_mm512_sub_pd(a, vm)));
    acc1 = _mm512_add_pd(acc1, ExpNonPositive(_mm512_sub_pd(b, vm)));
  }
  for (; j < end; j += 8) {
    // Lanes past `end` hold -inf: exp gives 0.
    alignas(32) float tail[8] = {kNegInf, kNegInf, kNegInf, kNegInf,
                                 kNegInf, kNegInf, kNegInf, kNegInf};
    for (int64_t i = 0; i < 8 && j + i < end; ++i) tail[i] = l[j + i];
    const __m512d v = _mm512_maskz_cvtps_pd(kAll8, _mm256_load_ps(tail));
    acc0 = _mm512_add_pd(acc0, ExpNonPositive(_mm512_sub_pd(v, vm)));
  }
  alignas(64) double lanes[8];
  _mm512_store_pd(lanes, _mm512_add_pd(acc0, acc1));
  double sum = 0.0;
  for (double v : lanes) sum += v;  // fixed order
  return sum;
}
// The maximum is exact in any order, so 16 lanes give the scalar result.
ChunkMax MaxOfAvx512(const float* l, int64_t begin, int64_t end) {
  constexpr __mmask16 kAll16 = 0xFFFF;
  __m512 m = _mm512_set1_ps(kNegInf);
  __mmask16 nan = 0;
  int64_t j = begin;
  for (; j + 16 <= end; j += 16) {
    const __m512 v = _mm512_loadu_ps(l + j);
    nan |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    m = _mm512_maskz_max_ps(kAll16, m, v);  // NaN lanes are flagged above
  }
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, m);
  ChunkMax tail = MaxOfScalar(l, j, end);
  for (float v : lanes) tail.max = v > tail.max ? v : tail.max;
  tail.nan = tail.nan || nan != 0;
  return tail;
}

// #{j in [begin, end): l[j] > t} and #{j in [begin, eq_end): l[j] == t}
// for a number t (ordered compares: a NaN lane counts in neither). Counts
// are exact in any order.
int64_t CountAheadAvx512(const float* l, int64_t begin, int64_t end, int64_t eq_end, float t) {
  const __m512 vt = _mm512_set1_ps(t);
  int64_t count = 0;
  int64_t j = begin;
  for (; j + 16 <= end; j += 16) {
    const __m512 v = _mm512_loadu_ps(l + j);
    count += __builtin_popcount(_mm512_cmp_ps_mask(v, vt, _CMP_GT_OQ));
    if (j + 16 <= eq_end) {
      count += __builtin_popcount(_mm512_cmp_ps_mask(v, vt, _CMP_EQ_OQ));
    } else if (j < eq_end) {
      const __mmask16 head = static_cast<__mmask16>((1u << (eq_end - j)) - 1u);
      count += __builtin_popcount(_mm512_mask_cmp_ps_mask(head, v, vt, _CMP_EQ_OQ));
    }
  }
  for (; j < end; ++j) count += (l[j] > t) + (j < eq_end && l[j] == t);
  return count;
}

// The first j in [begin, end) with l[j] > t (NaN never), else end.
int64_t NextAboveAvx512(const float* l, int64_t begin, int64_t end, float t) {
  const __m512 vt = _mm512_set1_ps(t);
  int64_t j = begin;
  for (; j + 16 <= end; j += 16) {
    const __mmask16 m = _mm512_cmp_ps_mask(_mm512_loadu_ps(l + j), vt, _CMP_GT_OQ);
    if (m != 0) return j + __builtin_ctz(m);
  }
  for (; j < end; ++j) {
    if (l[j] > t) return j;
  }
  return end;
}

#if defined(__clang__)
#pragma clang attribute pop
#endif
#pragma GCC pop_options

const bool kHaveAvx512 = [] {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") != 0;
}();
// The scans in use (SetScoringScans); read once per chunk.
std::atomic<bool> g_use_avx512{kHaveAvx512};
bool UseAvx512() { return g_use_avx512.load(std::memory_order_relaxed); }

ChunkMax MaxOf(const float* l, int64_t begin, int64_t end) {
  return UseAvx512() ? MaxOfAvx512(l, begin, end) : MaxOfScalar(l, begin, end);
}

// sum_j exp(l_j - m) in float64 over [begin, end); m >= every l_j, finite.
double SumExpOf(const float* l, int64_t begin, int64_t end, double m) {
  return UseAvx512() ? SumExpAvx512(l, begin, end, m) : SumExpScalar(l, begin, end, m);
}

// logsumexp given the row max `m` (finite): per-chunk float64 sums, added in
// chunk order.
double LseFromMax(const float* logits, int64_t vocab, double m) {
  double sum = 0.0;
  for (int64_t c = 0; c < NumChunks(vocab); ++c) {
    sum += SumExpOf(logits, ChunkBegin(c), ChunkEnd(c, vocab), m);
  }
  return m + std::log(sum);
}

// #{j in [begin, end), j != t : j ranks before t}: a higher logit, or an
// equal one (-inf included) and a lower id; NaN ranks after every number and
// NaNs among themselves by id.
int64_t AheadOf(const float* l, int64_t begin, int64_t end, int64_t t) {
  const float lt = l[t];
  int64_t ahead = 0;
  if (std::isnan(lt)) {
    // Every number is ahead of a NaN, and NaNs with lower ids.
    for (int64_t j = begin; j < end; ++j) ahead += l[j] == l[j];
    for (int64_t j = begin; j < std::min(end, t); ++j) ahead += l[j] != l[j];
    return ahead;
  }
  if (UseAvx512()) return CountAheadAvx512(l, begin, end, std::min(end, t), lt);
  for (int64_t j = begin; j < end; ++j) ahead += l[j] > lt;  // NaN: false
  for (int64_t j = begin; j < std::min(end, t); ++j) ahead += l[j] == lt;
  return ahead;
}

// The first j in [begin, end) with l[j] > t (NaN never), else end.
int64_t NextAbove(const float* l, int64_t begin, int64_t end, float t) {
  if (UseAvx512()) return NextAboveAvx512(l, begin, end, t);
  for (int64_t j = begin; j < end; ++j) {
    if (l[j] > t) return j;
  }
  return end;
}

// A candidate for top-k: a number logit (not NaN, not -inf) and its id.
struct Candidate {
  float logit;
  int64_t id;
};
// Best first: higher logit, then lower id.
inline bool Better(const Candidate& a, const Candidate& b) {
  return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
}

// Cuts `c` to its `keep` best (unordered, the worst of them last).
void CutTo(std::vector<Candidate>& c, size_t keep) {
  std::nth_element(c.begin(), c.begin() + static_cast<std::ptrdiff_t>(keep - 1), c.end(), Better);
  c.resize(keep);
}

// The k best ids of [begin, end) (never -inf or NaN), in no particular
// order, k >= 1; when there are k of them, the worst comes last.
//
// Buffered selection: ids better than the current threshold go into a buffer
// of up to 4k; a full buffer is cut back to its k best (nth_element) and the
// threshold becomes the k-th best logit. Ids arrive in increasing order, so
// a later id with a logit equal to the threshold never beats the kept k-th
// (the lower id wins ties): only strictly larger logits enter. O(n) compares
// plus O(k) per cut, for any k (a bounded heap costs O(log k) per
// replacement, which dominates at k = 1024).
std::vector<Candidate> TopKOf(const float* logits, int64_t begin, int64_t end, int64_t k) {
  const size_t keep = static_cast<size_t>(k);
  std::vector<Candidate> buf;
  buf.reserve(std::min<size_t>(4 * keep, static_cast<size_t>(end - begin)));
  float threshold = kNegInf;  // accept v > threshold (-inf: any number but -inf)
  for (int64_t j = NextAbove(logits, begin, end, threshold); j < end;
       j = NextAbove(logits, j + 1, end, threshold)) {
    const float v = logits[j];
    buf.push_back({v, j});
    if (buf.size() == 4 * keep) {
      CutTo(buf, keep);
      threshold = buf.back().logit;
    }
  }
  if (buf.size() >= keep) CutTo(buf, keep);
  return buf;
}

}  // namespace

bool ScoringScansAvx512Available() { return kHaveAvx512; }

absl::Status SetScoringScans(ScoringScans scans) {
  if (scans == ScoringScans::kAvx512 && !kHaveAvx512) {
    return absl::FailedPreconditionError(
        "scoring scans = avx512: this CPU has no AVX-512F (the portable scans run)");
  }
  g_use_avx512.store(scans == ScoringScans::kAvx512, std::memory_order_relaxed);
  return absl::OkStatus();
}

ScoringScans CurrentScoringScans() {
  return UseAvx512() ? ScoringScans::kAvx512 : ScoringScans::kPortable;
}

void PrepareLogits(float* logits, int64_t vocab, float temperature, int64_t vocab_limit,
                   const float* bias) {
  PrepareLogits(logits, vocab, temperature, vocab_limit, bias, nullptr);
}

void PrepareLogits(float* logits, int64_t vocab, float temperature, int64_t vocab_limit,
                   const float* bias, const LogitTransformValues* transform) {
  if (vocab <= 0) return;
  if (transform != nullptr && !transform->identity()) {
    const int64_t limit = vocab_limit > 0 && vocab_limit < vocab ? vocab_limit : vocab;
    if (bias != nullptr) {
      for (int64_t j = 0; j < limit; ++j) logits[j] += bias[j];
      bias = nullptr;
    }
    if (transform->logit_scale != 1.0) {
      const float s = static_cast<float>(transform->logit_scale);
      for (int64_t j = 0; j < limit; ++j) logits[j] *= s;
    }
    if (transform->logits_scaling != 1.0) {
      const float d = static_cast<float>(transform->logits_scaling);
      for (int64_t j = 0; j < limit; ++j) logits[j] /= d;
    }
    if (transform->final_logit_softcapping > 0.0) {
      const float cap = static_cast<float>(transform->final_logit_softcapping);
      for (int64_t j = 0; j < limit; ++j) logits[j] = std::tanh(logits[j] / cap) * cap;
    }
  }
  const bool temper = temperature > 0.0f && temperature != 1.0f;
  const int64_t limit = vocab_limit > 0 && vocab_limit < vocab ? vocab_limit : vocab;
  if (!temper && bias == nullptr && limit == vocab) return;
  if (bias != nullptr) {
    for (int64_t j = 0; j < limit; ++j) logits[j] += bias[j];
  }
  if (temper) {
    for (int64_t j = 0; j < limit; ++j) logits[j] /= temperature;
  }
  std::fill(logits + limit, logits + vocab, kNegInf);
}

double LogSumExp(const float* logits, int64_t vocab) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  if (vocab <= 0) return -kInf;
  const int64_t n = NumChunks(vocab);
  std::vector<ChunkMax> maxes(static_cast<size_t>(n));
  for (int64_t c = 0; c < n; ++c) maxes[c] = MaxOf(logits, ChunkBegin(c), ChunkEnd(c, vocab));
  const double m = CombineMax(maxes);
  if (std::isnan(m) || std::isinf(m)) return m;  // NaN, all -inf, or some +inf
  return LseFromMax(logits, vocab, m);
}

void LogSoftmaxInPlace(float* logits, int64_t vocab) {
  const double lse = LogSumExp(logits, vocab);
  for (int64_t j = 0; j < vocab; ++j) {
    logits[j] = static_cast<float>(static_cast<double>(logits[j]) - lse);
  }
}

RowScoreResult ScoreRow(const float* logits, int64_t vocab, int64_t target, int top_k,
                        const std::vector<int64_t>* candidates) {
  RowScoreResult result;
  if (vocab <= 0) return result;
  const bool has_target = target >= 0 && target < vocab;
  const int64_t k = std::clamp<int64_t>(top_k, 0, vocab);

  // Per chunk: max and NaN, ids ahead of the target (counts add up exactly).
  const int64_t n = NumChunks(vocab);
  std::vector<ChunkMax> maxes(static_cast<size_t>(n));
  int64_t ahead = 0;
  for (int64_t c = 0; c < n; ++c) {
    maxes[c] = MaxOf(logits, ChunkBegin(c), ChunkEnd(c, vocab));
    if (has_target) ahead += AheadOf(logits, ChunkBegin(c), ChunkEnd(c, vocab), target);
  }
  // The float64 sum of exp(l - max), per chunk, added in chunk order.
  double lse = CombineMax(maxes);
  if (!std::isnan(lse) && !std::isinf(lse)) lse = LseFromMax(logits, vocab, lse);
  result.logsumexp = static_cast<float>(lse);
  if (has_target) {
    result.target_logprob = static_cast<float>(static_cast<double>(logits[target]) - lse);
    result.target_rank = ahead + 1;
  }
  if (candidates != nullptr) {
    result.candidate_logprobs.reserve(candidates->size());
    for (int64_t c : *candidates) {
      result.candidate_logprobs.push_back(
          c >= 0 && c < vocab ? static_cast<float>(static_cast<double>(logits[c]) - lse)
                              : std::numeric_limits<float>::quiet_NaN());
    }
  }
  if (k == 0) return result;
  // One selection over the whole row (its threshold carries across chunk
  // boundaries); the k best ids under the strict order are unique.
  std::vector<Candidate> best = TopKOf(logits, 0, vocab, k);
  std::sort(best.begin(), best.end(), Better);
  result.top_k.reserve(best.size());
  for (const Candidate& c : best) {
    result.top_k.emplace_back(c.id, static_cast<float>(static_cast<double>(c.logit) - lse));
  }
  return result;
}

}  // namespace vocabd
