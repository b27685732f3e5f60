// The sinusoidal position table of the original Transformer (Vaswani et al.
// 2017, section 3.5), computed in one place for both its uses: the table
// itself (GetSinusoidalPositions) and the positions Embed adds.
#ifndef VOCABD_LIB_POSITIONS_SINUSOIDAL_H_
#define VOCABD_LIB_POSITIONS_SINUSOIDAL_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"

namespace vocabd {

enum class SinusoidalLayout {
  // The paper: PE[p, 2i] = sin(p / base^(2i/d)), PE[p, 2i+1] = cos(...).
  kInterleaved,
  // tensor2tensor / fairseq: PE[p, i] = sin(p / base^(2i/d)),
  // PE[p, d/2 + i] = cos(...), i < d/2.
  kHalfSplit,
};

// Table [count, dim] F32 for positions start .. start + count - 1: each
// value computed in float64 (libm pow, sin, cos), rounded once to float32.
// INVALID_ARGUMENT naming `dim` (odd or < 2), `num_positions` (< 0 or
// count * dim > 2^26), `start_position` (< 0), `base` (<= 0 or not finite).
absl::StatusOr<std::vector<float>> SinusoidalTable(int64_t start, int64_t count, int64_t dim,
                                                   double base, SinusoidalLayout layout);
// SinusoidalTable's checks alone (nothing allocated): callers validate
// first, then apply their memory bound, then build the table.
absl::Status ValidateSinusoidalTable(int64_t start, int64_t count, int64_t dim, double base);

// Adds the kInterleaved table's rows for arbitrary positions in place, in
// fp32: rows[r, j] += float(PE[positions[r], j]) (the same float values as
// SinusoidalTable), for rows [num_rows, d]. Callers validate: d must be even
// (an odd last column simply gets its sin term) and positions non-negative;
// only min(num_rows, positions.size()) rows are touched.
void AddSinusoidalPositions(float* rows, int64_t num_rows, int64_t d,
                            const std::vector<int64_t>& positions, double base = 10000.0);

}  // namespace vocabd

#endif  // VOCABD_LIB_POSITIONS_SINUSOIDAL_H_
