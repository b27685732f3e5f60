// Position-id bookkeeping: ranges of positions, packed (THD) batches.
#ifndef VOCABD_LIB_POSITIONS_POSITION_IDS_H_
#define VOCABD_LIB_POSITIONS_POSITION_IDS_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace vocabd {

// OK when start .. start + count - 1 is a range of positions (count 0 is
// empty). INVALID_ARGUMENT naming `num_positions` (count < 0),
// `start_position` (start < 0) or their sum when it overflows int64.
absl::Status ValidatePositionRange(int64_t start, int64_t count);

// Positions [total_tokens] of a packed batch of sequences:
//   sequence j occupies tokens [sum(lengths[:j]), sum(lengths[:j+1])) and
//   its token i is at position offsets[j] + i (offsets empty = all 0).
// `lengths` empty = one sequence of total_tokens. INVALID_ARGUMENT naming
// `sequence_lengths` / `position_offsets` when lengths are negative, do
// not sum to total_tokens, or offsets has a wrong count or a negative value.
absl::StatusOr<std::vector<int64_t>> PackedPositions(const std::vector<int64_t>& lengths,
                                                     const std::vector<int64_t>& offsets,
                                                     int64_t total_tokens);

}  // namespace vocabd

#endif  // VOCABD_LIB_POSITIONS_POSITION_IDS_H_
