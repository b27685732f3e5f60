// Dequantization of ggml rows to F32, bit for bit as ggml's CPU reference
// (ggml-quants.c dequantize_row_*; read through the search tool, our own
// code). Each formula below is evaluated in float32 in exactly this order
// (no fused multiply-add: the file is built with -ffp-contract=off), so the
// results equal ggml's `to_float` to the last bit (tests/lib/quant/
// dequantize_test.cc checks every served type against
// ../shared/models/quant/*.golden.json `embedding_rows`).
//
// d, dmin, m below are ggml_half widened to float; q are the stored codes.
//   q4_0    d * (float)(q4 - 8)
//   q4_1    d * (float)q4 + m
//   q5_0    d * (float)(q5 - 16)
//   q5_1    d * (float)q5 + m
//   q8_0    (float)q8 * d
//   iq4_nl  d * (float)kvalues_iq4nl[q4]
//   q2_K    (d * sc4) * (float)q2 - (dmin * m4)
//   q3_K    (d * (float)(sc6 - 32)) * (float)q3      q3 in [-4, 3]
//   q4_K    (d * sc6) * (float)q4 - (dmin * m6)
//   q5_K    (d * sc6) * (float)q5 - (dmin * m6)
//   q6_K    (d * (float)sc8) * (float)(q6 - 32)
// Element order inside a block follows ggml (see ggml_blocks.h and the
// comments in dequantize.cc).
#ifndef VOCABD_LIB_QUANT_DEQUANTIZE_H_
#define VOCABD_LIB_QUANT_DEQUANTIZE_H_

#include <cstdint>

#include "lib/quant/ggml_blocks.h"

namespace vocabd::quant {

// Dequantizes `n` elements of `type` at `src` (any alignment; n a multiple
// of the type's block size) into dst[0, n). F32/F16/BF16 are copied /
// widened exactly. Returns false (writing nothing) for a type that is not
// IsServedType (lib/quant/ggml_types.h) or an n that is not a multiple of
// the block size.
bool DequantizeRow(GgmlType type, const void* src, int64_t n, float* dst);

}  // namespace vocabd::quant

#endif  // VOCABD_LIB_QUANT_DEQUANTIZE_H_
