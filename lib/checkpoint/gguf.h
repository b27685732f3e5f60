// GGUF container parser (ggml / llama.cpp, docs/gguf.md in ggml-org/ggml).
//
//   char magic[4] = "GGUF"; u32 version (2 or 3; v1 used u32 counts and is
//   refused); u64 tensor_count; u64 metadata_kv_count;
//   metadata_kv_count x { gguf_string key; u32 value_type; value }
//   tensor_count x { gguf_string name; u32 n_dims (1..4);
//                    u64 ne[n_dims] (ne[0] innermost); u32 ggml_type;
//                    u64 offset (relative to the data section) }
//   padding to `general.alignment` (u32, default 32, a power of two)
//   data section.
//   gguf_string = { u64 length; length bytes (UTF-8, not NUL-terminated) }
//   value types: 0 u8, 1 i8, 2 u16, 3 i16, 4 u32, 5 i32, 6 f32, 7 bool,
//   8 string, 9 array { u32 type; u64 count; count values }, 10 u64,
//   11 i64, 12 f64. All little-endian (a big-endian file shows up as an
//   unknown version and is refused).
#ifndef VOCABD_LIB_CHECKPOINT_GGUF_H_
#define VOCABD_LIB_CHECKPOINT_GGUF_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/quant/ggml_types.h"

namespace vocabd {

enum class GgufValueType : uint32_t {
  kU8 = 0, kI8 = 1, kU16 = 2, kI16 = 3, kU32 = 4, kI32 = 5, kF32 = 6, kBool = 7,
  kString = 8, kArray = 9, kU64 = 10, kI64 = 11, kF64 = 12,
};

// One metadata value. Scalars are widened: integers and bools to `i`
// (u64 values above INT64_MAX keep their bits in `u`), floats to `f`.
// Arrays keep their element type and count; arrays of up to
// kMaxGgufKeptArrayCount elements keep their values in `array_i` / `array_f`
// / `array_s` (string arrays: e.g. tokenizer.ggml.tokens and .merges, whose
// total size is bounded by the file's). Longer arrays are bounds-checked and
// skipped: only the count is kept.
struct GgufValue {
  GgufValueType type = GgufValueType::kU32;
  int64_t i = 0;
  uint64_t u = 0;
  double f = 0;
  std::string s;
  GgufValueType array_type = GgufValueType::kU32;
  uint64_t array_count = 0;
  std::vector<int64_t> array_i;
  std::vector<double> array_f;
  std::vector<std::string> array_s;

  bool is_integer() const;  // u8..i64 and bool
  bool is_float() const { return type == GgufValueType::kF32 || type == GgufValueType::kF64; }
};

// Tensor types: the one ggml type table is lib/quant/ggml_types.h
// (quant::FindGgmlType: name, block size, bytes per block).

struct GgufTensorInfo {
  std::string name;
  std::vector<uint64_t> ne;  // ggml order: ne[0] is the innermost dim
  uint32_t type = 0;
  uint64_t offset = 0;  // absolute offset in the file
  uint64_t nbytes = 0;
  // Row-major shape (ne reversed), e.g. token_embd ne [hidden, vocab] ->
  // [vocab, hidden].
  std::vector<int64_t> shape() const;
  int64_t num_elements() const;
};

struct GgufFile {
  uint32_t version = 0;
  uint32_t alignment = 32;
  uint64_t data_start = 0;  // absolute offset of the data section
  std::map<std::string, GgufValue> metadata;
  std::vector<GgufTensorInfo> tensors;  // in file order

  const GgufValue* Find(const std::string& key) const;
  const GgufTensorInfo* FindTensor(const std::string& name) const;
};

// Limits that keep hostile files from exhausting memory.
inline constexpr uint64_t kMaxGgufStringBytes = 64ull << 20;  // one string
inline constexpr int kMaxGgufDims = 4;
// Arrays longer than this are validated but their values are not kept.
inline constexpr uint64_t kMaxGgufKeptArrayCount = 1ull << 21;

// Parses and validates [data, data + size). Every violation is
// INVALID_ARGUMENT "<file_name>: invalid GGUF file: <rule>" naming the
// field: bad magic; version other than 2/3 (v1 gets its own message);
// tensor/kv counts or string/array lengths larger than the bytes left in
// the file; unknown value types; duplicate keys or tensor names;
// general.alignment not a u32 power of two; n_dims 0 or > 4; a dim of 0;
// element/byte counts that overflow int64; unknown ggml type ids ("tensor
// \"X\" has unknown ggml type id N"); ne[0] (the row length) not a
// multiple of the type's block size: "its N blocks ... do not divide into
// its R rows" when the element count is whole blocks, else "has a row
// length ne[0] = 100 that is not a multiple of the q4_K block size 256";
// offsets not
// aligned; a tensor's data running past the end of the file ("truncated":
// names the tensor, its type, the bytes it needs and the bytes left);
// tensors overlapping.
absl::StatusOr<GgufFile> ParseGguf(const uint8_t* data, size_t size, const std::string& file_name);

}  // namespace vocabd

#endif  // VOCABD_LIB_CHECKPOINT_GGUF_H_
