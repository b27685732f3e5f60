// GGUF v3 writer (the layout of lib/checkpoint/gguf.h): metadata of u32 /
// f32 / string values, tensors of any ggml type whose bytes the caller
// provides (rows of blocks for quantized types, lib/quant). Tensor data is
// aligned to `alignment` (general.alignment is written when it is not 32).
// Used by tools/vocabd_make_gguf and the tests that build quantized files.
#ifndef VOCABD_LIB_CHECKPOINT_GGUF_WRITER_H_
#define VOCABD_LIB_CHECKPOINT_GGUF_WRITER_H_

#include <cstdint>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "lib/quant/ggml_types.h"

namespace vocabd {

using GgufWriteValue = std::variant<uint32_t, float, std::string>;

struct GgufWriteTensor {
  std::string name;
  // Row-major shape, e.g. [vocab_size, hidden_size] (written reversed as
  // ggml's ne, innermost first).
  std::vector<int64_t> shape;
  quant::GgmlType type = quant::GgmlType::kF32;
  // quant::RowBytes(type, shape.back()) * rows bytes; not owned, read while
  // WriteGguf runs.
  const void* data = nullptr;
  size_t nbytes = 0;
};

// Writes `path` (replacing it). INVALID_ARGUMENT when a tensor's nbytes does
// not match its shape and type (naming the tensor) or alignment is not a
// power of two; INTERNAL for I/O errors (naming the path).
absl::Status WriteGguf(const std::string& path,
                       const std::vector<std::pair<std::string, GgufWriteValue>>& metadata,
                       const std::vector<GgufWriteTensor>& tensors, uint32_t alignment = 32);

}  // namespace vocabd

#endif  // VOCABD_LIB_CHECKPOINT_GGUF_WRITER_H_
