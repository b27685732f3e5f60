#include "lib/positions/sinusoidal.h"

#include <cmath>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace vocabd {

absl::StatusOr<std::vector<float>> SinusoidalTable(int64_t start, int64_t count, int64_t dim,
                                                   double base, SinusoidalLayout layout) {
  if (dim < 2 || dim % 2 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("dim = ", dim, " must be even and >= 2 (sin/cos pairs)"));
  }
  if (count < 0) {
    return absl::InvalidArgumentError(absl::StrCat("num_positions = ", count, " is negative"));
  }
  if (start < 0) {
    return absl::InvalidArgumentError(absl::StrCat("start_position = ", start, " is negative"));
  }
  if (count > 0 && start > std::numeric_limits<int64_t>::max() - count) {
    return absl::InvalidArgumentError(absl::StrCat("start_position + num_positions = ", start,
                                                   " + ", count, " overflows int64"));
  }
  if (!std::isfinite(base) || base <= 0.0) {
    return absl::InvalidArgumentError(absl::StrCat("base = ", base, " must be finite and > 0"));
  }
  constexpr int64_t kMaxValues = int64_t{1} << 26;
  if (count > kMaxValues / dim) {
    return absl::InvalidArgumentError(absl::StrCat("num_positions * dim = ", count, " * ", dim,
                                                   " exceeds ", kMaxValues, " values"));
  }
  const int64_t half = dim / 2;
  std::vector<double> div(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i) {
    div[static_cast<size_t>(i)] =
        std::pow(base, static_cast<double>(2 * i) / static_cast<double>(dim));
  }
  std::vector<float> table(static_cast<size_t>(count * dim));
  for (int64_t r = 0; r < count; ++r) {
    const double p = static_cast<double>(start + r);
    float* row = table.data() + r * dim;
    for (int64_t i = 0; i < half; ++i) {
      const double angle = p / div[static_cast<size_t>(i)];
      const float s = static_cast<float>(std::sin(angle));
      const float c = static_cast<float>(std::cos(angle));
      if (layout == SinusoidalLayout::kInterleaved) {
        row[2 * i] = s;
        row[2 * i + 1] = c;
      } else {
        row[i] = s;
        row[half + i] = c;
      }
    }
  }
  return table;
}

}  // namespace vocabd
