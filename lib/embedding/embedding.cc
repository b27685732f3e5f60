#include "lib/embedding/embedding.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace vocabd {

absl::Status EmbeddingLookup(const float* table, int64_t vocab_size, int64_t hidden_size,
                             const std::vector<int64_t>& ids, const std::string& field_name,
                             float* out) {
  if (vocab_size <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("vocab_size = ", vocab_size, " must be > 0"));
  }
  if (hidden_size <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("hidden_size = ", hidden_size, " must be > 0"));
  }
  // Validate every id before writing anything.
  for (size_t i = 0; i < ids.size(); ++i) {
    const int64_t id = ids[i];
    if (id < 0 || id >= vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat(field_name, "[", i, "] = ", id,
                                                     " is outside [0, ", vocab_size, ")"));
    }
  }
  if (ids.empty()) return absl::OkStatus();
  if (table == nullptr) return absl::InvalidArgumentError("embedding table is null");
  if (out == nullptr) return absl::InvalidArgumentError("output buffer is null");
  const size_t row_bytes = static_cast<size_t>(hidden_size) * sizeof(float);
  for (size_t i = 0; i < ids.size(); ++i) {
    std::memcpy(out + static_cast<int64_t>(i) * hidden_size, table + ids[i] * hidden_size,
                row_bytes);
  }
  return absl::OkStatus();
}

void ScaleRows(float* rows, int64_t count, float scale) {
  if (scale == 1.0f || rows == nullptr) return;
  for (int64_t i = 0; i < count; ++i) rows[i] *= scale;
}

void AddSinusoidalPositions(float* rows, int64_t num_rows, int64_t d,
                            const std::vector<int64_t>& positions, double base) {
  if (rows == nullptr || d <= 0) return;
  const int64_t n = std::min<int64_t>(num_rows, static_cast<int64_t>(positions.size()));
  // 1 / base^(2i/d) per pair, in double (shared by all rows).
  std::vector<double> div((static_cast<size_t>(d) + 1) / 2);
  for (size_t i = 0; i < div.size(); ++i) {
    div[i] = std::pow(base, static_cast<double>(2 * i) / static_cast<double>(d));
  }
  for (int64_t r = 0; r < n; ++r) {
    const double p = static_cast<double>(positions[static_cast<size_t>(r)]);
    float* row = rows + r * d;
    for (int64_t j = 0; j < d; ++j) {
      const double angle = p / div[static_cast<size_t>(j / 2)];
      const double pe = (j % 2 == 0) ? std::sin(angle) : std::cos(angle);
      row[j] += static_cast<float>(pe);
    }
  }
}

}  // namespace vocabd
