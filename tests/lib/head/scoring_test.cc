// Scoring (logsumexp, log-softmax, rank, top-k, temperature, vocab mask)
// against tests/golden/head_golden.json (tests/golden/make_head_golden.py)
// and hand-made rows for the tie rule.
#include "lib/head/scoring.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include "absl/status/status.h"
#include <nlohmann/json.hpp>

#include "tests/test_util.h"

namespace vocabd {
namespace {

using ::vocabd::testing::ReadGolden;
using ::vocabd::testing::ToDoubles;
using ::vocabd::testing::ToFloats;

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr double kTol = 1e-4;

// Every test below runs on each scan path of scoring.h: the AVX-512 scans
// (skipped, saying so, on a CPU without AVX-512F) and the portable ones.
class ScanPathTest : public ::testing::TestWithParam<ScoringScans> {
 protected:
  void SetUp() override {
    if (GetParam() == ScoringScans::kAvx512 && !ScoringScansAvx512Available()) {
      GTEST_SKIP() << "this CPU has no AVX-512F: the AVX-512 scoring scans did not run";
    }
    previous_ = CurrentScoringScans();
    ASSERT_TRUE(SetScoringScans(GetParam()).ok());
    ASSERT_EQ(CurrentScoringScans(), GetParam());
  }
  void TearDown() override { ASSERT_TRUE(SetScoringScans(previous_).ok()); }

