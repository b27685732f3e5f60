#include "lib/positions/alibi.h"

#include <cmath>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace vocabd {

absl::StatusOr<std::vector<float>> AlibiSlopes(int64_t num_heads) {
  if (num_heads < 1 || num_heads > 65536) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_heads = ", num_heads, " must be in [1, 65536]"));
  }
  int64_t n = 1;
  while (n * 2 <= num_heads) n *= 2;
  std::vector<float> slopes;
  slopes.reserve(static_cast<size_t>(num_heads));
  for (int64_t h = 0; h < n; ++h) {
    slopes.push_back(static_cast<float>(
        std::exp2(-8.0 * static_cast<double>(h + 1) / static_cast<double>(n))));
  }
  for (int64_t j = 0; j < num_heads - n; ++j) {
    slopes.push_back(static_cast<float>(
        std::exp2(-4.0 * static_cast<double>(2 * j + 1) / static_cast<double>(n))));
  }
  return slopes;
}

absl::StatusOr<std::vector<float>> AlibiBias(const std::vector<float>& slopes, int64_t q_len,
                                             int64_t k_len, bool causal) {
  if (q_len < 1) {
    return absl::InvalidArgumentError(absl::StrCat("q_len = ", q_len, " must be >= 1"));
  }
  if (k_len < 1) {
    return absl::InvalidArgumentError(absl::StrCat("k_len = ", k_len, " must be >= 1"));
  }
  if (q_len > k_len) {
    return absl::InvalidArgumentError(absl::StrCat(
        "q_len = ", q_len, " > k_len = ", k_len,
        " (queries are the last q_len of the k_len key positions)"));
  }
  constexpr int64_t kMaxValues = int64_t{1} << 26;
  const int64_t heads = static_cast<int64_t>(slopes.size());
  if (heads == 0 || q_len > kMaxValues / k_len || q_len * k_len > kMaxValues / heads) {
    return absl::InvalidArgumentError(absl::StrCat("num_heads * q_len * k_len = ", heads, " * ",
                                                   q_len, " * ", k_len, " exceeds ", kMaxValues,
                                                   " values"));
  }
  std::vector<float> bias(static_cast<size_t>(heads * q_len * k_len));
  const float neg_inf = -std::numeric_limits<float>::infinity();
  float* out = bias.data();
  for (int64_t h = 0; h < heads; ++h) {
    const float m = slopes[static_cast<size_t>(h)];
    for (int64_t i = 0; i < q_len; ++i) {
      const int64_t qp = k_len - q_len + i;
      for (int64_t j = 0; j < k_len; ++j) {
        if (j <= qp) {
          *out++ = -m * static_cast<float>(qp - j);
        } else {
          *out++ = causal ? neg_inf : -m * static_cast<float>(j - qp);
        }
      }
    }
  }
  return bias;
}

}  // namespace vocabd
