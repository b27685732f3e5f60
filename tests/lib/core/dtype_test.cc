// Tests for lib/dtype: sizes/names and the F16/BF16 <-> F32 conversions.
// Expected bit patterns are IEEE 754 constants; rounding is checked
// exhaustively at every midpoint between consecutive representable values.
#include "lib/core/dtype.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

namespace vocabd {
namespace {

uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float FromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
bool IsHalfNan(uint16_t h) { return (h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0; }

TEST(DTypeTest, SizesAndNames) {
  EXPECT_EQ(DTypeSize(DType::kF32), 4u);
  EXPECT_EQ(DTypeSize(DType::kF16), 2u);
  EXPECT_EQ(DTypeSize(DType::kBF16), 2u);
  EXPECT_EQ(DTypeSize(DType::kI32), 4u);
  EXPECT_EQ(DTypeSize(DType::kI64), 8u);
  EXPECT_EQ(DTypeName(DType::kF32), "F32");
  EXPECT_EQ(DTypeName(DType::kF16), "F16");
  EXPECT_EQ(DTypeName(DType::kBF16), "BF16");
  EXPECT_EQ(DTypeName(DType::kI32), "I32");
  EXPECT_EQ(DTypeName(DType::kI64), "I64");
}

TEST(DTypeTest, HalfKnownValues) {
  struct Case {
    float f;
    uint16_t h;
  } cases[] = {
      {0.0f, 0x0000},           {-0.0f, 0x8000},          {1.0f, 0x3c00},
      {-2.0f, 0xc000},          {0.5f, 0x3800},           {65504.0f, 0x7bff},  // max half
      {6.103515625e-05f, 0x0400},                                            // 2^-14 min normal
      {5.9604644775390625e-08f, 0x0001},                                     // 2^-24 min subnormal
      {6.0975551605224609e-05f, 0x03ff},                                     // max subnormal
      {0.333251953125f, 0x3555},                                             // nearest to 1/3
  };
  for (const Case& c : cases) {
    EXPECT_EQ(FloatToHalf(c.f), c.h) << c.f;
    EXPECT_EQ(Bits(HalfToFloat(c.h)), Bits(c.f)) << c.h;
  }
  EXPECT_EQ(FloatToHalf(1.0f / 3.0f), 0x3555);
  EXPECT_EQ(FloatToHalf(0.1f), 0x2e66);  // 0.0999755859375
}

TEST(DTypeTest, HalfOverflowInfNan) {
  EXPECT_EQ(FloatToHalf(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_EQ(FloatToHalf(-std::numeric_limits<float>::infinity()), 0xfc00);
  // 65519.99 rounds down to 65504; 65520 is the tie -> even -> inf.
  EXPECT_EQ(FloatToHalf(std::nextafter(65520.0f, 0.0f)), 0x7bff);
  EXPECT_EQ(FloatToHalf(65520.0f), 0x7c00);
  EXPECT_EQ(FloatToHalf(-1e10f), 0xfc00);
  EXPECT_EQ(FloatToHalf(std::numeric_limits<float>::max()), 0x7c00);
  EXPECT_TRUE(std::isinf(HalfToFloat(0x7c00)));
  EXPECT_LT(HalfToFloat(0xfc00), 0.0f);

  const uint16_t qnan = FloatToHalf(std::numeric_limits<float>::quiet_NaN());
  EXPECT_TRUE(IsHalfNan(qnan)) << std::hex << qnan;
  // A signalling NaN whose payload sits only in the low 13 bits must not
  // collapse to inf.
  const uint16_t snan = FloatToHalf(FromBits(0x7f800001u));
  EXPECT_TRUE(IsHalfNan(snan)) << std::hex << snan;
  EXPECT_EQ(FloatToHalf(FromBits(0xff800001u)) & 0x8000, 0x8000);  // sign kept
  EXPECT_TRUE(std::isnan(HalfToFloat(0x7e00)));
  EXPECT_TRUE(std::isnan(HalfToFloat(0x7c01)));
}

TEST(DTypeTest, HalfUnderflow) {
  // 2^-25 is the tie between 0 and the smallest subnormal -> even -> 0.
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -25)), 0x0000);
  EXPECT_EQ(FloatToHalf(std::nextafter(std::ldexp(1.0f, -25), 1.0f)), 0x0001);
  EXPECT_EQ(FloatToHalf(-std::ldexp(1.0f, -26)), 0x8000);
  EXPECT_EQ(FloatToHalf(std::numeric_limits<float>::denorm_min()), 0x0000);
  // 3 * 2^-25 = 1.5 subnormal ulps: tie -> even (2).
  EXPECT_EQ(FloatToHalf(3.0f * std::ldexp(1.0f, -25)), 0x0002);
}

// Every finite half round-trips, and every midpoint between consecutive
// non-negative halves rounds to the one with an even mantissa, while the
// floats just below/above the midpoint round down/up.
TEST(DTypeTest, HalfExhaustiveRoundTripAndTiesToEven) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const uint16_t half = static_cast<uint16_t>(h);
    if ((half & 0x7c00) == 0x7c00) continue;  // inf/NaN handled elsewhere
    ASSERT_EQ(FloatToHalf(HalfToFloat(half)), half) << std::hex << h;
  }
  for (uint16_t h = 0; h < 0x7bff; ++h) {
    const float lo = HalfToFloat(h), hi = HalfToFloat(static_cast<uint16_t>(h + 1));
    const float mid = lo + (hi - lo) / 2;  // exact: needs one bit more than a half
    ASSERT_EQ(static_cast<double>(mid), (static_cast<double>(lo) + hi) / 2) << h;
    const uint16_t even = (h & 1) == 0 ? h : static_cast<uint16_t>(h + 1);
    ASSERT_EQ(FloatToHalf(mid), even) << std::hex << h;
    ASSERT_EQ(FloatToHalf(-mid), even | 0x8000) << std::hex << h;
    ASSERT_EQ(FloatToHalf(std::nextafter(mid, 0.0f)), h) << std::hex << h;
    ASSERT_EQ(FloatToHalf(std::nextafter(mid, 1e9f)), h + 1) << std::hex << h;
  }
}

