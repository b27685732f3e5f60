// proto/tensor_codec: wire Tensor <-> host arrays. Golden bit patterns come
// from tests/golden/tensor_codec_golden.py (NumPy float16; bfloat16 by
// definition / nearest-even rounding in float64).
#include "proto/tensor_codec.h"

#include <bit>
#include <cmath>
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

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;

float FromBits(uint32_t bits) { return std::bit_cast<float>(bits); }
uint32_t Bits(float f) { return std::bit_cast<uint32_t>(f); }

// Tensor with raw 16-bit little-endian patterns.
v1::Tensor Tensor16(v1::DType dtype, const std::vector<uint16_t>& bits) {
  v1::Tensor t;
  t.set_dtype(dtype);
  t.add_shape(static_cast<int64_t>(bits.size()));
  t.set_data(std::string(reinterpret_cast<const char*>(bits.data()), bits.size() * 2));
  return t;
}

std::vector<uint16_t> Bits16(const v1::Tensor& t) {
  std::vector<uint16_t> out(t.data().size() / 2);
  std::memcpy(out.data(), t.data().data(), t.data().size());
  return out;
}

v1::Tensor MakeTensor(v1::DType dtype, std::vector<int64_t> shape, size_t bytes) {
  v1::Tensor t;
  t.set_dtype(dtype);
  for (int64_t d : shape) t.add_shape(d);
  t.set_data(std::string(bytes, '\0'));
  return t;
}

void ExpectInvalid(const absl::Status& status, const std::string& message) {
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_EQ(status.message(), message);
}

TEST(DTypeProtoTest, RoundTripsEveryDType) {
  for (DType d : {DType::kF32, DType::kF16, DType::kBF16, DType::kI32, DType::kI64}) {
    auto back = DTypeFromProto(DTypeToProto(d), "x");
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(*back, d);
  }
  EXPECT_EQ(DTypeToProto(DType::kF32), v1::F32);
  EXPECT_EQ(DTypeToProto(DType::kF16), v1::F16);
  EXPECT_EQ(DTypeToProto(DType::kBF16), v1::BF16);
  EXPECT_EQ(DTypeToProto(DType::kI32), v1::I32);
  EXPECT_EQ(DTypeToProto(DType::kI64), v1::I64);
}

TEST(DTypeProtoTest, UnspecifiedAndUnknownNameTheField) {
  ExpectInvalid(DTypeFromProto(v1::DTYPE_UNSPECIFIED, "output_dtype").status(),
                "output_dtype is not set (DTYPE_UNSPECIFIED); expected F32, F16, BF16, I32 or I64");
  ExpectInvalid(DTypeFromProto(static_cast<v1::DType>(42), "output_dtype").status(),
                "output_dtype = 42 is not a known DType; expected F32, F16, BF16, I32 or I64");
}

TEST(ValidateTensorTest, AcceptsConsistentTensors) {
  EXPECT_TRUE(ValidateTensor(MakeTensor(v1::F32, {2, 64}, 512), "hidden").ok());
  EXPECT_TRUE(ValidateTensor(MakeTensor(v1::BF16, {3, 5}, 30), "hidden").ok());
  EXPECT_TRUE(ValidateTensor(MakeTensor(v1::I64, {7}, 56), "position_ids").ok());
  // Scalar (empty shape) = one element; zero-size dims need no data.
  EXPECT_TRUE(ValidateTensor(MakeTensor(v1::I32, {}, 4), "x").ok());
  EXPECT_TRUE(ValidateTensor(MakeTensor(v1::F16, {0, 64}, 0), "x").ok());
}

TEST(ValidateTensorTest, DTypeNotSet) {
  ExpectInvalid(ValidateTensor(MakeTensor(v1::DTYPE_UNSPECIFIED, {2}, 8), "hidden"),
                "hidden.dtype is not set (DTYPE_UNSPECIFIED); expected F32, F16, BF16, I32 or I64");
  ExpectInvalid(ValidateTensor(MakeTensor(static_cast<v1::DType>(9), {2}, 8), "q"),
                "q.dtype = 9 is not a known DType; expected F32, F16, BF16, I32 or I64");
}

TEST(ValidateTensorTest, NegativeDim) {
  ExpectInvalid(ValidateTensor(MakeTensor(v1::F32, {2, -3, 4}, 0), "q"),
                "q.shape[1] = -3 is negative (shape [2, -3, 4])");
}

TEST(ValidateTensorTest, ElementCountOverflow) {
  ExpectInvalid(ValidateTensor(MakeTensor(v1::F32, {int64_t{1} << 40, int64_t{1} << 40}, 0), "k"),
                "k: shape [1099511627776, 1099511627776] x F32 overflows a 64-bit byte count");
  // The element count fits in int64 but the byte count does not.
  ExpectInvalid(ValidateTensor(MakeTensor(v1::I64, {int64_t{1} << 61}, 0), "position_ids"),
                "position_ids: shape [2305843009213693952] x I64 overflows a 64-bit byte count");
}