 private:
  ScoringScans previous_ = ScoringScans::kPortable;
};

std::string ScansName(const ::testing::TestParamInfo<ScoringScans>& info) {
  return info.param == ScoringScans::kAvx512 ? "avx512" : "portable";
}
#define VOCABD_ON_EVERY_SCAN_PATH(suite)                                            \
  INSTANTIATE_TEST_SUITE_P(Scans, suite,                                            \
                           ::testing::Values(ScoringScans::kAvx512, ScoringScans::kPortable), \
                           ScansName)

TEST(ScoringScansTest, PortableAlwaysAndAvx512OnlyWithAvx512F) {
  const ScoringScans previous = CurrentScoringScans();
  EXPECT_EQ(previous, ScoringScansAvx512Available() ? ScoringScans::kAvx512
                                                    : ScoringScans::kPortable);
  ASSERT_TRUE(SetScoringScans(ScoringScans::kPortable).ok());
  EXPECT_EQ(CurrentScoringScans(), ScoringScans::kPortable);
  const absl::Status avx512 = SetScoringScans(ScoringScans::kAvx512);
  if (ScoringScansAvx512Available()) {
    EXPECT_TRUE(avx512.ok()) << avx512;
    EXPECT_EQ(CurrentScoringScans(), ScoringScans::kAvx512);
  } else {
    EXPECT_EQ(avx512.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_NE(avx512.message().find("AVX-512F"), std::string::npos) << avx512;
    EXPECT_EQ(CurrentScoringScans(), ScoringScans::kPortable);
  }
  ASSERT_TRUE(SetScoringScans(previous).ok());
}

class ScoringGoldenTest : public ScanPathTest {
 protected:
  void SetUp() override {
    ScanPathTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    golden_ = ReadGolden("head_golden.json");
    vocab_ = golden_.at("vocab_size").get<int64_t>();
    for (const auto& row : golden_.at("logits")) logits_.push_back(ToFloats(row));
    ASSERT_EQ(logits_.size(), 5u);
    targets_ = golden_.at("target_ids").get<std::vector<int64_t>>();
  }

  // Scores every golden row (after PrepareLogits) and compares with `want`.
  void CheckScores(const nlohmann::json& want, float temperature, int64_t vocab_limit) {
    const int k = golden_.at("top_k").get<int>();
    for (size_t r = 0; r < logits_.size(); ++r) {
      SCOPED_TRACE("row " + std::to_string(r));
      std::vector<float> l = logits_[r];
      PrepareLogits(l.data(), vocab_, temperature, vocab_limit);
      const RowScoreResult got = ScoreRow(l.data(), vocab_, targets_[r], k);
      const nlohmann::json& w = want.at(r);
      ASSERT_EQ(w.at("target_id").get<int64_t>(), targets_[r]);
      EXPECT_NEAR(got.logsumexp, w.at("logsumexp").get<double>(), kTol);
      EXPECT_NEAR(got.target_logprob, w.at("target_logprob").get<double>(), kTol);
      EXPECT_EQ(got.target_rank, w.at("target_rank").get<int64_t>());
      ASSERT_EQ(got.top_k.size(), w.at("top_k").size());
      for (size_t i = 0; i < got.top_k.size(); ++i) {
        EXPECT_EQ(got.top_k[i].first, w.at("top_k")[i][0].get<int64_t>()) << "top " << i;
        EXPECT_NEAR(got.top_k[i].second, w.at("top_k")[i][1].get<double>(), kTol) << "top " << i;
      }
    }
  }

  nlohmann::json golden_;
  int64_t vocab_ = 0;
  std::vector<std::vector<float>> logits_;
  std::vector<int64_t> targets_;
};

TEST_P(ScoringGoldenTest, LogSumExpAndLogSoftmax) {
  const std::vector<double> lse = ToDoubles(golden_.at("logsumexp"));
  for (size_t r = 0; r < logits_.size(); ++r) {
    EXPECT_NEAR(LogSumExp(logits_[r].data(), vocab_), lse[r], kTol) << "row " << r;
    std::vector<float> l = logits_[r];
    LogSoftmaxInPlace(l.data(), vocab_);
    const std::vector<double> want = ToDoubles(golden_.at("log_softmax")[r]);
    for (int64_t j = 0; j < vocab_; ++j) {
      ASSERT_NEAR(l[j], want[j], kTol) << "row " << r << " id " << j;
    }
    // Probabilities sum to 1.
    double sum = 0;
    for (float v : l) sum += std::exp(static_cast<double>(v));
    EXPECT_NEAR(sum, 1.0, 1e-5);
  }
}

TEST_P(ScoringGoldenTest, ScoresMatchGolden) { CheckScores(golden_.at("scores"), 1.0f, 0); }

TEST_P(ScoringGoldenTest, TemperatureMatchesGolden) {
  CheckScores(golden_.at("scores_temperature"), golden_.at("temperature").get<float>(), 0);
}

TEST_P(ScoringGoldenTest, VocabLimitMatchesGolden) {
  CheckScores(golden_.at("scores_vocab_limit"), 1.0f, golden_.at("vocab_limit").get<int64_t>());
}

TEST_P(ScoringGoldenTest, MaskedIdsNeverInTopKAndScoreMinusInf) {
  const int64_t limit = golden_.at("vocab_limit").get<int64_t>();
  std::vector<float> l = logits_[3];
  PrepareLogits(l.data(), vocab_, 1.0f, limit);
  for (int64_t j = limit; j < vocab_; ++j) ASSERT_EQ(l[j], kNegInf) << j;
  for (int64_t j = 0; j < limit; ++j) ASSERT_EQ(l[j], logits_[3][j]) << j;
  const RowScoreResult all = ScoreRow(l.data(), vocab_, /*target=*/511, static_cast<int>(vocab_));
  ASSERT_EQ(all.top_k.size(), static_cast<size_t>(limit));
  for (const auto& [id, lp] : all.top_k) {
    EXPECT_LT(id, limit);
    EXPECT_TRUE(std::isfinite(lp));
  }
  EXPECT_EQ(all.target_logprob, kNegInf);
  EXPECT_GT(all.target_rank, limit);  // behind every unmasked id
  // Masked ids rank among themselves by id: 511 is the last of all.
  EXPECT_EQ(all.target_rank, vocab_);
}

TEST_P(ScoringGoldenTest, TopKZeroAndVocab) {
  const std::vector<float>& l = logits_[1];
  const RowScoreResult none = ScoreRow(l.data(), vocab_, -1, 0);
  EXPECT_TRUE(none.top_k.empty());
  EXPECT_EQ(none.target_rank, 0);  // no target
  EXPECT_NEAR(none.logsumexp, golden_.at("logsumexp")[1].get<double>(), kTol);

  const RowScoreResult full = ScoreRow(l.data(), vocab_, -1, static_cast<int>(vocab_));
  ASSERT_EQ(full.top_k.size(), static_cast<size_t>(vocab_));
  std::vector<int64_t> order(vocab_);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return l[a] > l[b]; });
  for (int64_t i = 0; i < vocab_; ++i) {
    ASSERT_EQ(full.top_k[i].first, order[i]) << "position " << i;
    ASSERT_NEAR(full.top_k[i].second, golden_.at("log_softmax")[1][order[i]].get<double>(), kTol);
  }
  // k > vocab clamps.
  EXPECT_EQ(ScoreRow(l.data(), vocab_, -1, 100000).top_k.size(), static_cast<size_t>(vocab_));
  EXPECT_TRUE(ScoreRow(l.data(), vocab_, -1, -5).top_k.empty());
}

class ScoringTest : public ScanPathTest {};

TEST_P(ScoringTest, TieRuleLowerIdFirst) {
  //                 id: 0     1     2     3     4     5
  const std::vector<float> l = {1.0f, 3.0f, 3.0f, 2.0f, 3.0f, kNegInf};
  const int64_t v = static_cast<int64_t>(l.size());
  const RowScoreResult top3 = ScoreRow(l.data(), v, 4, 3);
  ASSERT_EQ(top3.top_k.size(), 3u);
  EXPECT_EQ(top3.top_k[0].first, 1);
  EXPECT_EQ(top3.top_k[1].first, 2);
  EXPECT_EQ(top3.top_k[2].first, 4);
  EXPECT_EQ(top3.target_rank, 3);
  EXPECT_EQ(ScoreRow(l.data(), v, 1, 0).target_rank, 1);
  EXPECT_EQ(ScoreRow(l.data(), v, 2, 0).target_rank, 2);
  EXPECT_EQ(ScoreRow(l.data(), v, 3, 0).target_rank, 4);
  EXPECT_EQ(ScoreRow(l.data(), v, 0, 0).target_rank, 5);
  EXPECT_EQ(ScoreRow(l.data(), v, 5, 0).target_rank, 6);
  // Exact values: lse = log(e + 3 e^3 + e^2).
  const double lse = std::log(std::exp(1.0) + 3 * std::exp(3.0) + std::exp(2.0));
  EXPECT_NEAR(top3.logsumexp, lse, 1e-6);
  EXPECT_NEAR(top3.target_logprob, 3.0 - lse, 1e-6);
  EXPECT_NEAR(top3.top_k[0].second, 3.0 - lse, 1e-6);
  // k = 2 cuts inside the tie: ids 1 and 2, never 4.
  const RowScoreResult top2 = ScoreRow(l.data(), v, -1, 2);
  ASSERT_EQ(top2.top_k.size(), 2u);
  EXPECT_EQ(top2.top_k[0].first, 1);
  EXPECT_EQ(top2.top_k[1].first, 2);
  // k = vocab: the -inf id is left out.
  EXPECT_EQ(ScoreRow(l.data(), v, -1, 6).top_k.size(), 5u);
}

// The bounded-heap top-k against a full stable sort on rows with many ties.
TEST_P(ScoringTest, TopKMatchesFullSortWithTies) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> level(-20, 20);
  for (int trial = 0; trial < 20; ++trial) {
    const int64_t v = 1000 + trial;
    std::vector<float> l(v);
    for (float& x : l) x = 0.25f * static_cast<float>(level(rng));
    std::vector<int64_t> order(v);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return l[a] > l[b]; });
    for (int k : {1, 2, 17, 100, 999}) {
      const RowScoreResult got = ScoreRow(l.data(), v, order[k - 1], k);
      ASSERT_EQ(got.top_k.size(), static_cast<size_t>(k));
      for (int i = 0; i < k; ++i) {
        ASSERT_EQ(got.top_k[i].first, order[i]) << "trial " << trial << " k " << k << " i " << i;
      }
      EXPECT_EQ(got.target_rank, k);  // rank agrees with the top-k order
    }
  }
}

