// Token-embedding lookup: an indexed copy of table rows, widened to F32.
//
//   table [vocab_size, hidden_size] F32, F16 or BF16
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

namespace vocabd {

// Copies rows: F32 rows bit for bit, F16/BF16 rows widened to F32 (exact).
// INVALID_ARGUMENT naming `field_name`[i] and the value for an id outside
// [0, vocab_size), or for an integer `table_dtype`. Nothing is written on
// error.
absl::Status EmbeddingLookup(const void* table, DType table_dtype, int64_t vocab_size,
                             int64_t hidden_size, const std::vector<int64_t>& ids,
                             const std::string& field_name, float* out);

}  // namespace vocabd

#endif  // VOCABD_LIB_EMBEDDING_EMBEDDING_H_
