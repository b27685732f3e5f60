// Scoring (logsumexp, log-softmax, rank, top-k, temperature, vocab mask)
// against tests/golden/head_golden.json (tests/golden/make_head_golden.py)
// and hand-made rows for the tie rule.
#include "lib/scoring.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/test_util.h"

namespace vocabd {
namespace {

using ::vocabd::testing::ReadGolden;
using ::vocabd::testing::ToDoubles;
using ::vocabd::testing::ToFloats;

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr double kTol = 1e-4;

class ScoringGoldenTest : public ::testing::Test {
 protected:
  void SetUp() override {
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

TEST_F(ScoringGoldenTest, LogSumExpAndLogSoftmax) {
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

TEST_F(ScoringGoldenTest, ScoresMatchGolden) { CheckScores(golden_.at("scores"), 1.0f, 0); }

TEST_F(ScoringGoldenTest, TemperatureMatchesGolden) {
  CheckScores(golden_.at("scores_temperature"), golden_.at("temperature").get<float>(), 0);
}

TEST_F(ScoringGoldenTest, VocabLimitMatchesGolden) {
  CheckScores(golden_.at("scores_vocab_limit"), 1.0f, golden_.at("vocab_limit").get<int64_t>());
}

TEST_F(ScoringGoldenTest, MaskedIdsNeverInTopKAndScoreMinusInf) {
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

TEST_F(ScoringGoldenTest, TopKZeroAndVocab) {
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

TEST(ScoringTest, TieRuleLowerIdFirst) {
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
TEST(ScoringTest, TopKMatchesFullSortWithTies) {
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

TEST(ScoringTest, TemperatureDividesAndOneIsIdentity) {
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

TEST(ScoringTest, LogSumExpIsStableAndFloat64) {
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

TEST(ScoringTest, NanLogitsRankLastAndStayOutOfTopK) {
  const std::vector<float> l = {std::nanf(""), kNegInf, 0.0f};
  const RowScoreResult r = ScoreRow(l.data(), 3, 0, 3);
  EXPECT_EQ(r.target_rank, 3);
  ASSERT_EQ(r.top_k.size(), 1u);
  EXPECT_EQ(r.top_k[0].first, 2);
  EXPECT_EQ(ScoreRow(l.data(), 3, 1, 0).target_rank, 2);
}

}  // namespace
}  // namespace vocabd
