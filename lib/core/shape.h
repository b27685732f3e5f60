// Tensor shapes: how vocabd prints them and sizes them.
//
// The one shape-to-string and the one saturating size product, shared by the
// checkpoint loaders, the tensor codec, the server's request sizing and the
// client, so a shape reads the same in every error message and a size
// computed from untrusted fields never overflows (signed overflow is
// undefined behaviour).
#ifndef VOCABD_LIB_CORE_SHAPE_H_
#define VOCABD_LIB_CORE_SHAPE_H_

#include <cstdint>
#include <string>

#include "absl/types/span.h"

namespace vocabd {

// "[2, 3, 4]" ("[]" for a scalar). Takes a std::vector<int64_t> or a proto
// `repeated int64` field (both convert to the span).
std::string ShapeString(absl::Span<const int64_t> shape);

// a * b * c for sizes and costs: negative factors count as 0, and a product
// past INT64_MAX (at either step) gives INT64_MAX.
int64_t SaturatingMul(int64_t a, int64_t b, int64_t c = 1);

}  // namespace vocabd

#endif  // VOCABD_LIB_CORE_SHAPE_H_