// Every target id of a row with few distinct values (ties at every lane
// offset of the 16-wide compares, -inf among them): the rank is
// 1 + #higher + #equal with a lower id, counted serially here.
TEST_P(ScoringTest, RankOfEveryTargetInATiedRow) {
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> level(0, 4);
  const int64_t v = 16 * 40 + 7;
  std::vector<float> l(v);
  for (float& x : l) x = static_cast<float>(level(rng));
  l[3] = kNegInf;
  l[100] = kNegInf;
  for (int64_t t = 0; t < v; ++t) {
    int64_t ahead = 0;
    for (int64_t j = 0; j < v; ++j) ahead += l[j] > l[t] || (l[j] == l[t] && j < t);
    ASSERT_EQ(ScoreRow(l.data(), v, t, 3).target_rank, ahead + 1) << "target " << t;
  }
}

TEST_P(ScoringTest, TemperatureDividesAndOneIsIdentity) {
  std::vector<float> l = {1.0f, -2.5f, 0.7f, 10.0f};
  const std::vector<float> orig = l;
  PrepareLogits(l.data(), 4, 1.0f, 0);
  EXPECT_EQ(l, orig);
  PrepareLogits(l.data(), 4, 0.7f, 0);
  for (size_t j = 0; j < l.size(); ++j) EXPECT_EQ(l[j], orig[j] / 0.7f);
  // vocab_limit >= vocab or 0 masks nothing.
  l = orig;
  PrepareLogits(l.data(), 4, 1.0f, 4);
  PrepareLogits(l.data(), 4, 1.0f, 0);
  EXPECT_EQ(l, orig);
  PrepareLogits(l.data(), 4, 1.0f, 1);
  EXPECT_EQ(l[0], 1.0f);
  EXPECT_EQ(l[1], kNegInf);
  EXPECT_EQ(l[3], kNegInf);
}

