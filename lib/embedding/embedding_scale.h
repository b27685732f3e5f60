// Embedding scale "applied in the model's dtype", as Gemma does:
//   hidden = hidden * torch.tensor(sqrt(hidden_size), dtype=hidden.dtype)
// i.e. the scale is first rounded to the dtype of the embedding table as
// stored in the checkpoint, then every product is rounded to that dtype.
#ifndef VOCABD_LIB_EMBEDDING_EMBEDDING_SCALE_H_
#define VOCABD_LIB_EMBEDDING_EMBEDDING_SCALE_H_

#include <cstdint>

#include "lib/core/dtype.h"

namespace vocabd {

// The scale as the model's dtype holds it: F32 -> float(scale); BF16/F16 ->
// float(round_to_dtype(float(scale))) (BF16: sqrt(2048) = 45.2548 -> 45.25).
float ScaleInDType(double scale, DType dtype);

// rows[i] = round_to_dtype(rows[i] * ScaleInDType(scale, dtype)) for `count`
// floats, product in float32 (exact for BF16 x BF16 and F16 x F16 values, so
// the single rounding equals a native BF16/F16 multiply). F32: a plain
// float32 multiply. No-op when the dtype-rounded scale is 1.
void ScaleRowsInDType(float* rows, int64_t count, double scale, DType dtype);

// rows[i] = round_to_dtype(rows[i] * float(scale)): a Python float times a
// BF16/F16 tensor (torch computes the product in float32 and rounds once;
// Granite `embedding_multiplier`). F32: a plain float32 multiply. No-op
// when float(scale) is 1.
void ScaleRowsProductInDType(float* rows, int64_t count, double scale, DType dtype);

}  // namespace vocabd

#endif  // VOCABD_LIB_EMBEDDING_EMBEDDING_SCALE_H_
