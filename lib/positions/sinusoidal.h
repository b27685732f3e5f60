// The sinusoidal position table of the original Transformer (Vaswani et al.
// 2017, section 3.5).
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
// value computed in float64 (libm pow, sin, cos), rounded once to float32
// (same values as lib/embedding/embedding.h AddSinusoidalPositions).
// INVALID_ARGUMENT naming `dim` (odd or < 2), `num_positions` (< 0 or
// count * dim > 2^26), `start_position` (< 0), `base` (<= 0 or not finite).
absl::StatusOr<std::vector<float>> SinusoidalTable(int64_t start, int64_t count, int64_t dim,
                                                   double base, SinusoidalLayout layout);

}  // namespace vocabd

#endif  // VOCABD_LIB_POSITIONS_SINUSOIDAL_H_
