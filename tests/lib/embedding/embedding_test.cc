// Tests for lib/embedding.{h,cc}: bit-exact row copies, id validation,
// scaling, and the sinusoidal table against tests/golden/rope_golden.json
// ("sinusoidal_cases", float64 NumPy, made by make_rope_golden.py).
#include "lib/embedding/embedding.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/test_util.h"

namespace vocabd {
namespace {

std::vector<float> RandomTable(int64_t vocab, int64_t hidden, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> t(static_cast<size_t>(vocab * hidden));
  for (float& x : t) x = dist(gen);
  return t;
}

TEST(EmbeddingLookupTest, CopiesRowsBitExact) {
  const int64_t vocab = 50, hidden = 12;
  std::vector<float> table = RandomTable(vocab, hidden, 1);
  // Unusual bit patterns must survive: -0.0, a NaN payload, a denormal.
  const uint32_t nan_bits = 0x7fa5a5a5u;
  std::memcpy(&table[7 * hidden + 3], &nan_bits, 4);
  table[7 * hidden + 4] = -0.0f;
  table[49 * hidden + 11] = 1e-42f;
  const std::vector<int64_t> ids = {7, 0, 49, 7, 13};
  std::vector<float> out(ids.size() * hidden, -123.0f);
  ASSERT_TRUE(EmbeddingLookup(table.data(), vocab, hidden, ids, "token_ids", out.data()).ok());
  for (size_t t = 0; t < ids.size(); ++t) {
    EXPECT_EQ(std::memcmp(&out[t * hidden], &table[ids[t] * hidden], hidden * sizeof(float)), 0)
        << "row " << t << " (id " << ids[t] << ")";
  }
}

TEST(EmbeddingLookupTest, EmptyIdsIsOkAndWritesNothing) {
  std::vector<float> table = RandomTable(4, 2, 2);
  float sentinel = 5.0f;
  EXPECT_TRUE(EmbeddingLookup(table.data(), 4, 2, {}, "token_ids", &sentinel).ok());
  EXPECT_EQ(sentinel, 5.0f);
}

class EmbeddingLookupErrorTest : public ::testing::Test {
 protected:
  void ExpectError(const std::vector<int64_t>& ids, const std::string& message) {
    const int64_t vocab = 512, hidden = 4;
    std::vector<float> table = RandomTable(vocab, hidden, 3);
    std::vector<float> out(ids.size() * hidden, 42.0f);
    absl::Status st = EmbeddingLookup(table.data(), vocab, hidden, ids,
                                      "sequences[0].token_ids", out.data());
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(st.message(), message);
    // Nothing written, not even the valid rows before the bad id.
    EXPECT_EQ(out, std::vector<float>(ids.size() * hidden, 42.0f));
  }
};

TEST_F(EmbeddingLookupErrorTest, IdTooLarge) {
  ExpectError({1, 2, 600}, "sequences[0].token_ids[2] = 600 is outside [0, 512)");
}

TEST_F(EmbeddingLookupErrorTest, IdEqualToVocabSize) {
  ExpectError({511, 512}, "sequences[0].token_ids[1] = 512 is outside [0, 512)");
}

TEST_F(EmbeddingLookupErrorTest, NegativeId) {
  ExpectError({3, 4, 5, -1}, "sequences[0].token_ids[3] = -1 is outside [0, 512)");
}

TEST_F(EmbeddingLookupErrorTest, ExtremeIds) {
  ExpectError({std::numeric_limits<int64_t>::min()},
              "sequences[0].token_ids[0] = -9223372036854775808 is outside [0, 512)");
  ExpectError({0, std::numeric_limits<int64_t>::max()},
              "sequences[0].token_ids[1] = 9223372036854775807 is outside [0, 512)");
}

TEST_F(EmbeddingLookupErrorTest, FirstBadIdIsReported) {
  ExpectError({0, -7, 9999}, "sequences[0].token_ids[1] = -7 is outside [0, 512)");
}

TEST(EmbeddingLookupTest, BadTableShape) {
  std::vector<float> out(4);
  float table[4] = {};
  EXPECT_EQ(EmbeddingLookup(table, 0, 4, {0}, "ids", out.data()).message(),
            "vocab_size = 0 must be > 0");
  EXPECT_EQ(EmbeddingLookup(table, 1, -1, {0}, "ids", out.data()).message(),
            "hidden_size = -1 must be > 0");
}

TEST(ScaleRowsTest, MultipliesInFp32) {
  std::vector<float> rows = {1.0f, -2.5f, 0.1f, 3.0f, 0.0f, -0.0f};
  const float scale = std::sqrt(64.0f);  // 8, e.g. Gemma sqrt(hidden)
  ScaleRows(rows.data(), static_cast<int64_t>(rows.size()), scale);
  const std::vector<float> want = {8.0f, -20.0f, 0.1f * 8.0f, 24.0f, 0.0f, -0.0f};
  EXPECT_EQ(rows, want);
  EXPECT_TRUE(std::signbit(rows[5]));

  std::vector<float> r2 = {0.3f, 0.7f};
  const float s = std::sqrt(2048.0f);
  ScaleRows(r2.data(), 1, s);  // only `count` floats touched
  EXPECT_EQ(r2[0], 0.3f * s);
  EXPECT_EQ(r2[1], 0.7f);
}

TEST(ScaleRowsTest, ScaleOneIsANoOpEvenForNan) {
  const uint32_t nan_bits = 0x7fc00001u;
  float x[2];
  std::memcpy(&x[0], &nan_bits, 4);
  x[1] = 1.5f;
  ScaleRows(x, 2, 1.0f);
  uint32_t got;
  std::memcpy(&got, &x[0], 4);
  EXPECT_EQ(got, nan_bits);
  EXPECT_EQ(x[1], 1.5f);
}

// Golden: PE in float64 from NumPy. The C++ side computes PE in double and
// casts once to float, so the result is within half a float ULP (<= 2^-25
// for |PE| < 1, plus a few double ULPs of libm difference): tolerance 6e-8.
TEST(SinusoidalTest, MatchesGoldenTable) {
  const nlohmann::json golden = testing::ReadGolden("rope_golden.json");
  int cases = 0;
  for (const auto& c : golden.at("sinusoidal_cases")) {
    ++cases;
    const int64_t d = c.at("d").get<int64_t>();
    const double base = c.at("base").get<double>();
    const std::vector<int64_t> positions = c.at("positions").get<std::vector<int64_t>>();
    const std::vector<double> want = testing::ToDoubles(c.at("table"));
    const int64_t n = static_cast<int64_t>(positions.size());
    ASSERT_EQ(want.size(), static_cast<size_t>(n * d));
    std::vector<float> rows(static_cast<size_t>(n * d), 0.0f);
    AddSinusoidalPositions(rows.data(), n, d, positions, base);
    for (size_t i = 0; i < rows.size(); ++i) {
      EXPECT_NEAR(rows[i], want[i], 6e-8) << "d " << d << " base " << base << " row "
                                          << i / d << " col " << i % d;
    }
    // Adding onto existing values: rows + float(PE) in fp32.
    std::vector<float> base_rows = RandomTable(n, d, 4);
    std::vector<float> sum = base_rows;
    AddSinusoidalPositions(sum.data(), n, d, positions, base);
    for (size_t i = 0; i < sum.size(); ++i) {
      EXPECT_EQ(sum[i], base_rows[i] + rows[i]) << i;
    }
  }
  EXPECT_EQ(cases, 3);
}

TEST(SinusoidalTest, KnownValues) {
  // Position 0: sin(0) = 0, cos(0) = 1 in every pair. Position 1, d = 2:
  // (sin 1, cos 1).
  std::vector<float> rows(2 * 4, 0.0f);
  AddSinusoidalPositions(rows.data(), 2, 4, {0, 1});
  EXPECT_EQ(rows[0], 0.0f);
  EXPECT_EQ(rows[1], 1.0f);
  EXPECT_EQ(rows[2], 0.0f);
  EXPECT_EQ(rows[3], 1.0f);
  EXPECT_EQ(rows[4], static_cast<float>(std::sin(1.0)));
  EXPECT_EQ(rows[5], static_cast<float>(std::cos(1.0)));
  // Pair 1 of d = 4: angle = 1 / 10000^(2/4) = 0.01.
  EXPECT_EQ(rows[6], static_cast<float>(std::sin(0.01)));
  EXPECT_EQ(rows[7], static_cast<float>(std::cos(0.01)));
}

}  // namespace
}  // namespace vocabd
