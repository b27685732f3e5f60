#include "lib/core/dtype.h"

#include <cmath>
#include <cstring>
#include <limits>

namespace vocabd {
namespace {

uint32_t FloatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

float BitsToFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

template <typename T>
T LoadUnaligned(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

template <typename T>
void StoreUnaligned(uint8_t* p, T v) {
  std::memcpy(p, &v, sizeof(T));
}

// Rounds `f` to the nearest integer of type T (ties to even), saturating;
// NaN gives 0. Used only for the integer dtypes, which hold ids.
template <typename T>
T SaturatingRound(float f) {
  if (std::isnan(f)) return 0;
  const double r = std::nearbyint(static_cast<double>(f));
  if (r <= static_cast<double>(std::numeric_limits<T>::min())) {
    return std::numeric_limits<T>::min();
  }
  if (r >= static_cast<double>(std::numeric_limits<T>::max())) {
    return std::numeric_limits<T>::max();
  }
  return static_cast<T>(r);
}

}  // namespace

size_t DTypeSize(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return 4;
    case DType::kF16:
      return 2;
    case DType::kBF16:
      return 2;
    case DType::kI32:
      return 4;
    case DType::kI64:
      return 8;
  }
  return 0;
}

std::string_view DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return "F32";
    case DType::kF16:
      return "F16";
    case DType::kBF16:
      return "BF16";
    case DType::kI32:
      return "I32";
    case DType::kI64:
      return "I64";
  }
  return "UNKNOWN";
}

float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  const uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0) {
    // Zero or subnormal: mantissa * 2^-24, exact in binary32.
    const float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
    return sign != 0 ? -magnitude : magnitude;
  }
  if (exponent == 0x1f) {
    // Inf (mantissa 0) or NaN (payload kept in the top mantissa bits).
    return BitsToFloat(sign | 0x7f800000u | (mantissa << 13));
  }
  // Normal: rebias the exponent from 15 to 127.
  return BitsToFloat(sign | ((exponent + (127 - 15)) << 23) | (mantissa << 13));
}

uint16_t FloatToHalf(float f) {
  const uint32_t x = FloatBits(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t abs_bits = x & 0x7fffffffu;
  if (abs_bits >= 0x7f800000u) {
    if (abs_bits == 0x7f800000u) return sign | 0x7c00u;  // inf
    // NaN: keep the top payload bits and force the quiet bit so the result
    // never collapses to inf.
    return static_cast<uint16_t>(sign | 0x7e00u | ((abs_bits >> 13) & 0x3ffu));
  }
  // 65520 = halfway between 65504 (max half) and 65536: ties to even -> inf.
  if (abs_bits >= 0x477ff000u) return sign | 0x7c00u;
  if (abs_bits >= 0x38800000u) {
    // Normal half (>= 2^-14): rebias the exponent (127 -> 15) and round the
    // 13 dropped mantissa bits to nearest even; a carry correctly bumps the
    // exponent.
    const uint32_t rebased = abs_bits - ((127u - 15u) << 23);
    const uint32_t rounded = rebased + 0xfffu + ((rebased >> 13) & 1u);
    return static_cast<uint16_t>(sign | (rounded >> 13));
  }
  // Subnormal half: result m * 2^-24 with m = round(|f| * 2^24).
  const int biased_exponent = static_cast<int>(abs_bits >> 23);
  if (biased_exponent < 102) return sign;  // |f| < 2^-25 rounds to zero.
  const uint32_t mantissa = (abs_bits & 0x7fffffu) | 0x800000u;
  const int shift = 126 - biased_exponent;  // in [14, 24]
  uint32_t m = mantissa >> shift;
  const uint32_t remainder = mantissa & ((1u << shift) - 1u);
  const uint32_t halfway = 1u << (shift - 1);
  if (remainder > halfway || (remainder == halfway && (m & 1u) != 0)) ++m;
  return static_cast<uint16_t>(sign | m);  // m == 0x400 is the smallest normal.
}

float BFloat16ToFloat(uint16_t b) { return BitsToFloat(static_cast<uint32_t>(b) << 16); }

uint16_t FloatToBFloat16(float f) {
  const uint32_t x = FloatBits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) {
    // NaN: truncate and set the quiet bit so the payload never becomes 0.
    return static_cast<uint16_t>((x >> 16) | 0x0040u);
  }
  // Round to nearest even on the 16 dropped bits (PyTorch c10::BFloat16);
  // large finite values correctly round up to inf.
  const uint32_t rounded = x + 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(rounded >> 16);
}

void ConvertToF32(DType src_dtype, const void* src, size_t n, float* dst) {
  const auto* in = static_cast<const uint8_t*>(src);
  switch (src_dtype) {
    case DType::kF32:
      std::memcpy(dst, src, n * sizeof(float));
      return;
    case DType::kF16:
      for (size_t i = 0; i < n; ++i) dst[i] = HalfToFloat(LoadUnaligned<uint16_t>(in + 2 * i));
      return;
    case DType::kBF16:
      for (size_t i = 0; i < n; ++i) {
        dst[i] = BFloat16ToFloat(LoadUnaligned<uint16_t>(in + 2 * i));
      }
      return;
    case DType::kI32:
      for (size_t i = 0; i < n; ++i) {
        dst[i] = static_cast<float>(LoadUnaligned<int32_t>(in + 4 * i));
      }
      return;
    case DType::kI64:
      for (size_t i = 0; i < n; ++i) {
        dst[i] = static_cast<float>(LoadUnaligned<int64_t>(in + 8 * i));
      }
      return;
  }
}

void ConvertFromF32(const float* src, size_t n, DType dst_dtype, void* dst) {
  auto* out = static_cast<uint8_t*>(dst);
  switch (dst_dtype) {
    case DType::kF32:
      std::memcpy(dst, src, n * sizeof(float));
      return;
    case DType::kF16:
      for (size_t i = 0; i < n; ++i) StoreUnaligned<uint16_t>(out + 2 * i, FloatToHalf(src[i]));
      return;
    case DType::kBF16:
      for (size_t i = 0; i < n; ++i) {
        StoreUnaligned<uint16_t>(out + 2 * i, FloatToBFloat16(src[i]));
      }
      return;
    case DType::kI32:
      for (size_t i = 0; i < n; ++i) {
        StoreUnaligned<int32_t>(out + 4 * i, SaturatingRound<int32_t>(src[i]));
      }
      return;
    case DType::kI64:
      for (size_t i = 0; i < n; ++i) {
        StoreUnaligned<int64_t>(out + 8 * i, SaturatingRound<int64_t>(src[i]));
      }
      return;
  }
}

}  // namespace vocabd