TEST(ValidateTensorTest, DataLengthMismatchNamesShapeAndDType) {
  ExpectInvalid(ValidateTensor(MakeTensor(v1::F32, {2, 64}, 100), "hidden"),
                "hidden: data has 100 bytes but shape [2, 64] x F32 needs 512");
  ExpectInvalid(ValidateTensor(MakeTensor(v1::BF16, {2, 64}, 512), "hidden"),
                "hidden: data has 512 bytes but shape [2, 64] x BF16 needs 256");
  ExpectInvalid(ValidateTensor(MakeTensor(v1::I32, {}, 0), "position_ids"),
                "position_ids: data has 0 bytes but shape [] x I32 needs 4");
}

TEST(DecodeTest, DecodersRejectTheOtherKindAndInvalidTensors) {
  ExpectInvalid(DecodeFloatTensor(MakeTensor(v1::I32, {2}, 8), "hidden").status(),
                "hidden.dtype = I32 is not a floating dtype; expected F32, F16 or BF16");
  ExpectInvalid(DecodeIntTensor(MakeTensor(v1::F16, {2}, 4), "position_ids").status(),
                "position_ids.dtype = F16 is not an integer dtype; expected I32 or I64");
  ExpectInvalid(DecodeFloatTensor(MakeTensor(v1::F32, {3}, 8), "q").status(),
                "q: data has 8 bytes but shape [3] x F32 needs 12");
  ExpectInvalid(DecodeIntTensor(MakeTensor(v1::I64, {3}, 8), "position_ids").status(),
                "position_ids: data has 8 bytes but shape [3] x I64 needs 24");
}

TEST(RoundTripTest, F32IsBitExact) {
  const std::vector<float> values = {0.0f,  -0.0f, 1.0f, -2.5f, 0.1f,
                                     3.4028235e38f, 1e-45f /* denormal */,
                                     std::numeric_limits<float>::infinity(),
                                     -std::numeric_limits<float>::infinity()};
  v1::Tensor t = EncodeFloatTensor(values, {3, 3});
  EXPECT_EQ(t.dtype(), v1::F32);
  EXPECT_THAT(t.shape(), ElementsAre(3, 3));
  ASSERT_EQ(t.data().size(), values.size() * 4);
  EXPECT_EQ(std::memcmp(t.data().data(), values.data(), t.data().size()), 0);
  auto back = DecodeFloatTensor(t, "x");
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->size(), values.size());
  for (size_t i = 0; i < values.size(); ++i) EXPECT_EQ(Bits((*back)[i]), Bits(values[i])) << i;
  // NaN stays NaN.
  auto nan = DecodeFloatTensor(EncodeFloatTensor({std::nanf("")}, {1}), "x");
  ASSERT_TRUE(nan.ok());
  EXPECT_TRUE(std::isnan((*nan)[0]));
}

TEST(RoundTripTest, PointerOverloadReadsProductOfShape) {
  const float values[6] = {1, 2, 3, 4, 5, 6};
  v1::Tensor t = EncodeFloatTensor(values, {2, 3}, DType::kBF16);
  EXPECT_EQ(t.dtype(), v1::BF16);
  EXPECT_THAT(t.shape(), ElementsAre(2, 3));
  auto back = DecodeFloatTensor(t, "x");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_THAT(*back, ElementsAre(1, 2, 3, 4, 5, 6));
}

TEST(RoundTripTest, VectorOverloadKeepsMismatchVisible) {
  // 3 values with shape [2, 2]: encoded as given, the receiver rejects it.
  v1::Tensor t = EncodeFloatTensor(std::vector<float>{1, 2, 3}, {2, 2});
  ExpectInvalid(ValidateTensor(t, "hidden"),
                "hidden: data has 12 bytes but shape [2, 2] x F32 needs 16");
}

TEST(RoundTripTest, IntegersI32AndI64) {
  const std::vector<int64_t> values = {0, 1, -1, 511, std::numeric_limits<int64_t>::min(),
                                       std::numeric_limits<int64_t>::max()};
  v1::Tensor t = EncodeInt64Tensor(values, {2, 3});
  EXPECT_EQ(t.dtype(), v1::I64);
  EXPECT_THAT(t.shape(), ElementsAre(2, 3));
  ASSERT_TRUE(ValidateTensor(t, "position_ids").ok());
  auto back = DecodeIntTensor(t, "position_ids");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_THAT(*back, ElementsAreArray(values));

  // I32 little-endian, sign-extended to int64.
  const std::vector<int32_t> v32 = {7, -7, std::numeric_limits<int32_t>::min(),
                                    std::numeric_limits<int32_t>::max()};
  v1::Tensor t32;
  t32.set_dtype(v1::I32);
  t32.add_shape(4);
  t32.set_data(std::string(reinterpret_cast<const char*>(v32.data()), 16));
  auto back32 = DecodeIntTensor(t32, "position_ids");
  ASSERT_TRUE(back32.ok()) << back32.status();
  EXPECT_THAT(*back32, ElementsAre(7, -7, -2147483648LL, 2147483647LL));
  // Explicit little-endian bytes: 0x01020304 and -2.
  v1::Tensor raw;
  raw.set_dtype(v1::I32);
  raw.add_shape(2);
  raw.set_data(std::string("\x04\x03\x02\x01\xfe\xff\xff\xff", 8));
  EXPECT_THAT(*DecodeIntTensor(raw, "p"), ElementsAre(0x01020304, -2));

  // Encoding floats as integers rounds to nearest and saturates.
  v1::Tensor ti = EncodeFloatTensor(std::vector<float>{2.6f, -2.6f, 1e10f}, {3}, DType::kI32);
  EXPECT_EQ(ti.dtype(), v1::I32);
  EXPECT_THAT(*DecodeIntTensor(ti, "p"), ElementsAre(3, -3, 2147483647LL));
}

