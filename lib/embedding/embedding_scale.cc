#include "lib/embedding/embedding_scale.h"

namespace vocabd {
namespace {

float RoundTo(float v, DType dtype) {
  switch (dtype) {
    case DType::kBF16: return BFloat16ToFloat(FloatToBFloat16(v));
    case DType::kF16: return HalfToFloat(FloatToHalf(v));
    default: return v;
  }
}

}  // namespace

float ScaleInDType(double scale, DType dtype) {
  return RoundTo(static_cast<float>(scale), dtype);
}

void ScaleRowsInDType(float* rows, int64_t count, double scale, DType dtype) {
  const float s = ScaleInDType(scale, dtype);
  if (s == 1.0f || rows == nullptr) return;
  const bool round = dtype == DType::kBF16 || dtype == DType::kF16;
  for (int64_t i = 0; i < count; ++i) {
    const float v = rows[i] * s;
    rows[i] = round ? RoundTo(v, dtype) : v;
  }
}

void ScaleRowsProductInDType(float* rows, int64_t count, double scale, DType dtype) {
  const float s = static_cast<float>(scale);
  if (s == 1.0f || rows == nullptr) return;
  for (int64_t i = 0; i < count; ++i) rows[i] = RoundTo(rows[i] * s, dtype);
}

}  // namespace vocabd
