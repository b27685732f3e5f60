// ggml's quantized block layouts (ggml-common.h in ggml-org/ggml; the GGUF
// data section stores rows as consecutive blocks of these, little-endian,
// `ggml_half` = IEEE binary16). Read in place from a file mapping, so the
// structs are packed exactly as ggml's and checked by static_assert.
//
// Legacy quants: 32 values per block (QK = 32).
//
//   Q4_0  [d:f16][qs:16 B]           x[i] = d * ((nibble) - 8)
//         qs[j] low nibble  -> x[j], high nibble -> x[j + 16]        18 B
//   Q4_1  [d:f16][m:f16][qs:16 B]    x[i] = d * nibble + m            20 B
//   Q5_0  [d:f16][qh:u32][qs:16 B]   5th bit of x[j] = bit j of qh,
//                                    x[i] = d * (q5 - 16)             22 B
//   Q5_1  [d:f16][m:f16][qh:u32][qs] x[i] = d * q5 + m                24 B
//   Q8_0  [d:f16][qs:32 x i8]        x[i] = d * qs[i]                 34 B
//   Q8_1  [d:f16][s:f16][qs:32 x i8] s = d * sum(qs) (activations)    36 B
//   IQ4_NL[d:f16][qs:16 B]           x[i] = d * kvalues_iq4nl[nibble] 18 B
//
// k-quants: 256 values per super-block (QK_K = 256), sub-blocks of 16 or 32
// with 4..8-bit scales packed in the super-block.
//
//   Q2_K  [scales:16 B][qs:64 B][d:f16][dmin:f16]                     84 B
//         16 sub-blocks of 16; scales[j] = (min4 << 4) | scale4;
//         x = d * scale4 * q2 - dmin * min4
//   Q3_K  [hmask:32 B][qs:64 B][scales:12 B][d:f16]                  110 B
//         16 sub-blocks of 16; 6-bit signed scales (minus 32) packed in
//         12 B; q3 = low 2 bits from qs | high bit from hmask, minus 4 when
//         the hmask bit is clear; x = d * (scale6 - 32) * q3
//   Q4_K  [d:f16][dmin:f16][scales:12 B][qs:128 B]                   144 B
//         8 sub-blocks of 32; 6-bit scale and 6-bit min per sub-block packed
//         in 12 B (get_scale_min_k4); x = d * sc * q4 - dmin * m
//   Q5_K  [d:f16][dmin:f16][scales:12 B][qh:32 B][qs:128 B]          176 B
//         as Q4_K with a 5th bit per value from qh
//   Q6_K  [ql:128 B][qh:64 B][scales:16 x i8][d:f16]                 210 B
//         16 sub-blocks of 16; q6 = low 4 bits from ql | 2 bits from qh,
//         x = d * scales[j] * (q6 - 32)
//   Q8_K  [d:f32][qs:256 x i8][bsums:16 x i16]                       292 B
//         activations for the k-quant dot products; bsums[j] = sum of
//         qs[16 j .. 16 j + 15]
#ifndef VOCABD_LIB_QUANT_GGML_BLOCKS_H_
#define VOCABD_LIB_QUANT_GGML_BLOCKS_H_

#include <cstdint>

namespace vocabd::quant {

// ggml.h `enum ggml_type` ids of the types vocabd reads (the GGUF tensor-info
// type field). kF32/kF16/kBF16 are plain element types (block of 1).
enum class GgmlType : uint32_t {
  kF32 = 0, kF16 = 1, kQ4_0 = 2, kQ4_1 = 3, kQ5_0 = 6, kQ5_1 = 7, kQ8_0 = 8, kQ8_1 = 9,
  kQ2_K = 10, kQ3_K = 11, kQ4_K = 12, kQ5_K = 13, kQ6_K = 14, kQ8_K = 15, kIQ4_NL = 20,
  kBF16 = 30,
};

inline constexpr int kQK = 32;      // ggml QK4_0 .. QK8_1, QK4_NL
inline constexpr int kQK_K = 256;   // ggml QK_K
inline constexpr int kKScaleSize = 12;  // ggml K_SCALE_SIZE

using ggml_half = uint16_t;  // IEEE binary16 bits

#pragma pack(push, 1)
struct BlockQ4_0 { ggml_half d; uint8_t qs[kQK / 2]; };
struct BlockQ4_1 { ggml_half d; ggml_half m; uint8_t qs[kQK / 2]; };
struct BlockQ5_0 { ggml_half d; uint8_t qh[4]; uint8_t qs[kQK / 2]; };
struct BlockQ5_1 { ggml_half d; ggml_half m; uint8_t qh[4]; uint8_t qs[kQK / 2]; };
struct BlockQ8_0 { ggml_half d; int8_t qs[kQK]; };
struct BlockQ8_1 { ggml_half d; ggml_half s; int8_t qs[kQK]; };
struct BlockIQ4_NL { ggml_half d; uint8_t qs[kQK / 2]; };

struct BlockQ2_K { uint8_t scales[kQK_K / 16]; uint8_t qs[kQK_K / 4]; ggml_half d; ggml_half dmin; };
struct BlockQ3_K { uint8_t hmask[kQK_K / 8]; uint8_t qs[kQK_K / 4]; uint8_t scales[12]; ggml_half d; };
struct BlockQ4_K { ggml_half d; ggml_half dmin; uint8_t scales[kKScaleSize]; uint8_t qs[kQK_K / 2]; };
struct BlockQ5_K {
  ggml_half d; ggml_half dmin; uint8_t scales[kKScaleSize]; uint8_t qh[kQK_K / 8]; uint8_t qs[kQK_K / 2];
};
struct BlockQ6_K { uint8_t ql[kQK_K / 2]; uint8_t qh[kQK_K / 4]; int8_t scales[kQK_K / 16]; ggml_half d; };
struct BlockQ8_K { float d; int8_t qs[kQK_K]; int16_t bsums[kQK_K / 16]; };
#pragma pack(pop)

static_assert(sizeof(BlockQ4_0) == 18);
static_assert(sizeof(BlockQ4_1) == 20);
static_assert(sizeof(BlockQ5_0) == 22);
static_assert(sizeof(BlockQ5_1) == 24);
static_assert(sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockQ8_1) == 36);
static_assert(sizeof(BlockIQ4_NL) == 18);
static_assert(sizeof(BlockQ2_K) == 84);
static_assert(sizeof(BlockQ3_K) == 110);
static_assert(sizeof(BlockQ4_K) == 144);
static_assert(sizeof(BlockQ5_K) == 176);
static_assert(sizeof(BlockQ6_K) == 210);
static_assert(sizeof(BlockQ8_K) == 292);

// IQ4_NL's non-linear 4-bit code book (ggml-common.h kvalues_iq4nl).
inline constexpr int8_t kValuesIQ4_NL[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                             1,    13,   25,  38,  53,  69,  89,  113};

}  // namespace vocabd::quant

#endif  // VOCABD_LIB_QUANT_GGML_BLOCKS_H_