TEST_P(ScoringTest, LogSumExpIsStableAndFloat64) {
  // Large logits do not overflow.
  const std::vector<float> big = {1000.0f, 1000.0f};
  EXPECT_NEAR(LogSumExp(big.data(), 2), 1000.0 + std::log(2.0), 1e-9);
  // 2^20 zeros: a float32 running sum would drift; float64 is exact here.
  const std::vector<float> zeros(1 << 20, 0.0f);
  EXPECT_NEAR(LogSumExp(zeros.data(), static_cast<int64_t>(zeros.size())), 20 * std::log(2.0),
              1e-12);
  // Many small terms next to one big one: a float32 sum drops every e^-20
  // (error 2e-3); the float64 sum keeps them (rounding ~1e-10 over 2^20 adds).
  std::vector<float> mixed(1 << 20, -20.0f);
  mixed[0] = 0.0f;
  const double want = std::log1p(static_cast<double>((1 << 20) - 1) * std::exp(-20.0));
  EXPECT_NEAR(LogSumExp(mixed.data(), static_cast<int64_t>(mixed.size())), want, 1e-9);
  // Edge cases.
  const std::vector<float> masked = {kNegInf, kNegInf};
  EXPECT_EQ(LogSumExp(masked.data(), 2), -std::numeric_limits<double>::infinity());
  EXPECT_EQ(LogSumExp(nullptr, 0), -std::numeric_limits<double>::infinity());
  const std::vector<float> with_nan = {1.0f, std::nanf("")};
  EXPECT_TRUE(std::isnan(LogSumExp(with_nan.data(), 2)));
}

