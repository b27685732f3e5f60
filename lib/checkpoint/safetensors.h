// safetensors file format (https://github.com/huggingface/safetensors):
//
//   [u64 little-endian N][N bytes JSON header][byte buffer]
//   header: {"__metadata__": {str: str}, "<name>": {"dtype": "F32",
//            "shape": [d0, d1, ...], "data_offsets": [begin, end]}, ...}
//   offsets are relative to the start of the byte buffer.
#ifndef VOCABD_LIB_CHECKPOINT_SAFETENSORS_H_
#define VOCABD_LIB_CHECKPOINT_SAFETENSORS_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/core/dtype.h"

namespace vocabd {

struct SafetensorsEntry {
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  uint64_t begin = 0;  // absolute offset in the file
  uint64_t end = 0;    // absolute offset in the file, exclusive
};

struct SafetensorsHeader {
  std::map<std::string, std::string> metadata;
  std::map<std::string, SafetensorsEntry> tensors;
  uint64_t data_start = 0;  // 8 + N
};

// Maximum header length accepted (bytes).
inline constexpr uint64_t kMaxSafetensorsHeaderBytes = 100ull << 20;

// Parses and validates the header of a safetensors file held in
// [data, data + size). Rules (each violation is INVALID_ARGUMENT whose
// message names `file_name` and the rule): file >= 8 bytes; header length
// <= 100 MB and within the file; header is a JSON object; each entry has a
// known dtype (F32/F16/BF16/I32/I64 accepted; others rejected by name),
// a shape of non-negative ints whose product does not overflow, and
// data_offsets [begin, end] with end - begin == product(shape) * size;
// entries sorted by offset are contiguous from 0 with no overlap or gap and
// end exactly at the end of the file; no duplicate names.
absl::StatusOr<SafetensorsHeader> ParseSafetensorsHeader(const uint8_t* data, size_t size,
                                                         const std::string& file_name);

}  // namespace vocabd

#endif  // VOCABD_LIB_CHECKPOINT_SAFETENSORS_H_
