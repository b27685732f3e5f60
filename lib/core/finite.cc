#include "lib/core/finite.h"

#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace vocabd {

int64_t FirstNonFinite(const float* values, int64_t n) {
  if (values == nullptr) return -1;
  // Exponent all ones <=> NaN or Inf; checked on the bits so the loop
  // vectorizes and -ffast-math style flags cannot drop it.
  constexpr int64_t kBlock = 1024;
  for (int64_t start = 0; start < n; start += kBlock) {
    const int64_t end = start + kBlock < n ? start + kBlock : n;
    uint32_t any = 0;
    for (int64_t i = start; i < end; ++i) {
      uint32_t bits;
      std::memcpy(&bits, values + i, sizeof(bits));
      any |= static_cast<uint32_t>((bits & 0x7f800000u) == 0x7f800000u);
    }
    if (any == 0) continue;
    for (int64_t i = start; i < end; ++i) {
      if (!std::isfinite(values[i])) return i;
    }
  }
  return -1;
}

std::string NonFiniteIndex(const std::vector<int64_t>& dims, int64_t flat) {
  std::vector<int64_t> coords(dims.size(), 0);
  for (size_t d = dims.size(); d-- > 0;) {
    if (dims[d] <= 0) break;
    coords[d] = flat % dims[d];
    flat /= dims[d];
  }
  return absl::StrCat("[", absl::StrJoin(coords, ", "), "]");
}

}  // namespace vocabd