// The vectorised float64 exp behind logsumexp, across its range: rows
// {0, x, x, ..., x} have logsumexp = log(1 + n e^x). With n e^x >= 1 the
// result carries the relative error of e^x about one-for-one (bound here:
// float64 summation of 40,000 terms, 2e-13); for very negative x (tiny,
// denormal and zero e^x) the result is within the rounding of the sums near
// 1 (about 1e-16 per term). Tails of every length (n + 1 not a multiple of 8
// or 16) included.
TEST_P(ScoringTest, LogSumExpAccurateAcrossTheExpRange) {
  for (const float x : {-1e-3f, -0.25f, -0.3466f, -1.0f, -5.5f, -10.0f}) {
    const int64_t n = 40000;
    std::vector<float> l(static_cast<size_t>(n + 1), x);
    l[0] = 0.0f;
    const long double want = ::log1pl(static_cast<long double>(n) * ::expl(x));
    EXPECT_NEAR(LogSumExp(l.data(), n + 1), static_cast<double>(want),
                2e-13 * static_cast<double>(want))
        << "x " << x;
  }
  for (const float x : {-20.0f, -87.0f, -100.0f, -700.0f, -708.5f, -740.0f, -745.5f, -800.0f}) {
    for (const int64_t n : {int64_t{1}, int64_t{7}, int64_t{16}, int64_t{4095}}) {
      std::vector<float> l(static_cast<size_t>(n + 1), x);
      l[0] = 0.0f;
      const long double want = ::log1pl(static_cast<long double>(n) * ::expl(x));
      EXPECT_NEAR(LogSumExp(l.data(), n + 1), static_cast<double>(want),
                  1.2e-16 * static_cast<double>(n + 1))
          << "x " << x << " n " << n;
    }
  }
}

TEST_P(ScoringTest, NanLogitsRankLastAndStayOutOfTopK) {
  const std::vector<float> l = {std::nanf(""), kNegInf, 0.0f};
  const RowScoreResult r = ScoreRow(l.data(), 3, 0, 3);
  EXPECT_EQ(r.target_rank, 3);
  ASSERT_EQ(r.top_k.size(), 1u);
  EXPECT_EQ(r.top_k[0].first, 2);
  EXPECT_EQ(ScoreRow(l.data(), 3, 1, 0).target_rank, 2);
}

// ---------------------------------------------------------------------------
// Rows longer than one chunk (kScoreChunk ids): per-chunk results merged
// across the pool must equal a plain serial computation exactly (top-k ids,
// ranks, masking) or to float64 rounding (logsumexp).

// A row of 3 chunks and a partial fourth, with many ties (quarter steps) and
// the best value repeated on both sides of chunk boundaries.
std::vector<float> ChunkedRow() {
  const int64_t v = 3 * kScoreChunk + 777;
  std::mt19937 rng(99);
  std::uniform_int_distribution<int> level(-40, 8);
  std::vector<float> l(static_cast<size_t>(v));
  for (float& x : l) x = 0.25f * static_cast<float>(level(rng));
  for (int64_t id : {kScoreChunk - 1, kScoreChunk, 2 * kScoreChunk + 5, v - 1}) l[id] = 9.0f;
  l[2 * kScoreChunk - 1] = 8.75f;
  l[2 * kScoreChunk] = 8.75f;
  return l;
}

// The reference order: logit descending, id ascending (no NaN here).
std::vector<int64_t> SerialOrder(const std::vector<float>& l) {
  std::vector<int64_t> order(l.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return l[a] > l[b]; });
  return order;
}

long double SerialLse(const std::vector<float>& l) {
  float m = kNegInf;
  for (float x : l) m = std::max(m, x);
  long double sum = 0;
  for (float x : l) sum += std::exp(static_cast<long double>(x) - m);
  return m + std::log(sum);
}

class ScoringChunkTest : public ScanPathTest {};

