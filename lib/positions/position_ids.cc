#include "lib/positions/position_ids.h"

#include <limits>

#include "absl/strings/str_cat.h"

namespace vocabd {

absl::Status ValidatePositionRange(int64_t start, int64_t count) {
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
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int64_t>> PackedPositions(const std::vector<int64_t>& lengths,
                                                     const std::vector<int64_t>& offsets,
                                                     int64_t total_tokens) {
  std::vector<int64_t> seq_lengths = lengths;
  if (seq_lengths.empty()) seq_lengths.push_back(total_tokens);
  if (!offsets.empty() && offsets.size() != seq_lengths.size()) {
    return absl::InvalidArgumentError(absl::StrCat("position_offsets has ", offsets.size(),
                                                   " entries for ", seq_lengths.size(),
                                                   " sequences"));
  }
  int64_t sum = 0;
  for (size_t j = 0; j < seq_lengths.size(); ++j) {
    if (seq_lengths[j] < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("sequence_lengths[", j, "] = ", seq_lengths[j], " is negative"));
    }
    if (!offsets.empty() && offsets[j] < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("position_offsets[", j, "] = ", offsets[j], " is negative"));
    }
    sum += seq_lengths[j];
    if (sum > total_tokens) break;
  }
  if (sum != total_tokens) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sequence_lengths sum to ", sum, " but the tensors hold ", total_tokens, " tokens"));
  }
  std::vector<int64_t> positions;
  positions.reserve(static_cast<size_t>(total_tokens));
  for (size_t j = 0; j < seq_lengths.size(); ++j) {
    const int64_t start = offsets.empty() ? 0 : offsets[j];
    for (int64_t i = 0; i < seq_lengths[j]; ++i) positions.push_back(start + i);
  }
  return positions;
}

}  // namespace vocabd
