#include "lib/positions/sinusoidal.h"

#include <algorithm>
#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "lib/core/status_macros.h"
#include "lib/positions/position_ids.h"

namespace vocabd {
namespace {

// The one PE computation. Row r of `rows` [num_rows, dim] is combined with
// PE[position(r), :] through put(float& dst, float pe): each value computed
// in float64 (libm pow, sin, cos) and rounded once to float32. kInterleaved
// with an odd dim gives the last column its sin term only; kHalfSplit needs
// an even dim.
template <typename Position, typename Put>
void Sinusoids(float* rows, int64_t num_rows, int64_t dim, double base, SinusoidalLayout layout,
               Position position, Put put) {
  const bool interleaved = layout == SinusoidalLayout::kInterleaved;
  const int64_t half = dim / 2;
  const int64_t pairs = interleaved ? (dim + 1) / 2 : half;
  // base^(2i/d) per pair, in double (shared by all rows).
  std::vector<double> div(static_cast<size_t>(pairs));
  for (int64_t i = 0; i < pairs; ++i) {
    div[static_cast<size_t>(i)] =
        std::pow(base, static_cast<double>(2 * i) / static_cast<double>(dim));
  }
  for (int64_t r = 0; r < num_rows; ++r) {
    const double p = static_cast<double>(position(r));
    float* row = rows + r * dim;
    for (int64_t i = 0; i < pairs; ++i) {
      const double angle = p / div[static_cast<size_t>(i)];
      const float s = static_cast<float>(std::sin(angle));
      if (interleaved) {
        put(row[2 * i], s);
        if (2 * i + 1 < dim) put(row[2 * i + 1], static_cast<float>(std::cos(angle)));
      } else {
        put(row[i], s);
        put(row[half + i], static_cast<float>(std::cos(angle)));
      }
    }
  }
}

}  // namespace

absl::Status ValidateSinusoidalTable(int64_t start, int64_t count, int64_t dim, double base) {
  if (dim < 2 || dim % 2 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("dim = ", dim, " must be even and >= 2 (sin/cos pairs)"));
  }
  RETURN_IF_ERROR(ValidatePositionRange(start, count));
  if (!std::isfinite(base) || base <= 0.0) {
    return absl::InvalidArgumentError(absl::StrCat("base = ", base, " must be finite and > 0"));
  }
  constexpr int64_t kMaxValues = int64_t{1} << 26;
  // dim alone too: the per-column frequencies are dim values even for
  // num_positions = 0 (request_fuzzer found dim = 1.2e10 allocating 47.6 GB).
  if (dim > kMaxValues) {
    return absl::InvalidArgumentError(
        absl::StrCat("dim = ", dim, " exceeds ", kMaxValues, " values"));
  }
  if (count > kMaxValues / dim) {
    return absl::InvalidArgumentError(absl::StrCat("num_positions * dim = ", count, " * ", dim,
                                                   " exceeds ", kMaxValues, " values"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<float>> SinusoidalTable(int64_t start, int64_t count, int64_t dim,
                                                   double base, SinusoidalLayout layout) {
  RETURN_IF_ERROR(ValidateSinusoidalTable(start, count, dim, base));
  std::vector<float> table(static_cast<size_t>(count * dim));
  Sinusoids(
      table.data(), count, dim, base, layout, [start](int64_t r) { return start + r; },
      [](float& dst, float pe) { dst = pe; });
  return table;
}

void AddSinusoidalPositions(float* rows, int64_t num_rows, int64_t d,
                            const std::vector<int64_t>& positions, double base) {
  if (rows == nullptr || d <= 0) return;
  const int64_t n = std::min<int64_t>(num_rows, static_cast<int64_t>(positions.size()));
  Sinusoids(
      rows, n, d, base, SinusoidalLayout::kInterleaved,
      [&positions](int64_t r) { return positions[static_cast<size_t>(r)]; },
      [](float& dst, float pe) { dst += pe; });
}

}  // namespace vocabd
