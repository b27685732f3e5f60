// Tests for lib/embedding/embedding.{h,cc}: bit-exact row copies (F32, and
// BF16 widened to F32), id validation.
#include "lib/embedding/embedding.h"

#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/test_util.h"

namespace vocabd {
namespace {

std::vector<float> RandomTable(int64_t vocab, int64_t hidden, uint32_t seed) {
  return testing::RandomNormal(static_cast<size_t>(vocab * hidden), seed);
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
  ASSERT_TRUE(
      EmbeddingLookup(table.data(), DType::kF32, vocab, hidden, ids, "token_ids", out.data()).ok());
  for (size_t t = 0; t < ids.size(); ++t) {
    EXPECT_EQ(std::memcmp(&out[t * hidden], &table[ids[t] * hidden], hidden * sizeof(float)), 0)
        << "row " << t << " (id " << ids[t] << ")";
  }
}

TEST(EmbeddingLookupTest, EmptyIdsIsOkAndWritesNothing) {
  std::vector<float> table = RandomTable(4, 2, 2);
  float sentinel = 5.0f;
  EXPECT_TRUE(EmbeddingLookup(table.data(), DType::kF32, 4, 2, {}, "token_ids", &sentinel).ok());
  EXPECT_EQ(sentinel, 5.0f);
}

class EmbeddingLookupErrorTest : public ::testing::Test {
 protected:
  void ExpectError(const std::vector<int64_t>& ids, const std::string& message) {
    const int64_t vocab = 512, hidden = 4;
    std::vector<float> table = RandomTable(vocab, hidden, 3);
    std::vector<float> out(ids.size() * hidden, 42.0f);
    absl::Status st = EmbeddingLookup(table.data(), DType::kF32, vocab, hidden, ids,
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
  EXPECT_EQ(EmbeddingLookup(table, DType::kF32, 0, 4, {0}, "ids", out.data()).message(),
            "vocab_size = 0 must be > 0");
  EXPECT_EQ(EmbeddingLookup(table, DType::kF32, 1, -1, {0}, "ids", out.data()).message(),
            "hidden_size = -1 must be > 0");
}

TEST(EmbeddingLookupTest, Bf16RowsWidenExactly) {
  // BF16 -> F32 is exact: the upper half of each F32 is the BF16 value,
  // including -0, inf and a NaN payload.
  const int64_t vocab = 5, hidden = 6;
  const std::vector<float> f32 = RandomTable(vocab, hidden, 5);
  std::vector<uint16_t> bf16(f32.size());
  ConvertFromF32(f32.data(), f32.size(), DType::kBF16, bf16.data());
  bf16[3 * hidden + 0] = 0x8000u;  // -0
  bf16[3 * hidden + 1] = 0x7f80u;  // inf
  bf16[3 * hidden + 2] = 0x7fa5u;  // NaN with a payload
  const std::vector<int64_t> ids = {3, 0, 4, 3};
  std::vector<float> out(ids.size() * hidden, -123.0f);
  ASSERT_TRUE(EmbeddingLookup(bf16.data(), DType::kBF16, vocab, hidden, ids, "token_ids",
                              out.data())
                  .ok());
  for (size_t t = 0; t < ids.size(); ++t) {
    for (int64_t j = 0; j < hidden; ++j) {
      uint32_t got;
      std::memcpy(&got, &out[t * hidden + j], 4);
      EXPECT_EQ(got, static_cast<uint32_t>(bf16[ids[t] * hidden + j]) << 16)
          << "row " << t << " col " << j;
    }
  }
}

TEST(EmbeddingLookupTest, IntegerTableIsRefused) {
  const int32_t table[4] = {};
  float out[2] = {7.0f, 7.0f};
  absl::Status st = EmbeddingLookup(table, DType::kI32, 2, 2, {1}, "token_ids", out);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(st.message(), "embedding table dtype I32 is not a floating dtype");
  EXPECT_EQ(out[0], 7.0f);
}

}  // namespace
}  // namespace vocabd