TEST_P(ScoringChunkTest, TopKRankAndLogSumExpExactAcrossChunkBoundaries) {
  const std::vector<float> l = ChunkedRow();
  const int64_t v = static_cast<int64_t>(l.size());
  ASSERT_GT(v, 3 * kScoreChunk);
  const std::vector<int64_t> order = SerialOrder(l);
  std::vector<int64_t> rank_of(l.size());
  for (int64_t i = 0; i < v; ++i) rank_of[order[i]] = i + 1;
  const long double lse = SerialLse(l);
  EXPECT_NEAR(LogSumExp(l.data(), v), static_cast<double>(lse), 1e-12);

  const std::vector<int64_t> targets = {0, kScoreChunk - 1, kScoreChunk, kScoreChunk + 1,
                                        2 * kScoreChunk - 1, 2 * kScoreChunk, 3 * kScoreChunk,
                                        v - 1, 12345, 40000};
  for (int k : {1, 2, 3, 5, 100, 1024}) {
    for (int64_t t : targets) {
      const RowScoreResult got = ScoreRow(l.data(), v, t, k);
      ASSERT_EQ(got.top_k.size(), static_cast<size_t>(k));
      for (int i = 0; i < k; ++i) {
        ASSERT_EQ(got.top_k[i].first, order[i]) << "k " << k << " position " << i;
        ASSERT_EQ(got.top_k[i].second,
                  static_cast<float>(static_cast<double>(l[order[i]]) - static_cast<double>(lse)))
            << "k " << k << " position " << i;
      }
      EXPECT_EQ(got.target_rank, rank_of[t]) << "target " << t;
      EXPECT_NEAR(got.target_logprob, static_cast<double>(l[t] - lse), 1e-6) << "target " << t;
      EXPECT_NEAR(got.logsumexp, static_cast<double>(lse), 1e-6);
    }
  }
  // The boundary ties: ids kScoreChunk-1 and kScoreChunk share the best value
  // and come first, in id order; then 2*kScoreChunk+5, then v-1.
  const RowScoreResult top4 = ScoreRow(l.data(), v, -1, 4);
  EXPECT_EQ(top4.top_k[0].first, kScoreChunk - 1);
  EXPECT_EQ(top4.top_k[1].first, kScoreChunk);
  EXPECT_EQ(top4.top_k[2].first, 2 * kScoreChunk + 5);
  EXPECT_EQ(top4.top_k[3].first, v - 1);
}

TEST_P(ScoringChunkTest, MaskingTemperatureAndBiasAcrossChunksMatchSerial) {
  const std::vector<float> orig = ChunkedRow();
  const int64_t v = static_cast<int64_t>(orig.size());
  std::vector<float> bias(orig.size());
  for (size_t j = 0; j < bias.size(); ++j) bias[j] = 0.001f * static_cast<float>(j % 7);
  for (int64_t limit : {kScoreChunk + 3, 2 * kScoreChunk, v - 1}) {
    std::vector<float> l = orig;
    PrepareLogits(l.data(), v, 0.7f, limit, bias.data());
    for (int64_t j = 0; j < v; ++j) {
      if (j < limit) {
        ASSERT_EQ(l[j], (orig[j] + bias[j]) / 0.7f) << j;
      } else {
        ASSERT_EQ(l[j], kNegInf) << j;
      }
    }
    // Masked ids never reach top-k; k = 1024 over the unmasked ids only.
    const RowScoreResult r = ScoreRow(l.data(), v, limit - 1, 1024);
    ASSERT_EQ(r.top_k.size(), 1024u);
    for (const auto& [id, lp] : r.top_k) ASSERT_LT(id, limit);
    const std::vector<int64_t> order = SerialOrder(l);
    for (int i = 0; i < 1024; ++i) ASSERT_EQ(r.top_k[i].first, order[i]) << i;
    // A masked target ranks behind every unmasked id, among masked by id.
    if (limit < v) {
      EXPECT_EQ(ScoreRow(l.data(), v, v - 1, 0).target_rank, v);
      EXPECT_EQ(ScoreRow(l.data(), v, limit, 0).target_rank, limit + 1);
    }
  }
}

