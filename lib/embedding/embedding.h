// Token-embedding lookup: an indexed copy of table rows, widened or
// dequantized to F32.
//
//   table [vocab_size, hidden_size] F32, F16, BF16, or a served ggml quant
//         type (rows of hidden_size / block_size ggml blocks, lib/quant)
//   ids   [total_tokens]  (ragged sequences concatenated)
//   out   [total_tokens, hidden_size] F32,  out[t, :] = table[ids[t], :]
//
// The embedding scale is lib/embedding/embedding_scale.h; absolute positions
// (sinusoidal: lib/positions/sinusoidal.h, learned) are added by
// lib/serving/model.cc.
#ifndef VOCABD_LIB_EMBEDDING_EMBEDDING_H_
#define VOCABD_LIB_EMBEDDING_EMBEDDING_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "lib/core/dtype.h"
#include "lib/quant/ggml_blocks.h"

namespace vocabd {

// Copies rows: F32 rows bit for bit, F16/BF16 rows widened to F32 (exact).
// INVALID_ARGUMENT naming `field_name`[i] and the value for an id outside
// [0, vocab_size), or for an integer `table_dtype`. Nothing is written on
// error.
absl::Status EmbeddingLookup(const void* table, DType table_dtype, int64_t vocab_size,
                             int64_t hidden_size, const std::vector<int64_t>& ids,
                             const std::string& field_name, float* out);

// The same for a table of any served ggml type (quant::IsServedType):
// F32/F16/BF16 as above; quantized rows are dequantized -- only the
// requested rows -- bit for bit as ggml's dequantize_row_* (lib/quant/
// dequantize.h). INVALID_ARGUMENT also when hidden_size is not a multiple
// of the type's block size or the type is not served.
absl::Status EmbeddingLookup(const void* table, quant::GgmlType table_type, int64_t vocab_size,
                             int64_t hidden_size, const std::vector<int64_t>& ids,
                             const std::string& field_name, float* out);

}  // namespace vocabd

#endif  // VOCABD_LIB_EMBEDDING_EMBEDDING_H_
