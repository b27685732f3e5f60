#include "lib/core/shape.h"

#include <cstdint>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

#include "vocabd/v1/tensor.pb.h"

namespace vocabd {
namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

TEST(ShapeStringTest, VectorProtoAndScalar) {
  EXPECT_EQ(ShapeString(std::vector<int64_t>{2, 3, 4}), "[2, 3, 4]");
  EXPECT_EQ(ShapeString(std::vector<int64_t>{}), "[]");
  EXPECT_EQ(ShapeString({-1, 0}), "[-1, 0]");
  v1::Tensor t;
  t.add_shape(5);
  t.add_shape(7);
  EXPECT_EQ(ShapeString(t.shape()), "[5, 7]");
}

TEST(SaturatingMulTest, ExactSaturatedAndNegativeAsZero) {
  EXPECT_EQ(SaturatingMul(3, 5, 7), 105);
  EXPECT_EQ(SaturatingMul(3, 5), 15);
  EXPECT_EQ(SaturatingMul(int64_t{1} << 40, int64_t{1} << 40), kMax);
  EXPECT_EQ(SaturatingMul(-1, 5, 7), 0);
  EXPECT_EQ(SaturatingMul(5, -7), 0);
  EXPECT_EQ(SaturatingMul(kMax, 1), kMax);
  // Overflow at either step saturates, even when a later factor is 0.
  EXPECT_EQ(SaturatingMul(int64_t{1} << 40, int64_t{1} << 40, 0), kMax);
  EXPECT_EQ(SaturatingMul(int64_t{1} << 40, int64_t{1} << 20, int64_t{1} << 10), kMax);
}

}  // namespace
}  // namespace vocabd
