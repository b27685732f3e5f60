// Element types and scalar conversions (no gRPC, no proto).
#ifndef VOCABD_LIB_CORE_DTYPE_H_
#define VOCABD_LIB_CORE_DTYPE_H_

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace vocabd {

enum class DType { kF32, kF16, kBF16, kI32, kI64 };

// Bytes per element: 4, 2, 2, 4, 8.
size_t DTypeSize(DType dtype);
// "F32", "F16", "BF16", "I32", "I64".
std::string_view DTypeName(DType dtype);

// IEEE 754 binary16 <-> binary32. F32->F16 rounds to nearest even,
// overflows to inf, keeps NaN a NaN.
float HalfToFloat(uint16_t h);
uint16_t FloatToHalf(float f);
// bfloat16 = upper 16 bits of binary32. F32->BF16 rounds to nearest even
// (as PyTorch `.to(torch.bfloat16)`), NaN stays NaN.
float BFloat16ToFloat(uint16_t b);
uint16_t FloatToBFloat16(float f);

// Converts `n` elements of a floating dtype (F32/F16/BF16) at `src` to F32.
// `src` may be unaligned.
void ConvertToF32(DType src_dtype, const void* src, size_t n, float* dst);
// Converts `n` F32 values to F32/F16/BF16 at `dst` (may be unaligned); to
// I32/I64 rounded to nearest (ties to even) and saturated, NaN giving 0.
void ConvertFromF32(const float* src, size_t n, DType dst_dtype, void* dst);

}  // namespace vocabd

#endif  // VOCABD_LIB_CORE_DTYPE_H_