TEST_P(ScoringChunkTest, NonFiniteValuesInLaterChunks) {
  std::vector<float> l = ChunkedRow();
  const int64_t v = static_cast<int64_t>(l.size());
  // All -inf: lse -inf and empty top-k, in every chunk.
  std::vector<float> masked(l.size(), kNegInf);
  EXPECT_EQ(LogSumExp(masked.data(), v), -std::numeric_limits<double>::infinity());
  EXPECT_TRUE(ScoreRow(masked.data(), v, -1, 10).top_k.empty());
  EXPECT_EQ(ScoreRow(masked.data(), v, 3 * kScoreChunk, 0).target_rank, 3 * kScoreChunk + 1);
  // +inf in the last chunk wins logsumexp.
  l[v - 2] = std::numeric_limits<float>::infinity();
  EXPECT_EQ(LogSumExp(l.data(), v), std::numeric_limits<double>::infinity());
  // A NaN in chunk 2: logsumexp NaN, the NaN ranks after every number and
  // after NaNs with lower ids, and never appears in top-k.
  l[v - 2] = 1.0f;
  l[2 * kScoreChunk + 9] = std::nanf("");
  l[3 * kScoreChunk + 1] = std::nanf("");
  EXPECT_TRUE(std::isnan(LogSumExp(l.data(), v)));
  const RowScoreResult r = ScoreRow(l.data(), v, 3 * kScoreChunk + 1, 1024);
  EXPECT_EQ(r.target_rank, v);  // the later of the two NaNs: last of all
  EXPECT_EQ(ScoreRow(l.data(), v, 2 * kScoreChunk + 9, 0).target_rank, v - 1);
  for (const auto& [id, lp] : r.top_k) ASSERT_FALSE(std::isnan(l[id])) << id;
}

VOCABD_ON_EVERY_SCAN_PATH(ScoringGoldenTest);
VOCABD_ON_EVERY_SCAN_PATH(ScoringTest);
VOCABD_ON_EVERY_SCAN_PATH(ScoringChunkTest);

}  // namespace
}  // namespace vocabd

namespace vocabd {
namespace {

// Candidate-token scoring (ScoreRow's candidates) against the float64 NumPy
// log-softmax of tests/golden/head_golden.json (make_head_golden.py): every
// id, wherever it ranks, in the order given, duplicates included.
class CandidateScoringTest : public ScanPathTest {};

TEST_P(CandidateScoringTest, ExactLogprobsForAnyIds) {
  const nlohmann::json golden = testing::ReadGolden("head_golden.json");
  const int64_t vocab = golden.at("vocab_size").get<int64_t>();
  const std::vector<int64_t> candidates = {0, 511, 403, 1, 403, 257, 100};
  for (size_t r = 0; r < golden.at("logits").size(); ++r) {
    SCOPED_TRACE("row " + std::to_string(r));
    const std::vector<float> l = testing::ToFloats(golden.at("logits")[r]);
    const std::vector<double> want = testing::ToDoubles(golden.at("log_softmax")[r]);
    const RowScoreResult got = ScoreRow(l.data(), vocab, -1, 0, &candidates);
    ASSERT_EQ(got.candidate_logprobs.size(), candidates.size());
    for (size_t c = 0; c < candidates.size(); ++c) {
      // float rounding of a float64 difference: 1e-6 relative + tiny absolute.
      const double w = want[static_cast<size_t>(candidates[c])];
      EXPECT_NEAR(got.candidate_logprobs[c], w, 1e-6 * std::abs(w) + 1e-6) << "id " << candidates[c];
    }
    // The last-ranked id is far outside any top-k; still exact.
    int64_t worst = 0;
    for (int64_t j = 1; j < vocab; ++j) worst = want[j] < want[worst] ? j : worst;
    const std::vector<int64_t> one = {worst};
    EXPECT_NEAR(ScoreRow(l.data(), vocab, -1, 5, &one).candidate_logprobs[0], want[worst],
                1e-6 * std::abs(want[worst]));
  }
}

TEST_P(CandidateScoringTest, SameAsTargetLogprobAndNoneWhenAbsent) {
  std::vector<float> l = {1.0f, 3.0f, -2.0f, 0.5f};
  const std::vector<int64_t> candidates = {2, 1};
  const RowScoreResult a = ScoreRow(l.data(), 4, 2, 1, &candidates);
  EXPECT_EQ(a.candidate_logprobs[0], a.target_logprob);
  EXPECT_EQ(a.candidate_logprobs[1], a.top_k[0].second);
  EXPECT_TRUE(ScoreRow(l.data(), 4, 2, 1).candidate_logprobs.empty());
}

VOCABD_ON_EVERY_SCAN_PATH(CandidateScoringTest);

}  // namespace
}  // namespace vocabd
