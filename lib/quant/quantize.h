// F32 -> ggml blocks, for `--weights-dtype NAME=q8_0` (lib/serving) and the
// GGUF writer tool (tools/vocabd_quantize). Simple per-block rounding; the
// layouts are ggml's (ggml_blocks.h), so ggml and llama.cpp read the files.
//
//   q8_0    exactly ggml's quantize_row_q8_0_ref: amax = max |x|,
//           d = amax / 127 (float), id = d ? 1 / d : 0, stored d = f16(d),
//           q = roundf(x * id) (half away from zero). Bit-identical output.
//   q4_0 / q5_0   ggml's reference: the signed value of largest |x| (first
//           one on ties) max, d = max / -8 (-16), q = min(15 (31),
//           (int8)(x / d + 8.5 (16.5))).
//   q4_1 / q5_1   ggml's reference: d = (max - min) / 15 (31), m = min,
//           q = min(15 (31), (int8)((x - min) / d + 0.5)).
//   iq4_nl  d = max / -127 (max as for q4_0), each value the nearest code
//           of kvalues_iq4nl (ggml searches scales further; not needed).
//   q2_K, q4_K, q5_K (scale + min): per sub-block (16, 32, 32 values)
//           min' = min(0, min x), scale = (max x - min') / (2^bits - 1);
//           scales and mins quantized to 4 (q2_K) or 6 bits against
//           d = max scale / 15 (63), dmin = max min' / 15 (63); values
//           q = clamp(round((x + dmin * m) / (d * sc)), 0, 2^bits - 1).
//   q3_K, q6_K (symmetric): per sub-block of 16 the signed max-|x| value
//           gives scale = max / -4 (-32); the 16 scales quantized to 6-bit
//           (q3_K, -32..31) or int8 (q6_K) against the largest |scale|;
//           q = clamp(round(x / (d * sc)), -4..3 or -32..31).
// ggml's k-quant reference additionally searches each sub-block's scale
// (make_qkx2_quants / make_qx_quants) and so is a little more accurate;
// these simple roundings are within the per-type bounds of
// tests/lib/quant/quant_test.cc (QuantizeTest.RoundTripErrorBounds).
#ifndef VOCABD_LIB_QUANT_QUANTIZE_H_
#define VOCABD_LIB_QUANT_QUANTIZE_H_

#include <cstdint>

#include "lib/quant/ggml_blocks.h"

namespace vocabd::quant {

// Writes RowBytes(type, n) bytes of `type` blocks for the `n` F32 values at
// `src` (n a multiple of the block size; dst any alignment). F32/F16/BF16
// are stored as such (F16/BF16 rounded to nearest even). Returns false
// (writing nothing) for a type that is not IsServedType or an n that is
// not a multiple of the block size. Non-finite inputs give unspecified
// (but in-range) codes.
bool QuantizeRow(GgmlType type, const float* src, int64_t n, void* dst);

}  // namespace vocabd::quant

#endif  // VOCABD_LIB_QUANT_QUANTIZE_H_
