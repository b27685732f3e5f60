#include "lib/core/shape.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace vocabd {

std::string ShapeString(absl::Span<const int64_t> shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

int64_t SaturatingMul(int64_t a, int64_t b, int64_t c) {
  a = std::max<int64_t>(a, 0);
  b = std::max<int64_t>(b, 0);
  c = std::max<int64_t>(c, 0);
  int64_t ab = 0;
  int64_t abc = 0;
  if (__builtin_mul_overflow(a, b, &ab) || __builtin_mul_overflow(ab, c, &abc)) {
    return std::numeric_limits<int64_t>::max();
  }
  return abc;
}

}  // namespace vocabd
