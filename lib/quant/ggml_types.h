// ggml's type table (ggml.c `type_traits`: name, elements per block, bytes
// per block), the one vocabd uses everywhere: the GGUF parser checks tensor
// infos against it, the loader sizes rows with it, ModelInfo reports the
// names.
//
//   row of n elements of type T = n / block_size(T) blocks
//                               = n / block_size(T) * type_size(T) bytes
//   (n must be a multiple of block_size(T)).
//
// Names are ggml's own `ggml_type_name` spellings ("f32", "q8_0", "q4_K",
// "iq4_nl", "bf16"), which is also what gguf-py and llama.cpp print.
#ifndef VOCABD_LIB_QUANT_GGML_TYPES_H_
#define VOCABD_LIB_QUANT_GGML_TYPES_H_

#include <cstdint>
#include <optional>
#include <string_view>

#include "lib/quant/ggml_blocks.h"

namespace vocabd::quant {

struct GgmlTypeInfo {
  uint32_t id;          // ggml.h enum ggml_type value (the GGUF type field)
  const char* name;     // ggml_type_name
  int64_t block_size;   // elements per block (1 for plain element types)
  int64_t type_size;    // bytes per block
};

// Every ggml type id up to BF16 (30) whose layout ggml defines (ids 4, 5 --
// the removed Q4_2/Q4_3 -- and anything else are unknown): nullptr then.
// Known is not served: see IsServedType.
const GgmlTypeInfo* FindGgmlType(uint32_t id);
// Info of a GgmlType enumerator (always known).
const GgmlTypeInfo& TypeInfo(GgmlType type);
// ggml's name of `type`, e.g. "q4_K".
const char* GgmlTypeName(GgmlType type);
// Case-insensitive ggml name ("Q8_0", "q4_k") -> type, among the
// GgmlType enumerators; nullopt otherwise.
std::optional<GgmlType> ParseGgmlTypeName(std::string_view name);

// True for the types vocabd serves for token_embd / output: F32, F16, BF16
// and the quantized kQuantizedServedTypes.
bool IsServedType(GgmlType type);
// Quantized types served natively (read in place; Embed dequantizes rows,
// the LM head reads blocks).
inline constexpr GgmlType kQuantizedServedTypes[] = {
    GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kQ5_0, GgmlType::kQ5_1, GgmlType::kQ8_0,
    GgmlType::kQ2_K, GgmlType::kQ3_K, GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K,
    GgmlType::kIQ4_NL};
// True for block-quantized types (block_size > 1).
bool IsQuantized(GgmlType type);

// Bytes of a row of `n` elements; -1 when n is not a multiple of the block
// size (or n < 0).
int64_t RowBytes(GgmlType type, int64_t n);
// Bits per weight: 8 * type_size / block_size (e.g. q4_K 4.5, q8_0 8.5).
double BitsPerWeight(GgmlType type);

}  // namespace vocabd::quant

#endif  // VOCABD_LIB_QUANT_GGML_TYPES_H_
