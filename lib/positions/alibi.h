// ALiBi (Press et al. 2022, "Train Short, Test Long", arXiv:2108.12409):
// per-head slopes and the attention bias they define.
#ifndef VOCABD_LIB_POSITIONS_ALIBI_H_
#define VOCABD_LIB_POSITIONS_ALIBI_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"

namespace vocabd {

// Slopes [num_heads] F32, as in the paper's reference code and HF
// `build_alibi_tensor` (BLOOM):
//   n = 2^floor(log2(num_heads)) (closest power of two <= num_heads)
//   slope[h] = 2^(-8 (h + 1) / n)                          for h < n
//   the remaining num_heads - n heads take every other slope of the
//   2n-head sequence: 2^(-4 (2j + 1) / n), j = 0 .. num_heads - n - 1
// (e.g. 8 heads: 1/2, 1/4, ..., 1/256). Computed in float64, rounded once.
// INVALID_ARGUMENT `num_heads = X must be in [1, 65536]`.
absl::StatusOr<std::vector<float>> AlibiSlopes(int64_t num_heads);

// Bias [num_heads, q_len, k_len] F32 added to the attention scores
// q_i . k_j / sqrt(d). Queries are the LAST q_len of the k_len key
// positions (prefill: q_len == k_len; a decode step: q_len = 1), so query
// i sits at key position qp = k_len - q_len + i, and
//   bias[h, i, j] = -slope[h] * (qp - j)      for j <= qp   (0 on the diagonal)
//   bias[h, i, j] = -inf                      for j >  qp   when causal
//   bias[h, i, j] = -slope[h] * (j - qp)      for j >  qp   when !causal
//                                             (symmetric |qp - j|, encoders)
// HF BLOOM adds slope[h] * j instead, which differs from the causal rows
// here by the per-row constant slope[h] * qp: softmax gives the same result.
// INVALID_ARGUMENT naming q_len / k_len (< 1, q_len > k_len) or the size
// (num_heads * q_len * k_len > 2^26 values).
absl::StatusOr<std::vector<float>> AlibiBias(const std::vector<float>& slopes, int64_t q_len,
                                             int64_t k_len, bool causal);

}  // namespace vocabd

#endif  // VOCABD_LIB_POSITIONS_ALIBI_H_