TEST(DTypeTest, BFloat16KnownValues) {
  EXPECT_EQ(FloatToBFloat16(1.0f), 0x3f80);
  EXPECT_EQ(FloatToBFloat16(-2.0f), 0xc000);
  EXPECT_EQ(FloatToBFloat16(0.0f), 0x0000);
  EXPECT_EQ(FloatToBFloat16(-0.0f), 0x8000);
  // 1/3 = 0x3eaaaaab -> 0x3eab (round up: dropped bits 0xaaab > 0x8000).
  EXPECT_EQ(FloatToBFloat16(1.0f / 3.0f), 0x3eab);
  // Ties: 0x3f808000 is halfway between 0x3f80 (even) and 0x3f81.
  EXPECT_EQ(FloatToBFloat16(FromBits(0x3f808000u)), 0x3f80);
  EXPECT_EQ(FloatToBFloat16(FromBits(0x3f818000u)), 0x3f82);
  EXPECT_EQ(FloatToBFloat16(FromBits(0x3f808001u)), 0x3f81);
  EXPECT_EQ(FloatToBFloat16(FromBits(0x3f807fffu)), 0x3f80);
  // Largest float rounds to inf; inf stays inf; NaN stays NaN.
  EXPECT_EQ(FloatToBFloat16(std::numeric_limits<float>::max()), 0x7f80);
  EXPECT_EQ(FloatToBFloat16(-std::numeric_limits<float>::infinity()), 0xff80);
  const uint16_t nan = FloatToBFloat16(FromBits(0x7f800001u));
  EXPECT_EQ(nan & 0x7f80, 0x7f80);
  EXPECT_NE(nan & 0x007f, 0);
  EXPECT_TRUE(std::isnan(BFloat16ToFloat(nan)));
  EXPECT_EQ(Bits(BFloat16ToFloat(0x3eab)), 0x3eab0000u);
}

TEST(DTypeTest, BFloat16ExhaustiveRoundTrip) {
  for (uint32_t b = 0; b < 0x10000; ++b) {
    const uint16_t bf = static_cast<uint16_t>(b);
    if ((bf & 0x7f80) == 0x7f80 && (bf & 0x7f) != 0) continue;  // NaN
    ASSERT_EQ(FloatToBFloat16(BFloat16ToFloat(bf)), bf) << std::hex << b;
    ASSERT_EQ(Bits(BFloat16ToFloat(bf)), b << 16);
  }
}

TEST(DTypeTest, ConvertUnalignedBuffers) {
  const std::vector<float> values = {1.0f, -0.5f, 65504.0f, 1.0f / 3.0f, 0.0f, -3.75f};
  const size_t n = values.size();
  // Odd offsets make every element unaligned.
  std::vector<uint8_t> f16(2 * n + 1), bf16(2 * n + 1), f32(4 * n + 1), i32(4 * n + 1),
      i64(8 * n + 1);
  ConvertFromF32(values.data(), n, DType::kF16, f16.data() + 1);
  ConvertFromF32(values.data(), n, DType::kBF16, bf16.data() + 1);
  ConvertFromF32(values.data(), n, DType::kF32, f32.data() + 1);
  for (size_t i = 0; i < n; ++i) {
    uint16_t h, b;
    std::memcpy(&h, f16.data() + 1 + 2 * i, 2);
    std::memcpy(&b, bf16.data() + 1 + 2 * i, 2);
    EXPECT_EQ(h, FloatToHalf(values[i]));
    EXPECT_EQ(b, FloatToBFloat16(values[i]));
  }
  std::vector<float> back(n);
  ConvertToF32(DType::kF16, f16.data() + 1, n, back.data());
  const std::vector<float> expect_f16 = {1.0f, -0.5f, 65504.0f, 0.333251953125f, 0.0f, -3.75f};
  EXPECT_EQ(back, expect_f16);
  ConvertToF32(DType::kBF16, bf16.data() + 1, n, back.data());
  const std::vector<float> expect_bf16 = {1.0f, -0.5f, 65536.0f, FromBits(0x3eab0000u), 0.0f,
                                          -3.75f};
  EXPECT_EQ(back, expect_bf16);
  ConvertToF32(DType::kF32, f32.data() + 1, n, back.data());
  EXPECT_EQ(back, values);

  // Integer dtypes: round to nearest even, saturate.
  const std::vector<float> ints = {2.5f, -3.5f, 7.0f, 3e9f, -3e9f, 1.25f};
  ConvertFromF32(ints.data(), n, DType::kI32, i32.data() + 1);
  const int32_t want32[] = {2, -4, 7, 2147483647, -2147483647 - 1, 1};
  for (size_t i = 0; i < n; ++i) {
    int32_t v;
    std::memcpy(&v, i32.data() + 1 + 4 * i, 4);
    EXPECT_EQ(v, want32[i]) << i;
  }
  ConvertFromF32(ints.data(), n, DType::kI64, i64.data() + 1);
  ConvertToF32(DType::kI64, i64.data() + 1, n, back.data());
  const std::vector<float> want64 = {2.0f, -4.0f, 7.0f, 3e9f, -3e9f, 1.0f};
  EXPECT_EQ(back, want64);
}

}  // namespace
}  // namespace vocabd