TEST(RoundTripTest, EmptyTensors) {
  v1::Tensor t = EncodeFloatTensor(std::vector<float>{}, {0, 64}, DType::kF16);
  EXPECT_TRUE(t.data().empty());
  auto back = DecodeFloatTensor(t, "hidden");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(back->empty());
  auto ints = DecodeIntTensor(EncodeInt64Tensor({}, {0}), "ids");
  ASSERT_TRUE(ints.ok()) << ints.status();
  EXPECT_TRUE(ints->empty());
}

class GoldenTest : public ::testing::Test {
 protected:
  void SetUp() override { golden_ = testing::ReadGolden("tensor_codec.json"); }
  nlohmann::json golden_;
};

TEST_F(GoldenTest, F16DecodeExactValues) {
  std::vector<uint16_t> bits;
  std::vector<uint32_t> want;
  for (const auto& e : golden_.at("f16_decode")) {
    bits.push_back(e.at("bits").get<uint16_t>());
    want.push_back(e.at("f32_bits").get<uint32_t>());
  }
  ASSERT_GE(bits.size(), 15u);
  bits.push_back(0x7E00);  // NaN
  auto got = DecodeFloatTensor(Tensor16(v1::F16, bits), "hidden");
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), bits.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(Bits((*got)[i]), want[i])
        << "f16 0x" << std::hex << bits[i] << " -> " << (*got)[i] << ", want " << FromBits(want[i]);
  }
  EXPECT_TRUE(std::isnan(got->back()));
}

TEST_F(GoldenTest, BF16DecodeExactValues) {
  std::vector<uint16_t> bits;
  std::vector<uint32_t> want;
  for (const auto& e : golden_.at("bf16_decode")) {
    bits.push_back(e.at("bits").get<uint16_t>());
    want.push_back(e.at("f32_bits").get<uint32_t>());
  }
  ASSERT_GE(bits.size(), 15u);
  bits.push_back(0x7FC0);  // NaN
  auto got = DecodeFloatTensor(Tensor16(v1::BF16, bits), "hidden");
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), bits.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(Bits((*got)[i]), want[i])
        << "bf16 0x" << std::hex << bits[i] << " -> " << (*got)[i] << ", want " << FromBits(want[i]);
  }
  EXPECT_TRUE(std::isnan(got->back()));
}

TEST_F(GoldenTest, EncodeRoundsToNearestEvenAndRoundTrips) {
  std::vector<float> values;
  std::vector<uint16_t> want_f16, want_bf16;
  for (const auto& e : golden_.at("encode")) {
    values.push_back(FromBits(e.at("f32_bits").get<uint32_t>()));
    want_f16.push_back(e.at("f16_bits").get<uint16_t>());
    want_bf16.push_back(e.at("bf16_bits").get<uint16_t>());
  }
  ASSERT_GE(values.size(), 20u);
  const std::vector<int64_t> shape = {static_cast<int64_t>(values.size())};
  for (DType d : {DType::kF16, DType::kBF16}) {
    SCOPED_TRACE(std::string(DTypeName(d)));
    const auto& want = d == DType::kF16 ? want_f16 : want_bf16;
    v1::Tensor t = EncodeFloatTensor(values, shape, d);
    EXPECT_EQ(t.dtype(), DTypeToProto(d));
    ASSERT_TRUE(ValidateTensor(t, "x").ok());
    const std::vector<uint16_t> got = Bits16(t);
    for (size_t i = 0; i < values.size(); ++i) {
      EXPECT_EQ(got[i], want[i]) << std::hex << "value " << values[i] << " -> 0x" << got[i]
                                 << ", want 0x" << want[i];
    }
    // Decoding the encoded tensor and encoding again is a fixed point.
    auto decoded = DecodeFloatTensor(t, "x");
    ASSERT_TRUE(decoded.ok()) << decoded.status();
    EXPECT_EQ(EncodeFloatTensor(*decoded, shape, d).data(), t.data());
  }
  // NaN encodes to a NaN in both.
  for (DType d : {DType::kF16, DType::kBF16}) {
    auto back = DecodeFloatTensor(EncodeFloatTensor({std::nanf("")}, {1}, d), "x");
    ASSERT_TRUE(back.ok());
    EXPECT_TRUE(std::isnan((*back)[0])) << DTypeName(d);
  }
}

}  // namespace
}  // namespace vocabd
