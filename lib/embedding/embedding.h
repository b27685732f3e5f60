// Token-embedding lookup: an indexed copy of table rows (bit-exact for F32).
//
//   table [vocab_size, hidden_size] F32
//   ids   [total_tokens]  (ragged sequences concatenated)
//   out   [total_tokens, hidden_size] F32,  out[t, :] = table[ids[t], :] * scale
//                                             (+ sinusoidal positions)
#ifndef VOCABD_LIB_EMBEDDING_EMBEDDING_H_
#define VOCABD_LIB_EMBEDDING_EMBEDDING_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace vocabd {

// Copies rows. INVALID_ARGUMENT naming `field_name`[i] and the value for an
// id outside [0, vocab_size). Nothing is written on error.
absl::Status EmbeddingLookup(const float* table, int64_t vocab_size, int64_t hidden_size,
                             const std::vector<int64_t>& ids, const std::string& field_name,
                             float* out);

// Multiplies `count` floats (rows * hidden_size) in place by `scale` in
// fp32 (skipped when scale == 1).
void ScaleRows(float* rows, int64_t count, float scale);

// Adds the sinusoidal table (Vaswani et al. 2017, section 3.5) in place:
//   PE[p, 2i] = sin(p / base^(2i/d)),  PE[p, 2i+1] = cos(p / base^(2i/d))
// rows [num_rows, d], positions [num_rows] (row r gets position
// positions[r]). PE is computed in double (pow, sin, cos from libm), cast to
// float, then added in fp32: rows[r, j] += float(PE[p, j]). Callers validate:
// d must be even (an odd last column simply gets its sin term) and positions
// non-negative; only min(num_rows, positions.size()) rows are touched.
void AddSinusoidalPositions(float* rows, int64_t num_rows, int64_t d,
                            const std::vector<int64_t>& positions, double base = 10000.0);

}  // namespace vocabd

#endif  // VOCABD_LIB_EMBEDDING_EMBEDDING_H_
