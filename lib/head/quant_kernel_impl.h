// Shared parts of the quantized LM-head kernels (lib/head/quant_kernel.h):
// the activation row layout, the per-type unpackers to the canonical form
// (u8 codes + per-16 scale and offset) and the driver loop. Included only by
// quant_kernel.cc and the per-ISA files quant_kernel_<isa>.cc, each compiled
// with its own -m flags: everything here is in an anonymous namespace (one
// private copy per file, so no copy built for one ISA can be picked by the
// linker for another) and uses no standard library templates.
#ifndef VOCABD_LIB_HEAD_QUANT_KERNEL_IMPL_H_
#define VOCABD_LIB_HEAD_QUANT_KERNEL_IMPL_H_

#include <cstdint>
#include <cstring>

#include "lib/head/quant_kernel.h"
#include "lib/quant/ggml_blocks.h"

namespace vocabd {
namespace {

inline int64_t Round64(int64_t n) { return (n + 63) / 64 * 64; }
inline int64_t Min64(int64_t a, int64_t b) { return a < b ? a : b; }

// One quantized activation row (see quant_kernel.h), byte offsets:
//   [aq: d x i8][dal: d/4 x f32][da: d/32 x f32][qs16: d/16 x f32][qs32: d/32 x f32]
//   [s32: d/32 x i32][s16: d/16 x i32]
// each part starting on a 64-byte boundary.
struct ActLayout {
  int64_t dal, da, qs16, qs32, s32, s16, bytes;
  explicit ActLayout(int64_t d) {
    dal = Round64(d);
    da = dal + Round64(d);
    qs16 = da + Round64(d / 8);
    qs32 = qs16 + Round64(d / 4);
    s32 = qs32 + Round64(d / 8);
    s16 = s32 + Round64(d / 8);
    bytes = s16 + Round64(d / 4);
  }
};

// The scale and sums of a quantized activation row, block by block: both
// quantizers (QuantizeActivationsScalar, Avx512QuantizeActivations) write
// the codes aq themselves and a block's rest through Put.
struct ActRowSums {
  float *dal, *da, *qs16, *qs32;
  int32_t *s32, *s16;
  ActRowSums(uint8_t* row, const ActLayout& al)
      : dal(reinterpret_cast<float*>(row + al.dal)),
        da(reinterpret_cast<float*>(row + al.da)),
        qs16(reinterpret_cast<float*>(row + al.qs16)),
        qs32(reinterpret_cast<float*>(row + al.qs32)),
        s32(reinterpret_cast<int32_t*>(row + al.s32)),
        s16(reinterpret_cast<int32_t*>(row + al.s16)) {}
  // Block b (32 codes): its scale and the integer sums of its two halves.
  void Put(int64_t b, float scale, int32_t sum_lo, int32_t sum_hi) const {
    da[b] = scale;
    for (int l = 0; l < 8; ++l) dal[8 * b + l] = scale;
    qs16[2 * b] = scale * static_cast<float>(sum_lo);
    qs16[2 * b + 1] = scale * static_cast<float>(sum_hi);
    qs32[b] = scale * static_cast<float>(sum_lo + sum_hi);
    s32[b] = sum_lo + sum_hi;
    s16[2 * b] = sum_lo;
    s16[2 * b + 1] = sum_hi;
  }
};

// Unpacked weight rows: kMaxTileRows rows of [u: d x u8], [dw: d/16 f32],
// [mw: d/16 f32], 64-byte aligned, plus 64 bytes of slack.
constexpr int kMaxTileRows = 4;
struct UnpackLayout {
  int64_t dw, mw, row_bytes;
  explicit UnpackLayout(int64_t d) {
    dw = Round64(d);
    mw = dw + Round64(d / 4);
    row_bytes = mw + Round64(d / 4);
  }
  int64_t bytes() const { return kMaxTileRows * row_bytes + 64; }
};

// The packed kernel's activation panel (QuantBuildPackedPanel): the input
// rows interleaved per 32 codes, 56 bytes per row and 32 codes (the codes,
// da, the offset term's starting values per 32 and per 16, the quantized
// sum per 32, the two int sums per 16 as int16 pairs), plus 64 bytes of
// alignment; per block of
// kPackedRowBlock rows, per record (256 codes) and per tile of rows, so
// that a pass over a group's records reads it as one stream. The kernel
// runs blocks of kPackedRowBlock rows (each block's panel stays in L2
// while a thread's vocabulary range streams past it).
constexpr int64_t kPackedRowBlock = 64;
constexpr int64_t kPackedPanelBytesPer32 = 56;

// IEEE binary16 -> binary32 (ggml_half), exact.
inline float H2F(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1Fu;
  const uint32_t man = h & 0x3FFu;
  uint32_t bits;
  if (exp == 0) {
    const float f = static_cast<float>(man) * (1.0f / 16777216.0f);  // man * 2^-24
    return sign ? -f : f;
  }
  if (exp == 31) {
    bits = sign | 0x7F800000u | (man << 13);
  } else {
    bits = sign | ((exp + 112) << 23) | (man << 13);
  }
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// ---- Unpackers: one weight row (nb blocks) -> u[d], dw[d/16], mw[d/16].
// Formulas: ggml-quants.c dequantize_row_* (see the table in quant_kernel.h).

inline void UnpackQ8_0(const uint8_t* row, int64_t nb, uint8_t* u, float* dw, float* mw) {
  const auto* x = reinterpret_cast<const quant::BlockQ8_0*>(row);
  for (int64_t b = 0; b < nb; ++b) {
    const float d = H2F(x[b].d);
    const uint8_t* qs = reinterpret_cast<const uint8_t*>(x[b].qs);
    uint8_t* o = u + 32 * b;
    for (int i = 0; i < 32; ++i) o[i] = static_cast<uint8_t>(qs[i] ^ 0x80u);
    dw[2 * b] = dw[2 * b + 1] = d;
    mw[2 * b] = mw[2 * b + 1] = -128.0f * d;
  }
}

inline void UnpackQ4_0(const uint8_t* row, int64_t nb, uint8_t* u, float* dw, float* mw) {
  const auto* x = reinterpret_cast<const quant::BlockQ4_0*>(row);
  for (int64_t b = 0; b < nb; ++b) {
    const float d = H2F(x[b].d);
    uint8_t* o = u + 32 * b;
    for (int i = 0; i < 16; ++i) {
      o[i] = x[b].qs[i] & 0x0F;
      o[i + 16] = x[b].qs[i] >> 4;
    }
    dw[2 * b] = dw[2 * b + 1] = d;
    mw[2 * b] = mw[2 * b + 1] = -8.0f * d;
  }
}

inline void UnpackQ4_1(const uint8_t* row, int64_t nb, uint8_t* u, float* dw, float* mw) {
  const auto* x = reinterpret_cast<const quant::BlockQ4_1*>(row);
  for (int64_t b = 0; b < nb; ++b) {
    const float d = H2F(x[b].d), m = H2F(x[b].m);
    uint8_t* o = u + 32 * b;
    for (int i = 0; i < 16; ++i) {
      o[i] = x[b].qs[i] & 0x0F;
      o[i + 16] = x[b].qs[i] >> 4;
    }
    dw[2 * b] = dw[2 * b + 1] = d;
    mw[2 * b] = mw[2 * b + 1] = m;
  }
}

// Q5_0 / Q5_1: bit j of qh (little-endian u32) is the 5th bit of value j.
inline void Unpack5(const uint8_t* qh4, const uint8_t* qs, uint8_t* o) {
  uint32_t qh;
  std::memcpy(&qh, qh4, 4);
  for (int i = 0; i < 16; ++i) {
    o[i] = static_cast<uint8_t>((qs[i] & 0x0F) | (((qh >> i) & 1u) << 4));
    o[i + 16] = static_cast<uint8_t>((qs[i] >> 4) | (((qh >> (i + 16)) & 1u) << 4));
  }
}

inline void UnpackQ5_0(const uint8_t* row, int64_t nb, uint8_t* u, float* dw, float* mw) {
  const auto* x = reinterpret_cast<const quant::BlockQ5_0*>(row);
  for (int64_t b = 0; b < nb; ++b) {
    const float d = H2F(x[b].d);
    Unpack5(x[b].qh, x[b].qs, u + 32 * b);
    dw[2 * b] = dw[2 * b + 1] = d;
    mw[2 * b] = mw[2 * b + 1] = -16.0f * d;
  }
}

inline void UnpackQ5_1(const uint8_t* row, int64_t nb, uint8_t* u, float* dw, float* mw) {
  const auto* x = reinterpret_cast<const quant::BlockQ5_1*>(row);
  for (int64_t b = 0; b < nb; ++b) {
    const float d = H2F(x[b].d), m = H2F(x[b].m);
    Unpack5(x[b].qh, x[b].qs, u + 32 * b);
    dw[2 * b] = dw[2 * b + 1] = d;
    mw[2 * b] = mw[2 * b + 1] = m;
  }
}

inline void UnpackIQ4_NL(const uint8_t* row, int64_t nb, uint8_t* u, float* dw, float* mw) {
  const auto* x = reinterpret_cast<const quant::BlockIQ4_NL*>(row);
  uint8_t table[16];
  for (int i = 0; i < 16; ++i) table[i] = static_cast<uint8_t>(quant::kValuesIQ4_NL[i] + 128);
  for (int64_t b = 0; b < nb; ++b) {
    const float d = H2F(x[b].d);
    uint8_t* o = u + 32 * b;
    for (int i = 0; i < 16; ++i) {
      o[i] = table[x[b].qs[i] & 0x0F];
      o[i + 16] = table[x[b].qs[i] >> 4];
    }
    dw[2 * b] = dw[2 * b + 1] = d;
    mw[2 * b] = mw[2 * b + 1] = -128.0f * d;
  }
}

// Q2_K: per half of 128 values, 4 shifts x (16 from qs[0..15], 16 from
// qs[16..31]); sub-block j uses scales[j] (low nibble scale, high min).
inline void UnpackQ2_K(const uint8_t* row, int64_t nb, uint8_t* u, float* dw, float* mw) {
  const auto* x = reinterpret_cast<const quant::BlockQ2_K*>(row);
  for (int64_t b = 0; b < nb; ++b) {
    const float d = H2F(x[b].d), dmin = H2F(x[b].dmin);
    uint8_t* o = u + 256 * b;
    float* sdw = dw + 16 * b;
    float* smw = mw + 16 * b;
    for (int j = 0; j < 16; ++j) {
      sdw[j] = d * static_cast<float>(x[b].scales[j] & 0x0F);
      smw[j] = -dmin * static_cast<float>(x[b].scales[j] >> 4);
    }
    for (int half = 0; half < 2; ++half) {
      const uint8_t* q = x[b].qs + 32 * half;
      uint8_t* oh = o + 128 * half;
      for (int s = 0; s < 4; ++s) {
        for (int l = 0; l < 32; ++l) oh[32 * s + l] = (q[l] >> (2 * s)) & 3;
      }
    }
  }
}

// Q3_K's 12 scale bytes -> 16 six-bit scales (biased by 32), one per byte
// of aux (ggml's kmask1 / kmask2 shuffle).
inline void Q3KScales(const uint8_t* scales12, uint32_t aux[4]) {
  std::memcpy(aux, scales12, 12);
  const uint32_t kmask1 = 0x03030303u, kmask2 = 0x0F0F0F0Fu;
  const uint32_t tmp = aux[2];
  aux[2] = ((aux[0] >> 4) & kmask2) | (((tmp >> 4) & kmask1) << 4);
  aux[3] = ((aux[1] >> 4) & kmask2) | (((tmp >> 6) & kmask1) << 4);
  aux[0] = (aux[0] & kmask2) | (((tmp >> 0) & kmask1) << 4);
  aux[1] = (aux[1] & kmask2) | (((tmp >> 2) & kmask1) << 4);
}

// Q3_K: 6-bit scales unpacked as ggml's kmask1/kmask2 shuffle; the high bit
// of value (half h, shift s, l) is bit (4 h + s) of hmask[l].
inline void UnpackQ3_K(const uint8_t* row, int64_t nb, uint8_t* u, float* dw, float* mw) {
  const auto* x = reinterpret_cast<const quant::BlockQ3_K*>(row);
  for (int64_t b = 0; b < nb; ++b) {
    const float d = H2F(x[b].d);
    uint32_t aux[4];
    Q3KScales(x[b].scales, aux);
    int8_t scales[16];
    std::memcpy(scales, aux, 16);
    float* sdw = dw + 16 * b;
    float* smw = mw + 16 * b;
    for (int j = 0; j < 16; ++j) {
      sdw[j] = d * static_cast<float>(scales[j] - 32);
      smw[j] = -4.0f * sdw[j];
    }
    uint8_t* o = u + 256 * b;
    for (int half = 0; half < 2; ++half) {
      const uint8_t* q = x[b].qs + 32 * half;
      uint8_t* oh = o + 128 * half;
      for (int s = 0; s < 4; ++s) {
        const int hbit = 4 * half + s;
        for (int l = 0; l < 32; ++l) {
          oh[32 * s + l] = static_cast<uint8_t>(((q[l] >> (2 * s)) & 3) |
                                                (((x[b].hmask[l] >> hbit) & 1) << 2));
        }
      }
    }
  }
}

// ggml get_scale_min_k4: 6-bit scale and min j (0..7) from the 12 bytes.
inline void ScaleMinK4(int j, const uint8_t* q, int* sc, int* m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = (q[j + 4] & 0x0F) | ((q[j - 4] >> 6) << 4);
    *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

inline void KScales(float d, float dmin, const uint8_t* scales, float* dw, float* mw) {
  for (int j = 0; j < 8; ++j) {
    int sc, m;
    ScaleMinK4(j, scales, &sc, &m);
    dw[2 * j] = dw[2 * j + 1] = d * static_cast<float>(sc);
    mw[2 * j] = mw[2 * j + 1] = -dmin * static_cast<float>(m);
  }
}

inline void UnpackQ4_K(const uint8_t* row, int64_t nb, uint8_t* u, float* dw, float* mw) {
  const auto* x = reinterpret_cast<const quant::BlockQ4_K*>(row);
  for (int64_t b = 0; b < nb; ++b) {
    KScales(H2F(x[b].d), H2F(x[b].dmin), x[b].scales, dw + 16 * b, mw + 16 * b);
    uint8_t* o = u + 256 * b;
    for (int g = 0; g < 4; ++g) {
      const uint8_t* q = x[b].qs + 32 * g;
      for (int l = 0; l < 32; ++l) {
        o[64 * g + l] = q[l] & 0x0F;
        o[64 * g + 32 + l] = q[l] >> 4;
      }
    }
  }
}

inline void UnpackQ5_K(const uint8_t* row, int64_t nb, uint8_t* u, float* dw, float* mw) {
  const auto* x = reinterpret_cast<const quant::BlockQ5_K*>(row);
  for (int64_t b = 0; b < nb; ++b) {
    KScales(H2F(x[b].d), H2F(x[b].dmin), x[b].scales, dw + 16 * b, mw + 16 * b);
    uint8_t* o = u + 256 * b;
    for (int g = 0; g < 4; ++g) {
      const uint8_t* q = x[b].qs + 32 * g;
      for (int l = 0; l < 32; ++l) {
        const uint8_t h = x[b].qh[l];
        o[64 * g + l] = static_cast<uint8_t>((q[l] & 0x0F) | (((h >> (2 * g)) & 1) << 4));
        o[64 * g + 32 + l] = static_cast<uint8_t>((q[l] >> 4) | (((h >> (2 * g + 1)) & 1) << 4));
      }
    }
  }
}

inline void UnpackQ6_K(const uint8_t* row, int64_t nb, uint8_t* u, float* dw, float* mw) {
  const auto* x = reinterpret_cast<const quant::BlockQ6_K*>(row);
  for (int64_t b = 0; b < nb; ++b) {
    const float d = H2F(x[b].d);
    float* sdw = dw + 16 * b;
    float* smw = mw + 16 * b;
    for (int j = 0; j < 16; ++j) {
      sdw[j] = d * static_cast<float>(x[b].scales[j]);
      smw[j] = -32.0f * sdw[j];
    }
    uint8_t* o = u + 256 * b;
    for (int half = 0; half < 2; ++half) {
      const uint8_t* ql = x[b].ql + 64 * half;
      const uint8_t* qh = x[b].qh + 32 * half;
      uint8_t* oh = o + 128 * half;
      for (int l = 0; l < 32; ++l) {
        oh[l] = static_cast<uint8_t>((ql[l] & 0x0F) | (((qh[l] >> 0) & 3) << 4));
        oh[l + 32] = static_cast<uint8_t>((ql[l + 32] & 0x0F) | (((qh[l] >> 2) & 3) << 4));
        oh[l + 64] = static_cast<uint8_t>((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4));
        oh[l + 96] = static_cast<uint8_t>((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4));
      }
    }
  }
}

inline void UnpackRow(quant::GgmlType type, const uint8_t* row, int64_t d, uint8_t* u, float* dw,
                      float* mw) {
  using quant::GgmlType;
  switch (type) {
    case GgmlType::kQ8_0: return UnpackQ8_0(row, d / 32, u, dw, mw);
    case GgmlType::kQ4_0: return UnpackQ4_0(row, d / 32, u, dw, mw);
    case GgmlType::kQ4_1: return UnpackQ4_1(row, d / 32, u, dw, mw);
    case GgmlType::kQ5_0: return UnpackQ5_0(row, d / 32, u, dw, mw);
    case GgmlType::kQ5_1: return UnpackQ5_1(row, d / 32, u, dw, mw);
    case GgmlType::kIQ4_NL: return UnpackIQ4_NL(row, d / 32, u, dw, mw);
    case GgmlType::kQ2_K: return UnpackQ2_K(row, d / 256, u, dw, mw);
    case GgmlType::kQ3_K: return UnpackQ3_K(row, d / 256, u, dw, mw);
    case GgmlType::kQ4_K: return UnpackQ4_K(row, d / 256, u, dw, mw);
    case GgmlType::kQ5_K: return UnpackQ5_K(row, d / 256, u, dw, mw);
    case GgmlType::kQ6_K: return UnpackQ6_K(row, d / 256, u, dw, mw);
    default: return;  // Create admits only the types above
  }
}

// What a register tile reads: nr unpacked weight rows and mb activation rows.
struct TileArgs {
  const uint8_t* u[kMaxTileRows];
  const float* dw[kMaxTileRows];
  const float* mw[kMaxTileRows];
  const uint8_t* act[4];  // activation rows (ActLayout)
  float* out[4];          // &logits[m][v] for each activation row
  int64_t d;
  int64_t min_sums;       // ActLayout offset of the sums the mw term uses (qs16)
};

// The driver: vocabulary rows [v0, v1) in groups of up to kMaxTileRows
// (unpacked once), activation rows in blocks of 64 and tiles of up to
// Isa::kMaxMb. Isa provides `template <int R, int MB> static void Tile(const
// TileArgs&)` and `static void Unpack(...)` (UnpackRow's signature; an ISA
// may specialise types and forward the rest to UnpackRow).
template <class Isa, int R>
inline void TileMb(int mb, const TileArgs& t) {
  switch (mb) {
    case 1: return Isa::template Tile<R, 1>(t);
    case 2: if constexpr (Isa::kMaxMb >= 2) return Isa::template Tile<R, 2>(t); else return;
    case 3: if constexpr (Isa::kMaxMb >= 3) return Isa::template Tile<R, 3>(t); else return;
    case 4: if constexpr (Isa::kMaxMb >= 4) return Isa::template Tile<R, 4>(t); else return;
    default: return;
  }
}

template <class Isa>
inline void RunKernel(const QuantTypeInfo& type, const uint8_t* acts, int64_t rows,
                      const uint8_t* w, int64_t d, int64_t v0, int64_t v1, float* out, int64_t ldo,
                      uint8_t* scratch) {
  const ActLayout al(d);
  const UnpackLayout ul(d);
  const int64_t row_bytes = d / type.block_size * type.block_bytes;
  constexpr int64_t kRowBlock = 64;
  TileArgs t;
  t.d = d;
  t.min_sums = al.qs16;
  for (int r = 0; r < kMaxTileRows; ++r) {
    uint8_t* base = scratch + r * ul.row_bytes;
    t.u[r] = base;
    t.dw[r] = reinterpret_cast<const float*>(base + ul.dw);
    t.mw[r] = reinterpret_cast<const float*>(base + ul.mw);
  }
  for (int64_t m0 = 0; m0 < rows; m0 += kRowBlock) {
    const int64_t mrows = Min64(kRowBlock, rows - m0);
    for (int64_t v = v0; v < v1; v += kMaxTileRows) {
      const int nr = static_cast<int>(Min64(kMaxTileRows, v1 - v));
      for (int r = 0; r < nr; ++r) {
        uint8_t* base = scratch + r * ul.row_bytes;
        Isa::Unpack(type.type, w + (v + r) * row_bytes, d, base,
                  reinterpret_cast<float*>(base + ul.dw), reinterpret_cast<float*>(base + ul.mw));
      }
      for (int64_t m = 0; m < mrows;) {
        const int mb = static_cast<int>(Min64(Isa::kMaxMb, mrows - m));
        for (int i = 0; i < mb; ++i) {
          t.act[i] = acts + (m0 + m + i) * al.bytes;
          t.out[i] = out + (m0 + m + i) * ldo + v;
        }
        switch (nr) {
          case 4: TileMb<Isa, 4>(mb, t); break;
          case 3: TileMb<Isa, 3>(mb, t); break;
          case 2: TileMb<Isa, 2>(mb, t); break;
          default: TileMb<Isa, 1>(mb, t); break;
        }
        m += mb;
      }
    }
  }
}

// The driver of the fused few-row kernels (quant_kernel_avx2.cc,
// quant_kernel_avx512vnni.cc): vocabulary rows [v0, v1) in tiles of
// K::RowsFor(MB) weight rows (the last ones one at a time) x MB input rows.
// K provides `static constexpr int RowsFor(int mb)` and
//   template <int R, int MB> static void Tile(const uint8_t* const* wrow,
//       const uint8_t* const* act, int64_t d, int64_t pf_ahead, float* mw_buf,
//       float* const* out)   (out[m][r]: logit of input row m, weight row r)
template <class K, int MB>
inline void FusedRows(const uint8_t* acts, const uint8_t* w, int64_t d, int64_t row_bytes,
                      int64_t v0, int64_t v1, float* out, int64_t ldo, float* mw_buf) {
  const ActLayout al(d);
  constexpr int kR = K::RowsFor(MB);
  const uint8_t* act[MB];
  for (int m = 0; m < MB; ++m) act[m] = acts + m * al.bytes;
  float tmp[MB][kR];
  float* o[MB];
  for (int m = 0; m < MB; ++m) o[m] = tmp[m];
  int64_t v = v0;
  for (; v + kR <= v1; v += kR) {
    const uint8_t* wr[kR];
    for (int r = 0; r < kR; ++r) wr[r] = w + (v + r) * row_bytes;
    K::template Tile<kR, MB>(wr, act, d, kR * row_bytes, mw_buf, o);
    for (int m = 0; m < MB; ++m)
      for (int r = 0; r < kR; ++r) out[m * ldo + v + r] = tmp[m][r];
  }
  for (; v < v1; ++v) {
    const uint8_t* wr[1] = {w + v * row_bytes};
    K::template Tile<1, MB>(wr, act, d, row_bytes, mw_buf, o);
    for (int m = 0; m < MB; ++m) out[m * ldo + v] = tmp[m][0];
  }
}

// rows in 1..8 (more are run as 8).
template <class K>
inline void FusedKernel(const uint8_t* acts, int64_t rows, const uint8_t* w, int64_t d,
                        int64_t row_bytes, int64_t v0, int64_t v1, float* out, int64_t ldo,
                        float* mw_buf) {
  switch (rows) {
    case 1: return FusedRows<K, 1>(acts, w, d, row_bytes, v0, v1, out, ldo, mw_buf);
    case 2: return FusedRows<K, 2>(acts, w, d, row_bytes, v0, v1, out, ldo, mw_buf);
    case 3: return FusedRows<K, 3>(acts, w, d, row_bytes, v0, v1, out, ldo, mw_buf);
    case 4: return FusedRows<K, 4>(acts, w, d, row_bytes, v0, v1, out, ldo, mw_buf);
    case 5: return FusedRows<K, 5>(acts, w, d, row_bytes, v0, v1, out, ldo, mw_buf);
    case 6: return FusedRows<K, 6>(acts, w, d, row_bytes, v0, v1, out, ldo, mw_buf);
    case 7: return FusedRows<K, 7>(acts, w, d, row_bytes, v0, v1, out, ldo, mw_buf);
    default: return FusedRows<K, 8>(acts, w, d, row_bytes, v0, v1, out, ldo, mw_buf);
  }
}

}  // namespace
}  // namespace vocabd

#endif  // VOCABD_LIB_HEAD_QUANT_KERNEL_IMPL_H_
