// The AVX512-VNNI path of the quantized LM-head kernel (quant_kernel.h).
// Compiled with -mavx512f -mavx512bw -mavx512vl -mavx512vnni (CMakeLists);
// reached only when QuantKernelIsaSupported(kAvx512Vnni).
//
// Per 64 codes (one zmm) and tile element (weight row r, input row m):
//
//   p      = vpdpbusd(0, u[r][k..k+63], a[m][k..k+63])   16 int32 lanes, lane
//            i = sum of 4 products u*a at k + 4i .. k + 4i + 3 (exact)
//   scale  = dw[r] lanes (lane i: sub-block (k + 4i) / 16)
//          x dal[m] lanes (lane i: activation block (k + 4i) / 32)
//   acc   += float(p) * scale
//
// then logit = sum of acc's lanes + sum_j mw[r][j] * S[m][j].
#include <immintrin.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "lib/head/quant_kernel.h"
#include "lib/head/quant_kernel_impl.h"

namespace vocabd {
namespace {

// The maskz forms with a full mask are the plain instructions; the unmasked
// intrinsics trip GCC 12's -Wuninitialized (_mm512_undefined_ps).
constexpr __mmask16 kAll = 0xFFFF;

// Sum of the 16 lanes in a fixed tree: halves, quarters, pairs, lanes.
inline float Reduce16(__m512 v) {
  v = _mm512_add_ps(v, _mm512_maskz_shuffle_f32x4(kAll, v, v, 0x4E));
  v = _mm512_add_ps(v, _mm512_maskz_shuffle_f32x4(kAll, v, v, 0xB1));
  v = _mm512_add_ps(v, _mm512_maskz_permute_ps(kAll, v, 0x4E));
  v = _mm512_add_ps(v, _mm512_maskz_permute_ps(kAll, v, 0xB1));
  return _mm512_cvtss_f32(v);
}

// The largest of the 16 lanes (any order gives the same value).
inline float Max16(__m512 v) {
  v = _mm512_maskz_max_ps(kAll, v, _mm512_maskz_shuffle_f32x4(kAll, v, v, 0x4E));
  v = _mm512_maskz_max_ps(kAll, v, _mm512_maskz_shuffle_f32x4(kAll, v, v, 0xB1));
  v = _mm512_maskz_max_ps(kAll, v, _mm512_maskz_permute_ps(kAll, v, 0x4E));
  v = _mm512_maskz_max_ps(kAll, v, _mm512_maskz_permute_ps(kAll, v, 0xB1));
  return _mm512_cvtss_f32(v);
}
// Sum of the 16 int32 lanes (exact).
inline int32_t SumI16(__m512i v) {
  v = _mm512_add_epi32(v, _mm512_maskz_shuffle_i32x4(kAll, v, v, 0x4E));
  v = _mm512_add_epi32(v, _mm512_maskz_shuffle_i32x4(kAll, v, v, 0xB1));
  v = _mm512_add_epi32(v, _mm512_maskz_shuffle_epi32(kAll, v, _MM_PERM_BADC));
  v = _mm512_add_epi32(v, _mm512_maskz_shuffle_epi32(kAll, v, _MM_PERM_CDAB));
  return _mm_cvtsi128_si32(_mm512_maskz_extracti32x4_epi32(0xF, v, 0));
}

// ---- AVX-512 unpackers of the hot types (same results as UnpackRow's).

inline float F16(uint16_t h) { return _cvtsh_ss(h); }

// Q8_0, 16 blocks (512 codes) at a time where possible: codes XOR 0x80, the
// 16 f16 scales gathered (34-byte stride) and converted at once, each
// written twice (two sub-blocks of 16 per block).
inline void UnpackQ8_0Avx512(const uint8_t* row, int64_t nb, uint8_t* u, float* dw, float* mw) {
  const auto* x = reinterpret_cast<const quant::BlockQ8_0*>(row);
  const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
  const __m512i dup_lo = _mm512_set_epi32(7, 7, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0);
  const __m512i dup_hi = _mm512_set_epi32(15, 15, 14, 14, 13, 13, 12, 12, 11, 11, 10, 10, 9, 9, 8, 8);
  const __m512i offsets = _mm512_mullo_epi32(
      _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0), _mm512_set1_epi32(34));
  const __m512 m128 = _mm512_set1_ps(-128.0f);
  int64_t b = 0;
  for (; b + 16 <= nb; b += 16) {
    for (int i = 0; i < 16; ++i) {
      const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b + i].qs));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(u + 32 * (b + i)), _mm256_xor_si256(q, flip));
    }
    // The 4 bytes at each block start: d in the low 16 bits.
    const __m512i raw =
        _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), kAll, offsets, x + b, 1);
    const __m512 d = _mm512_maskz_cvtph_ps(kAll, _mm512_maskz_cvtepi32_epi16(kAll, raw));
    const __m512 lo = _mm512_maskz_permutexvar_ps(kAll, dup_lo, d);
    const __m512 hi = _mm512_maskz_permutexvar_ps(kAll, dup_hi, d);
    _mm512_storeu_ps(dw + 2 * b, lo);
    _mm512_storeu_ps(dw + 2 * b + 16, hi);
    _mm512_storeu_ps(mw + 2 * b, _mm512_mul_ps(lo, m128));
    _mm512_storeu_ps(mw + 2 * b + 16, _mm512_mul_ps(hi, m128));
  }
  if (b < nb) UnpackQ8_0(row + b * sizeof(quant::BlockQ8_0), nb - b, u + 32 * b, dw + 2 * b, mw + 2 * b);
}

// Q4_K: scales/mins by ggml's 32-bit kmask shuffle (8 six-bit scales in
// bytes 0-7, mins in 8-15), widened to floats and duplicated per 16; codes
// split into low and high nibbles.
inline void UnpackQ4_KAvx512(const uint8_t* row, int64_t nb, uint8_t* u, float* dw, float* mw) {
  const auto* x = reinterpret_cast<const quant::BlockQ4_K*>(row);
  const __m512i dup = _mm512_set_epi32(7, 7, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0);
  const __m512i dup8 =
      _mm512_set_epi32(15, 15, 14, 14, 13, 13, 12, 12, 11, 11, 10, 10, 9, 9, 8, 8);
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  for (int64_t b = 0; b < nb; ++b) {
    uint32_t s[4];
    std::memcpy(s, x[b].scales, 12);
    const uint32_t kmask1 = 0x3F3F3F3Fu, kmask2 = 0x0F0F0F0Fu, kmask3 = 0x03030303u;
    s[3] = ((s[2] >> 4) & kmask2) | (((s[1] >> 6) & kmask3) << 4);
    const uint32_t m_lo = s[1] & kmask1;
    s[1] = (s[2] & kmask2) | (((s[0] >> 6) & kmask3) << 4);
    s[2] = m_lo;
    s[0] &= kmask1;
    // Lanes 0-7: the 8 scales, 8-15: the 8 mins; times d and -dmin.
    const __m512 scmn = _mm512_maskz_cvtepi32_ps(
        kAll, _mm512_maskz_cvtepu8_epi32(kAll, _mm_loadu_si128(reinterpret_cast<const __m128i*>(s))));
    const __m512 factor = _mm512_mask_blend_ps(0xFF00, _mm512_set1_ps(F16(x[b].d)),
                                               _mm512_set1_ps(-F16(x[b].dmin)));
    const __m512 v = _mm512_mul_ps(scmn, factor);
    _mm512_storeu_ps(dw + 16 * b, _mm512_maskz_permutexvar_ps(kAll, dup, v));
    _mm512_storeu_ps(mw + 16 * b, _mm512_maskz_permutexvar_ps(kAll, dup8, v));
    uint8_t* o = u + 256 * b;
    for (int g = 0; g < 4; ++g) {
      const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].qs + 32 * g));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(o + 64 * g), _mm256_and_si256(q, low4));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(o + 64 * g + 32),
                          _mm256_and_si256(_mm256_srli_epi16(q, 4), low4));
    }
  }
}

// Q6_K: per half (128 codes) ql's 64 bytes give the low nibbles of codes
// 0-63 (ql & 15) and 64-127 (ql >> 4); qh's 32 bytes, shifted by 0/2 and
// 4/6, give the 2 high bits of each quarter.
inline void UnpackQ6_KAvx512(const uint8_t* row, int64_t nb, uint8_t* u, float* dw, float* mw) {
  const auto* x = reinterpret_cast<const quant::BlockQ6_K*>(row);
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  const __m512i two = _mm512_set1_epi8(0x03);
  const __m512i shift02 = _mm512_maskz_mov_epi16(0xFFFF0000u, _mm512_set1_epi16(2));
  const __m512 m32 = _mm512_set1_ps(-32.0f);
  for (int64_t b = 0; b < nb; ++b) {
    const __m512 sc = _mm512_maskz_cvtepi32_ps(kAll, _mm512_maskz_cvtepi8_epi32(
        kAll, _mm_loadu_si128(reinterpret_cast<const __m128i*>(x[b].scales))));
    const __m512 dv = _mm512_mul_ps(sc, _mm512_set1_ps(F16(x[b].d)));
    _mm512_storeu_ps(dw + 16 * b, dv);
    _mm512_storeu_ps(mw + 16 * b, _mm512_mul_ps(dv, m32));
    for (int half = 0; half < 2; ++half) {
      const __m512i ql = _mm512_loadu_si512(x[b].ql + 64 * half);
      // qh in both halves, the upper one shifted right by 2.
      const __m512i qh2 = _mm512_maskz_broadcast_i64x4(
          0xFF, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].qh + 32 * half)));
      const __m512i qh01 = _mm512_srlv_epi16(qh2, shift02);
      const __m512i qh23 = _mm512_srli_epi16(qh01, 4);
      const __m512i hi01 = _mm512_slli_epi16(_mm512_and_si512(qh01, two), 4);
      const __m512i hi23 = _mm512_slli_epi16(_mm512_and_si512(qh23, two), 4);
      uint8_t* o = u + 256 * b + 128 * half;
      _mm512_storeu_si512(o, _mm512_or_si512(_mm512_and_si512(ql, low4), hi01));
      _mm512_storeu_si512(o + 64,
                          _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), low4), hi23));
    }
  }
}

struct Avx512Vnni {
  static void Unpack(quant::GgmlType type, const uint8_t* row, int64_t d, uint8_t* u, float* dw,
                     float* mw) {
    switch (type) {
      case quant::GgmlType::kQ8_0: return UnpackQ8_0Avx512(row, d / 32, u, dw, mw);
      case quant::GgmlType::kQ4_K: return UnpackQ4_KAvx512(row, d / 256, u, dw, mw);
      case quant::GgmlType::kQ6_K: return UnpackQ6_KAvx512(row, d / 256, u, dw, mw);
      default: return UnpackRow(type, row, d, u, dw, mw);
    }
  }
  static constexpr int kMaxMb = 4;
  template <int R, int MB>
  static void Tile(const TileArgs& t) {
    const ActLayout al(t.d);
    const int64_t d = t.d;
    __m512 acc[R][MB];
    for (int r = 0; r < R; ++r)
      for (int m = 0; m < MB; ++m) acc[r][m] = _mm512_setzero_ps();
    // Lane i of the scale vector takes dw[(k + 4 i) / 16]: 4 lanes each.
    const __m512i idx = _mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0);
    int64_t k = 0;
    for (; k + 64 <= d; k += 64) {
      __m512i wq[R];
      __m512 ws[R];
      for (int r = 0; r < R; ++r) {
        wq[r] = _mm512_loadu_si512(t.u[r] + k);
        ws[r] = _mm512_maskz_permutexvar_ps(kAll, idx, _mm512_zextps128_ps512(_mm_loadu_ps(t.dw[r] + k / 16)));
      }
      for (int m = 0; m < MB; ++m) {
        const __m512i a = _mm512_loadu_si512(t.act[m] + k);
        const __m512 sa =
            _mm512_loadu_ps(reinterpret_cast<const float*>(t.act[m] + al.dal) + k / 4);
        for (int r = 0; r < R; ++r) {
          const __m512i p = _mm512_dpbusd_epi32(_mm512_setzero_si512(), wq[r], a);
          acc[r][m] = _mm512_fmadd_ps(_mm512_maskz_cvtepi32_ps(kAll, p), _mm512_mul_ps(ws[r], sa), acc[r][m]);
        }
      }
    }
    if (k < d) {  // 32 codes left (d is a multiple of 32): the low half
      const __mmask64 kb = 0xFFFFFFFFull;
      __m512i wq[R];
      __m512 ws[R];
      for (int r = 0; r < R; ++r) {
        wq[r] = _mm512_maskz_loadu_epi8(kb, t.u[r] + k);
        ws[r] = _mm512_maskz_permutexvar_ps(
            kAll, idx, _mm512_zextps128_ps512(_mm_maskz_loadu_ps(0x3, t.dw[r] + k / 16)));
      }
      for (int m = 0; m < MB; ++m) {
        const __m512i a = _mm512_maskz_loadu_epi8(kb, t.act[m] + k);
        const __m512 sa = _mm512_maskz_loadu_ps(
            0xFF, reinterpret_cast<const float*>(t.act[m] + al.dal) + k / 4);
        for (int r = 0; r < R; ++r) {
          const __m512i p = _mm512_dpbusd_epi32(_mm512_setzero_si512(), wq[r], a);
          acc[r][m] = _mm512_fmadd_ps(_mm512_maskz_cvtepi32_ps(kAll, p), _mm512_mul_ps(ws[r], sa), acc[r][m]);
        }
      }
    }
    // The offset / min term: sum_j mw[j] * S[j] over d / 16 sub-blocks.
    const int64_t nj = d / 16;
    __m512 macc[R][MB];
    for (int r = 0; r < R; ++r)
      for (int m = 0; m < MB; ++m) macc[r][m] = _mm512_setzero_ps();
    int64_t j = 0;
    for (; j < nj; j += 16) {
      const __mmask16 mk = nj - j >= 16 ? static_cast<__mmask16>(0xFFFF)
                                        : static_cast<__mmask16>((1u << (nj - j)) - 1);
      __m512 mwv[R];
      for (int r = 0; r < R; ++r) mwv[r] = _mm512_maskz_loadu_ps(mk, t.mw[r] + j);
      for (int m = 0; m < MB; ++m) {
        const __m512 s =
            _mm512_maskz_loadu_ps(mk, reinterpret_cast<const float*>(t.act[m] + t.min_sums) + j);
        for (int r = 0; r < R; ++r) macc[r][m] = _mm512_fmadd_ps(mwv[r], s, macc[r][m]);
      }
    }
    for (int m = 0; m < MB; ++m)
      for (int r = 0; r < R; ++r) t.out[m][r] = Reduce16(acc[r][m]) + Reduce16(macc[r][m]);
  }
};


// ---- The fused few-row kernel (every served type, d a multiple of 256;
// M <= few_rows_max): the
// same arithmetic as Avx512Vnni::Tile, lane for lane and in the same order
// (so its logits are bit-identical to the unpacking kernel's), but the
// canonical codes u of each 64-code chunk are made in a register straight
// from the blocks and consumed at once: no unpack pass, no store and reload
// of every code through L1. Per 256 codes (one k-quant super-block, eight
// Q8_0 blocks) and weight row r:
//
//   dwv[r] = 16 scales dw[j] (j = 16-code sub-block),  mwv[r] = 16 offsets
//   chunk c = 0..3:  u = codes 64c..64c+63 (u8, in register)
//                    ws = dwv lanes 4c + i/4 (lane i)
//                    acc[r][m] += float(vpdpbusd(0, u, a[m])) * (ws * dal[m])
//   mwv is kept in mw_out (scratch) for the offset term after the loop,
//   summed exactly as Tile sums it (16 sub-blocks per fma).

// The f16 field at byte `off` of each of 8 consecutive blocks, as 16
// floats: block c's value in lanes 2c and 2c + 1 (one per 16 codes).
template <class Block>
inline __m512 DupHalves(const uint8_t* sb, size_t off) {
  auto h = [&](int c) {
    uint16_t v;
    std::memcpy(&v, sb + c * sizeof(Block) + off, 2);
    return static_cast<short>(v);
  };
  const __m128i h8 = _mm_setr_epi16(h(0), h(1), h(2), h(3), h(4), h(5), h(6), h(7));
  const __m512i dup = _mm512_set_epi32(7, 7, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0);
  return _mm512_maskz_permutexvar_ps(
      kAll, dup, _mm512_maskz_cvtph_ps(kAll, _mm256_inserti128_si256(_mm256_setzero_si256(), h8, 0)));
}

struct FusedQ8_0 {
  static constexpr int64_t kSuperBytes = 8 * 34;  // 8 blocks of 32 codes
  // The 16 per-16 scales of 8 blocks (each block's d twice).
  static inline void Scales(const uint8_t* sb, __m512* dwv, __m512* mwv) {
    *dwv = DupHalves<quant::BlockQ8_0>(sb, offsetof(quant::BlockQ8_0, d));
    *mwv = _mm512_mul_ps(*dwv, _mm512_set1_ps(-128.0f));
  }
  template <int C>
  static inline __m512i Codes(const uint8_t* sb) {
    const auto* x = reinterpret_cast<const quant::BlockQ8_0*>(sb);
    // Bytes 0-31: block 2C's codes, 32-63: block 2C+1's (masked loads).
    const __m512i lo = _mm512_maskz_loadu_epi8(0xFFFFFFFFull, x[2 * C].qs);
    // Lanes 32-63 of a load at (block 2C+1's codes - 32): the address is formed
    // from the row's bytes (sb), not from the codes array, which it precedes.
    const uint8_t* hi = sb + (2 * C + 1) * sizeof(quant::BlockQ8_0) +
                        offsetof(quant::BlockQ8_0, qs) - 32;
    const __m512i q = _mm512_mask_loadu_epi8(lo, 0xFFFFFFFF00000000ull, hi);
    return _mm512_xor_si512(q, _mm512_set1_epi8(static_cast<char>(0x80)));
  }
};

struct FusedQ4_K {
  static constexpr int64_t kSuperBytes = 144;
  static inline void Scales(const uint8_t* sb, __m512* dwv, __m512* mwv) {
    const auto* x = reinterpret_cast<const quant::BlockQ4_K*>(sb);
    uint32_t s[4];
    std::memcpy(s, x->scales, 12);
    const uint32_t kmask1 = 0x3F3F3F3Fu, kmask2 = 0x0F0F0F0Fu, kmask3 = 0x03030303u;
    s[3] = ((s[2] >> 4) & kmask2) | (((s[1] >> 6) & kmask3) << 4);
    const uint32_t m_lo = s[1] & kmask1;
    s[1] = (s[2] & kmask2) | (((s[0] >> 6) & kmask3) << 4);
    s[2] = m_lo;
    s[0] &= kmask1;
    const __m512 scmn = _mm512_maskz_cvtepi32_ps(
        kAll, _mm512_maskz_cvtepu8_epi32(kAll, _mm_loadu_si128(reinterpret_cast<const __m128i*>(s))));
    const __m512 factor =
        _mm512_mask_blend_ps(0xFF00, _mm512_set1_ps(F16(x->d)), _mm512_set1_ps(-F16(x->dmin)));
    const __m512 v = _mm512_mul_ps(scmn, factor);
    const __m512i dup = _mm512_set_epi32(7, 7, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0);
    const __m512i dup8 =
        _mm512_set_epi32(15, 15, 14, 14, 13, 13, 12, 12, 11, 11, 10, 10, 9, 9, 8, 8);
    *dwv = _mm512_maskz_permutexvar_ps(kAll, dup, v);
    *mwv = _mm512_maskz_permutexvar_ps(kAll, dup8, v);
  }
  // Chunk C: the 32 bytes qs[32C..]: low nibbles are codes 64C..64C+31,
  // high nibbles 64C+32..64C+63.
  template <int C>
  static inline __m512i Codes(const uint8_t* sb) {
    const auto* x = reinterpret_cast<const quant::BlockQ4_K*>(sb);
    const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x->qs + 32 * C));
    const __m512i qq = _mm512_maskz_broadcast_i64x4(0xFF, q);
    const __m512i sh = _mm512_mask_srli_epi16(qq, 0xFFFF0000u, qq, 4);
    return _mm512_and_si512(sh, _mm512_set1_epi8(0x0F));
  }
};

// Q5_K, 176 B: [d:f16][dmin:f16][scales:12 B][qh:32 B][qs:128 B], scales
// and mins as Q4_K; code 32c + l (c = 0..7) = Q4_K's nibble | (bit c of
// qh[l]) << 4: chunk C = Q4_K's chunk | qh's bits 2C (lower half) and
// 2C + 1 (upper) moved to bit 4.
struct FusedQ5_K {
  static constexpr int64_t kSuperBytes = 176;
  static inline void Scales(const uint8_t* sb, __m512* dwv, __m512* mwv) {
    FusedQ4_K::Scales(sb, dwv, mwv);  // d, dmin, scales: the same 16 bytes
  }
  template <int C>
  static inline __m512i Codes(const uint8_t* sb) {
    const auto* x = reinterpret_cast<const quant::BlockQ5_K*>(sb);
    const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x->qs + 32 * C));
    const __m512i qq = _mm512_maskz_broadcast_i64x4(0xFF, q);
    const __m512i nib = _mm512_and_si512(_mm512_mask_srli_epi16(qq, 0xFFFF0000u, qq, 4), _mm512_set1_epi8(0x0F));
    const __m512i qh = _mm512_maskz_broadcast_i64x4(
        0xFF, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x->qh)));
    const __m512i shift = _mm512_mask_blend_epi16(0xFFFF0000u, _mm512_set1_epi16(2 * C),
                                                  _mm512_set1_epi16(2 * C + 1));
    const __m512i hi = _mm512_slli_epi16(
        _mm512_and_si512(_mm512_srlv_epi16(qh, shift), _mm512_set1_epi8(0x01)), 4);
    return _mm512_or_si512(nib, hi);
  }
};

struct FusedQ6_K {
  static constexpr int64_t kSuperBytes = 210;
  static inline void Scales(const uint8_t* sb, __m512* dwv, __m512* mwv) {
    const auto* x = reinterpret_cast<const quant::BlockQ6_K*>(sb);
    const __m512 sc = _mm512_maskz_cvtepi32_ps(kAll, _mm512_maskz_cvtepi8_epi32(
        kAll, _mm_loadu_si128(reinterpret_cast<const __m128i*>(x->scales))));
    *dwv = _mm512_mul_ps(sc, _mm512_set1_ps(F16(x->d)));
    *mwv = _mm512_mul_ps(*dwv, _mm512_set1_ps(-32.0f));
  }
  // Chunks 2h and 2h+1 come from half h: ql[64h..64h+63] low / high nibbles
  // with the 2-bit fields of qh[32h..32h+31] (shift 0/2 and 4/6).
  template <int C>
  static inline __m512i Codes(const uint8_t* sb) {
    const auto* x = reinterpret_cast<const quant::BlockQ6_K*>(sb);
    constexpr int half = C / 2;
    const __m512i ql = _mm512_loadu_si512(x->ql + 64 * half);
    const __m512i qh2 = _mm512_maskz_broadcast_i64x4(
        0xFF, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x->qh + 32 * half)));
    const __m512i shift02 = _mm512_maskz_mov_epi16(0xFFFF0000u, _mm512_set1_epi16(2));
    __m512i qh01 = _mm512_srlv_epi16(qh2, shift02);
    const __m512i two = _mm512_set1_epi8(0x03);
    const __m512i low4 = _mm512_set1_epi8(0x0F);
    if constexpr (C % 2 == 0) {
      const __m512i hi01 = _mm512_slli_epi16(_mm512_and_si512(qh01, two), 4);
      return _mm512_or_si512(_mm512_and_si512(ql, low4), hi01);
    } else {
      const __m512i hi23 = _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(qh01, 4), two), 4);
      return _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), low4), hi23);
    }
  }
};

// The 32-code block types Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL: 8 blocks per
// 256 codes, chunk C = blocks 2C and 2C + 1 (codes j of block 2C in bytes
// j, of block 2C + 1 in bytes 32 + j):
//
//   qs (16 B) of A, A, B, B in the four 128-bit lanes; lanes 1 and 3
//   shifted right by 4: & 15 gives the nibbles (bytes 0-15 = low nibbles
//   = codes 0-15, 16-31 = high nibbles = codes 16-31, per block)
//   Q5_0 / Q5_1: | 0x10 where bit j of qh(A) | qh(B) << 32 is set (a
//   64-bit byte mask, vpmovm2b-like maskz_mov)
//   IQ4_NL: vpshufb of kvalues_iq4nl + 128 by the nibble
//
// Scales per 16 codes: the block's d twice; offsets mw as UnpackQ4_0 ..
// UnpackIQ4_NL (quant_kernel_impl.h): kOff * d (Q4_0 -8, Q5_0 -16, IQ4_NL
// -128) or the block's m (Q4_1, Q5_1).
template <class Block, int kOff, bool kFifthBit, bool kTable>
struct FusedLegacy {
  static constexpr int64_t kSuperBytes = 8 * static_cast<int64_t>(sizeof(Block));
  static inline void Scales(const uint8_t* sb, __m512* dwv, __m512* mwv) {
    *dwv = DupHalves<Block>(sb, offsetof(Block, d));
    if constexpr (kOff != 0) {
      *mwv = _mm512_mul_ps(*dwv, _mm512_set1_ps(static_cast<float>(kOff)));
    } else {
      *mwv = DupHalves<Block>(sb, offsetof(Block, m));
    }
  }
  template <int C>
  static inline __m512i Codes(const uint8_t* sb) {
    const auto* x = reinterpret_cast<const Block*>(sb);
    const Block& a = x[2 * C];
    const Block& b = x[2 * C + 1];
    const __m256i qa = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a.qs)));
    const __m256i qb = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs)));
    const __m512i q = _mm512_maskz_inserti64x4(0xFF, _mm512_maskz_broadcast_i64x4(0xFF, qa), qb, 1);
    const __m512i nib = _mm512_and_si512(_mm512_maskz_srlv_epi64(0xFF, q, _mm512_set_epi64(4, 4, 0, 0, 4, 4, 0, 0)),
                                         _mm512_set1_epi8(0x0F));
    if constexpr (kTable) {
      // kvalues + 128 as unsigned bytes: XOR 0x80 (as Q8_0's codes).
      const __m128i kv = _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(quant::kValuesIQ4_NL)),
                                       _mm_set1_epi8(static_cast<char>(0x80)));
      return _mm512_maskz_shuffle_epi8(~__mmask64{0}, _mm512_maskz_broadcast_i32x4(kAll, kv), nib);
    } else if constexpr (kFifthBit) {
      uint32_t ha, hb;
      std::memcpy(&ha, a.qh, 4);
      std::memcpy(&hb, b.qh, 4);
      const __mmask64 bits = static_cast<__mmask64>(ha) | (static_cast<__mmask64>(hb) << 32);
      return _mm512_or_si512(nib, _mm512_maskz_mov_epi8(bits, _mm512_set1_epi8(0x10)));
    } else {
      return nib;
    }
  }
};
using FusedQ4_0 = FusedLegacy<quant::BlockQ4_0, -8, false, false>;
using FusedQ4_1 = FusedLegacy<quant::BlockQ4_1, 0, false, false>;
using FusedQ5_0 = FusedLegacy<quant::BlockQ5_0, -16, true, false>;
using FusedQ5_1 = FusedLegacy<quant::BlockQ5_1, 0, true, false>;
using FusedIQ4_NL = FusedLegacy<quant::BlockIQ4_NL, -128, false, true>;

// Q2_K (84 B: [scales:16 B][qs:64 B][d:f16][dmin:f16]) and Q3_K (110 B:
// [hmask:32 B][qs:64 B][scales:12 B][d:f16]): codes
//   u[128 h + 32 s + l] = (qs[32 h + l] >> 2 s) & 3             (Q2_K)
//                         | (bit 4 h + s of hmask[l]) << 2       (Q3_K)
// so chunk C (codes 64C..64C+63; h = C / 2, s = 2 (C % 2) and + 1) is
// qs[32h..32h+31] in both 256-bit halves, shifted right by 2s (lower half)
// and 2s + 2 (upper), masked to 2 bits; Q3_K ORs in hmask's bits 4h + s
// (lower) and 4h + s + 1 (upper) moved to bit 2.
//   Q2_K: dw[j] = d * (scales[j] & 15), mw[j] = -dmin * (scales[j] >> 4)
//   Q3_K: dw[j] = d * (s6[j] - 32) (ggml's kmask shuffle), mw[j] = -4 dw[j]
// as UnpackQ2_K / UnpackQ3_K (quant_kernel_impl.h) make them.
template <int C>
inline __m512i TwoBitFields(const uint8_t* qs64) {
  const __m512i q = _mm512_maskz_broadcast_i64x4(
      0xFF, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs64 + 32 * (C / 2))));
  constexpr int s = 2 * (C % 2);
  const __m512i shift = _mm512_mask_blend_epi16(0xFFFF0000u, _mm512_set1_epi16(2 * s),
                                                _mm512_set1_epi16(2 * s + 2));
  return _mm512_and_si512(_mm512_srlv_epi16(q, shift), _mm512_set1_epi8(0x03));
}

struct FusedQ2_K {
  static constexpr int64_t kSuperBytes = 84;
  static inline void Scales(const uint8_t* sb, __m512* dwv, __m512* mwv) {
    const auto* x = reinterpret_cast<const quant::BlockQ2_K*>(sb);
    const __m512i s = _mm512_maskz_cvtepu8_epi32(
        kAll, _mm_loadu_si128(reinterpret_cast<const __m128i*>(x->scales)));
    const __m512 sc = _mm512_maskz_cvtepi32_ps(kAll, _mm512_and_si512(s, _mm512_set1_epi32(15)));
    const __m512 mn = _mm512_maskz_cvtepi32_ps(kAll, _mm512_maskz_srli_epi32(kAll, s, 4));
    *dwv = _mm512_mul_ps(_mm512_set1_ps(F16(x->d)), sc);
    *mwv = _mm512_mul_ps(_mm512_set1_ps(-F16(x->dmin)), mn);
  }
  template <int C>
  static inline __m512i Codes(const uint8_t* sb) {
    return TwoBitFields<C>(reinterpret_cast<const quant::BlockQ2_K*>(sb)->qs);
  }
};

struct FusedQ3_K {
  static constexpr int64_t kSuperBytes = 110;
  static inline void Scales(const uint8_t* sb, __m512* dwv, __m512* mwv) {
    const auto* x = reinterpret_cast<const quant::BlockQ3_K*>(sb);
    uint32_t aux[4];
    Q3KScales(x->scales, aux);
    // From registers (a 16-byte load of 4-byte stores fails store forwarding).
    const __m128i s6 = _mm_setr_epi32(static_cast<int>(aux[0]), static_cast<int>(aux[1]),
                                      static_cast<int>(aux[2]), static_cast<int>(aux[3]));
    const __m512 sc = _mm512_maskz_cvtepi32_ps(
        kAll, _mm512_sub_epi32(_mm512_maskz_cvtepu8_epi32(kAll, s6), _mm512_set1_epi32(32)));
    *dwv = _mm512_mul_ps(_mm512_set1_ps(F16(x->d)), sc);
    *mwv = _mm512_mul_ps(*dwv, _mm512_set1_ps(-4.0f));
  }
  template <int C>
  static inline __m512i Codes(const uint8_t* sb) {
    const auto* x = reinterpret_cast<const quant::BlockQ3_K*>(sb);
    const __m512i hm = _mm512_maskz_broadcast_i64x4(
        0xFF, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x->hmask)));
    constexpr int bit = 4 * (C / 2) + 2 * (C % 2);
    const __m512i shift = _mm512_mask_blend_epi16(0xFFFF0000u, _mm512_set1_epi16(bit),
                                                  _mm512_set1_epi16(bit + 1));
    const __m512i hi = _mm512_slli_epi16(
        _mm512_and_si512(_mm512_srlv_epi16(hm, shift), _mm512_set1_epi8(0x01)), 2);
    return _mm512_or_si512(TwoBitFields<C>(x->qs), hi);
  }
};

// R weight rows x MB activation rows; d a multiple of 256. mw_buf: R x d/16
// floats of scratch.
template <class T, int R, int MB, int C>
inline void FusedChunk(const uint8_t* const* sb, const __m512* dwv, const uint8_t* const* act,
                       const float* const* dal, int64_t k, __m512 (&acc)[R][MB]) {
  const __m512i idx = _mm512_set_epi32(3 + 4 * C, 3 + 4 * C, 3 + 4 * C, 3 + 4 * C, 2 + 4 * C,
                                       2 + 4 * C, 2 + 4 * C, 2 + 4 * C, 1 + 4 * C, 1 + 4 * C,
                                       1 + 4 * C, 1 + 4 * C, 4 * C, 4 * C, 4 * C, 4 * C);
  __m512i wq[R];
  __m512 ws[R];
  for (int r = 0; r < R; ++r) {
    wq[r] = T::template Codes<C>(sb[r]);
    ws[r] = _mm512_maskz_permutexvar_ps(kAll, idx, dwv[r]);
  }
  const int64_t kc = k + 64 * C;
  for (int m = 0; m < MB; ++m) {
    const __m512i a = _mm512_loadu_si512(act[m] + kc);
    const __m512 sa = _mm512_loadu_ps(dal[m] + kc / 4);
    for (int r = 0; r < R; ++r) {
      const __m512i p = _mm512_dpbusd_epi32(_mm512_setzero_si512(), wq[r], a);
      acc[r][m] =
          _mm512_fmadd_ps(_mm512_maskz_cvtepi32_ps(kAll, p), _mm512_mul_ps(ws[r], sa), acc[r][m]);
    }
  }
}

// Prefetch: each row of a tile is only a few KiB, so the hardware stream
// prefetchers restart R short streams per tile and the first lines of every
// row miss. Per super-block, the same bytes of the next tile's rows
// (pf_ahead = R rows further) are prefetched: one tile (9-17 KiB) ahead.
template <class T, int R, int MB>
inline void FusedTile(const uint8_t* const* wrow, const uint8_t* const* act, int64_t d,
                      int64_t pf_ahead, float* mw_buf, float* const* out) {
  const ActLayout al(d);
  const float* dal[MB];
  for (int m = 0; m < MB; ++m) dal[m] = reinterpret_cast<const float*>(act[m] + al.dal);
  __m512 acc[R][MB];
  for (int r = 0; r < R; ++r)
    for (int m = 0; m < MB; ++m) acc[r][m] = _mm512_setzero_ps();
  const int64_t nsb = d / 256;
  for (int64_t s = 0; s < nsb; ++s) {
    const uint8_t* sb[R];
    __m512 dwv[R];
    for (int r = 0; r < R; ++r) {
      sb[r] = wrow[r] + s * T::kSuperBytes;
      const char* pf = reinterpret_cast<const char*>(sb[r] + pf_ahead);
      for (int64_t off = 0; off < T::kSuperBytes; off += 64) _mm_prefetch(pf + off, _MM_HINT_T0);
      _mm_prefetch(pf + T::kSuperBytes - 1, _MM_HINT_T0);
      __m512 mwv;
      T::Scales(sb[r], &dwv[r], &mwv);
      _mm512_store_ps(mw_buf + (r * nsb + s) * 16, mwv);
    }
    const int64_t k = 256 * s;
    FusedChunk<T, R, MB, 0>(sb, dwv, act, dal, k, acc);
    FusedChunk<T, R, MB, 1>(sb, dwv, act, dal, k, acc);
    FusedChunk<T, R, MB, 2>(sb, dwv, act, dal, k, acc);
    FusedChunk<T, R, MB, 3>(sb, dwv, act, dal, k, acc);
  }
  // The offset / min term, as Tile: sum_j mw[j] * qs16[j], 16 j per fma.
  for (int m = 0; m < MB; ++m) {
    const float* qs = reinterpret_cast<const float*>(act[m] + al.qs16);
    for (int r = 0; r < R; ++r) {
      __m512 macc = _mm512_setzero_ps();
      for (int64_t s = 0; s < nsb; ++s) {
        macc = _mm512_fmadd_ps(_mm512_load_ps(mw_buf + (r * nsb + s) * 16),
                               _mm512_loadu_ps(qs + 16 * s), macc);
      }
      out[m][r] = Reduce16(acc[r][m]) + Reduce16(macc);
    }
  }
}

// The fused kernel of type T for FusedRows (quant_kernel_impl.h): tiles of 4
// weight rows for M <= 4 (16 accumulators at M = 4), 2 for M = 5..8.
template <class T>
struct Fused {
  static constexpr int RowsFor(int mb) { return mb <= 4 ? 4 : 2; }
  template <int R, int MB>
  static void Tile(const uint8_t* const* wrow, const uint8_t* const* act, int64_t d,
                   int64_t pf_ahead, float* mw_buf, float* const* out) {
    FusedTile<T, R, MB>(wrow, act, d, pf_ahead, mw_buf, out);
  }
};

// True when the fused kernel ran (type and d it covers, rows 1..8).
inline bool RunFused(const QuantTypeInfo& type, const uint8_t* acts, int64_t rows,
                     const uint8_t* w, int64_t d, int64_t v0, int64_t v1, float* out,
                     int64_t ldo, uint8_t* scratch) {
  if (d % 256 != 0 || rows < 1 || rows > 8) return false;
  const int64_t row_bytes = d / type.block_size * type.block_bytes;
  // 64-byte aligned room for 4 rows x d/16 floats (scratch holds 4 unpacked rows).
  auto* mw_buf = reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(scratch) + 63) & ~uintptr_t{63});
  switch (type.type) {
    case quant::GgmlType::kQ8_0:
      FusedKernel<Fused<FusedQ8_0>>(acts, rows, w, d, row_bytes, v0, v1, out, ldo, mw_buf);
      return true;
    case quant::GgmlType::kQ4_K:
      FusedKernel<Fused<FusedQ4_K>>(acts, rows, w, d, row_bytes, v0, v1, out, ldo, mw_buf);
      return true;
    case quant::GgmlType::kQ6_K:
      FusedKernel<Fused<FusedQ6_K>>(acts, rows, w, d, row_bytes, v0, v1, out, ldo, mw_buf);
      return true;
    case quant::GgmlType::kQ2_K:
      FusedKernel<Fused<FusedQ2_K>>(acts, rows, w, d, row_bytes, v0, v1, out, ldo, mw_buf);
      return true;
    case quant::GgmlType::kQ5_K:
      FusedKernel<Fused<FusedQ5_K>>(acts, rows, w, d, row_bytes, v0, v1, out, ldo, mw_buf);
      return true;
    case quant::GgmlType::kQ4_0:
      FusedKernel<Fused<FusedQ4_0>>(acts, rows, w, d, row_bytes, v0, v1, out, ldo, mw_buf);
      return true;
    case quant::GgmlType::kQ4_1:
      FusedKernel<Fused<FusedQ4_1>>(acts, rows, w, d, row_bytes, v0, v1, out, ldo, mw_buf);
      return true;
    case quant::GgmlType::kQ5_0:
      FusedKernel<Fused<FusedQ5_0>>(acts, rows, w, d, row_bytes, v0, v1, out, ldo, mw_buf);
      return true;
    case quant::GgmlType::kQ5_1:
      FusedKernel<Fused<FusedQ5_1>>(acts, rows, w, d, row_bytes, v0, v1, out, ldo, mw_buf);
      return true;
    case quant::GgmlType::kIQ4_NL:
      FusedKernel<Fused<FusedIQ4_NL>>(acts, rows, w, d, row_bytes, v0, v1, out, ldo, mw_buf);
      return true;
    case quant::GgmlType::kQ3_K:
      FusedKernel<Fused<FusedQ3_K>>(acts, rows, w, d, row_bytes, v0, v1, out, ldo, mw_buf);
      return true;
    default: return false;
  }
}


// ---- The many-row kernel (rows > few_rows_max): vocabulary rows in the
// lanes. 16 weight rows are unpacked, then packed so that one zmm holds
// the same 4 codes of all 16 rows:
//
//   P[g] = [ u[r0][4g..4g+3] | u[r1][4g..4g+3] | ... | u[r15][4g..4g+3] ]
//   dwT[j] = dw[r0..r15][j],  mwT[j] = mw[r0..r15][j]       (16 floats)
//
// and each input row m's 4 codes a[m][4g..4g+3] are broadcast to all lanes:
// vpdpbusd(acc, P[g], bcast) adds 16 rows x 4 products in one instruction.
// After each sub-block (16 codes, or 32 for types whose scale pairs are
// equal) the int32 lanes are scaled by dwT x da[m] and added in float; the
// offset term adds mwT x qs[m] per sub-block. A tile is 16 weight rows x up
// to kGemmMb input rows. Per 32 codes and input row: 8 vpdpbusd + 4 float
// ops (paired) against 2 vdpbf16ps-equivalents of work per 64 MACs for BF16.
constexpr int kGemmRows = 16;
constexpr int kGemmMb = 8;

struct GemmLayout {
  int64_t unpack, packed, dwt, mwt, bytes;
  explicit GemmLayout(int64_t d) {
    const UnpackLayout ul(d);
    unpack = 0;
    packed = Round64(kGemmRows * ul.row_bytes);
    dwt = packed + kGemmRows * Round64(d);
    mwt = dwt + Round64(d / 16 * kGemmRows * 4);
    bytes = mwt + Round64(d / 16 * kGemmRows * 4) + 64;
  }
};

// 16 x 16 int32 transpose: in[i] lane j -> out[j] lane i.
inline void Transpose16(__m512i r[16]) {
  __m512i t[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_maskz_unpacklo_epi32(kAll, r[i], r[i + 1]);
    t[i + 1] = _mm512_maskz_unpackhi_epi32(kAll, r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {
    r[i] = _mm512_maskz_unpacklo_epi64(0xFF, t[i], t[i + 2]);
    r[i + 1] = _mm512_maskz_unpackhi_epi64(0xFF, t[i], t[i + 2]);
    r[i + 2] = _mm512_maskz_unpacklo_epi64(0xFF, t[i + 1], t[i + 3]);
    r[i + 3] = _mm512_maskz_unpackhi_epi64(0xFF, t[i + 1], t[i + 3]);
  }
  // Now r[4q + c] holds, per 128-bit lane L, column c of rows 4q..4q+3 for
  // the columns of lane L. Gather the 128-bit lanes.
  for (int i = 0; i < 8; ++i) {
    const int a = (i / 4) * 8 + (i % 4), b = a + 4;
    t[a] = _mm512_maskz_shuffle_i32x4(kAll, r[a], r[b], 0x88);  // lanes 0,2 of a, 0,2 of b
    t[b] = _mm512_maskz_shuffle_i32x4(kAll, r[a], r[b], 0xDD);  // lanes 1,3
  }
  for (int i = 0; i < 8; ++i) {
    const int a = i, b = a + 8;
    r[a] = _mm512_maskz_shuffle_i32x4(kAll, t[a], t[b], 0x88);
    r[b] = _mm512_maskz_shuffle_i32x4(kAll, t[a], t[b], 0xDD);
  }
}

template <int MB, bool kPair>
inline void GemmTile(const uint8_t* packed, const float* dwt, const float* mwt,
                     const uint8_t* const* act, int64_t d, float* const* out, __mmask16 lanes) {
  const ActLayout al(d);
  __m512 acc[MB], macc[MB];
  const int8_t* a[MB];
  const float* da[MB];
  const float* qs[MB];
  for (int m = 0; m < MB; ++m) {
    acc[m] = _mm512_setzero_ps();
    macc[m] = _mm512_setzero_ps();
    a[m] = reinterpret_cast<const int8_t*>(act[m]);
    da[m] = reinterpret_cast<const float*>(act[m] + al.da);
    qs[m] = reinterpret_cast<const float*>(act[m] + (kPair ? al.qs32 : al.qs16));
  }
  constexpr int kCodes = kPair ? 32 : 16;
  const int64_t nsub = d / kCodes;
  for (int64_t j = 0; j < nsub; ++j) {
    __m512i isum[MB];
    for (int m = 0; m < MB; ++m) isum[m] = _mm512_setzero_si512();
    const uint8_t* pj = packed + j * kCodes * kGemmRows;
    for (int g = 0; g < kCodes / 4; ++g) {
      const __m512i p = _mm512_load_si512(pj + g * 64);
      for (int m = 0; m < MB; ++m) {
        int32_t four;
        std::memcpy(&four, a[m] + j * kCodes + 4 * g, 4);
        isum[m] = _mm512_dpbusd_epi32(isum[m], p, _mm512_set1_epi32(four));
      }
    }
    const int64_t sj = kPair ? 2 * j : j;  // the per-16 index of dwT / mwT
    const __m512 dws = _mm512_load_ps(dwt + sj * kGemmRows);
    const __m512 mws = _mm512_load_ps(mwt + sj * kGemmRows);
    for (int m = 0; m < MB; ++m) {
      const __m512 scale = _mm512_mul_ps(dws, _mm512_set1_ps(da[m][kPair ? j : j / 2]));
      acc[m] = _mm512_fmadd_ps(_mm512_maskz_cvtepi32_ps(kAll, isum[m]), scale, acc[m]);
      macc[m] = _mm512_fmadd_ps(mws, _mm512_set1_ps(qs[m][j]), macc[m]);
    }
  }
  for (int m = 0; m < MB; ++m) {
    _mm512_mask_storeu_ps(out[m], lanes, _mm512_add_ps(acc[m], macc[m]));
  }
}

template <bool kPair>
inline void GemmTileMb(int mb, const uint8_t* packed, const float* dwt, const float* mwt,
                       const uint8_t* const* act, int64_t d, float* const* out, __mmask16 lanes) {
  switch (mb) {
    case 8: return GemmTile<8, kPair>(packed, dwt, mwt, act, d, out, lanes);
    case 7: return GemmTile<7, kPair>(packed, dwt, mwt, act, d, out, lanes);
    case 6: return GemmTile<6, kPair>(packed, dwt, mwt, act, d, out, lanes);
    case 5: return GemmTile<5, kPair>(packed, dwt, mwt, act, d, out, lanes);
    case 4: return GemmTile<4, kPair>(packed, dwt, mwt, act, d, out, lanes);
    case 3: return GemmTile<3, kPair>(packed, dwt, mwt, act, d, out, lanes);
    case 2: return GemmTile<2, kPair>(packed, dwt, mwt, act, d, out, lanes);
    default: return GemmTile<1, kPair>(packed, dwt, mwt, act, d, out, lanes);
  }
}

void RunGemm(const QuantTypeInfo& type, const uint8_t* acts, int64_t rows, const uint8_t* w,
             int64_t d, int64_t v0, int64_t v1, float* out, int64_t ldo, uint8_t* scratch);

}  // namespace

namespace {
// Types whose scale and offset are equal for both halves of every 32 codes
// (32-value blocks or sub-blocks): the many-row kernel scales per 32.
bool PairedScales(quant::GgmlType t) {
  using quant::GgmlType;
  return t != GgmlType::kQ2_K && t != GgmlType::kQ3_K && t != GgmlType::kQ6_K;
}

void RunGemm(const QuantTypeInfo& type, const uint8_t* acts, int64_t rows, const uint8_t* w,
             int64_t d, int64_t v0, int64_t v1, float* out, int64_t ldo, uint8_t* scratch) {
  const UnpackLayout ul(d);
  const GemmLayout gl(d);
  const ActLayout al(d);
  const int64_t row_bytes = d / type.block_size * type.block_bytes;
  const int64_t nsub = d / 16;
  uint8_t* packed = scratch + gl.packed;
  float* dwt = reinterpret_cast<float*>(scratch + gl.dwt);
  float* mwt = reinterpret_cast<float*>(scratch + gl.mwt);
  const bool pair = PairedScales(type.type);
  for (int64_t v = v0; v < v1; v += kGemmRows) {
    const int nr = static_cast<int>(Min64(kGemmRows, v1 - v));
    for (int r = 0; r < kGemmRows; ++r) {
      uint8_t* base = scratch + gl.unpack + r * ul.row_bytes;
      if (r < nr) {
        Avx512Vnni::Unpack(type.type, w + (v + r) * row_bytes, d, base,
                           reinterpret_cast<float*>(base + ul.dw),
                           reinterpret_cast<float*>(base + ul.mw));
      } else {
        std::memset(base, 0, static_cast<size_t>(ul.row_bytes));
      }
    }
    // Pack: 64 codes (16 groups of 4) of the 16 rows at a time.
    for (int64_t k = 0; k < d; k += 64) {
      __m512i r16[16];
      const int64_t left = d - k;
      const __mmask64 km = left >= 64 ? ~__mmask64{0} : (__mmask64{1} << left) - 1;
      for (int r = 0; r < 16; ++r) {
        r16[r] = _mm512_maskz_loadu_epi8(km, scratch + gl.unpack + r * ul.row_bytes + k);
      }
      Transpose16(r16);
      const int groups = static_cast<int>(Min64(16, left / 4));
      for (int g = 0; g < groups; ++g) _mm512_store_si512(packed + (k / 4 + g) * 64, r16[g]);
    }
    for (int64_t j = 0; j < nsub; ++j) {
      for (int r = 0; r < kGemmRows; ++r) {
        const uint8_t* base = scratch + gl.unpack + r * ul.row_bytes;
        dwt[j * kGemmRows + r] = reinterpret_cast<const float*>(base + ul.dw)[j];
        mwt[j * kGemmRows + r] = reinterpret_cast<const float*>(base + ul.mw)[j];
      }
    }
    const __mmask16 lanes = static_cast<__mmask16>((1u << nr) - 1);
    for (int64_t m = 0; m < rows; m += kGemmMb) {
      const int mb = static_cast<int>(Min64(kGemmMb, rows - m));
      const uint8_t* act[kGemmMb];
      float* o[kGemmMb];
      for (int i = 0; i < mb; ++i) {
        act[i] = acts + (m + i) * al.bytes;
        o[i] = out + (m + i) * ldo + v;
      }
      if (pair) {
        GemmTileMb<true>(mb, packed, dwt, mwt, act, d, o, lanes);
      } else {
        GemmTileMb<false>(mb, packed, dwt, mwt, act, d, o, lanes);
      }
    }
  }
}

}  // namespace

namespace quant_kernel_internal {
int64_t Avx512GemmScratchBytes(int64_t d) { return GemmLayout(d).bytes; }

// QuantizeActivationsScalar's arithmetic 16 lanes at a time: the same
// amax (max of |x|; the order of a max does not change it), the same
// scalar scale and inverse, x * inv rounded to nearest-even by vcvtps2dq
// (std::nearbyint in the default rounding mode), the same integer sums.
void Avx512QuantizeActivations(const float* x, int64_t rows, int64_t d, uint8_t* acts) {
  const ActLayout al(d);
  const __m512i exp_mask = _mm512_set1_epi32(0x7F800000);
  for (int64_t m = 0; m < rows; ++m) {
    const float* xr = x + m * d;
    uint8_t* row = acts + m * al.bytes;
    auto* aq = reinterpret_cast<int8_t*>(row);
    const ActRowSums sums(row, al);
    for (int64_t b = 0; b < d / 32; ++b) {
      const __m512 x0 = _mm512_loadu_ps(xr + 32 * b), x1 = _mm512_loadu_ps(xr + 32 * b + 16);
      // A lane is non-finite when its exponent bits are all set.
      const __m512i e0 = _mm512_and_si512(_mm512_castps_si512(x0), exp_mask);
      const __m512i e1 = _mm512_and_si512(_mm512_castps_si512(x1), exp_mask);
      const bool finite = (_mm512_cmpeq_epi32_mask(e0, exp_mask) | _mm512_cmpeq_epi32_mask(e1, exp_mask)) == 0;
      // As the scalar form: a NaN scale and codes 0 in a non-finite block.
      float scale = std::nanf("");
      __m512i q0 = _mm512_setzero_si512(), q1 = _mm512_setzero_si512();
      if (finite) {
        const __m512i abs_mask = _mm512_set1_epi32(0x7FFFFFFF);
        auto abs = [&](__m512 v) {
          return _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(v), abs_mask));
        };
        const float amax = Max16(_mm512_maskz_max_ps(kAll, abs(x0), abs(x1)));
        scale = amax / 127.0f;
        const float pre = amax < 0x1p-64f ? 0x1p64f : 1.0f;  // as the scalar form
        const __m512 vpre = _mm512_set1_ps(pre);
        const __m512 inv = _mm512_set1_ps(amax > 0.0f ? 127.0f / (amax * pre) : 0.0f);
        q0 = _mm512_maskz_cvtps_epi32(kAll, _mm512_mul_ps(_mm512_mul_ps(x0, vpre), inv));
        q1 = _mm512_maskz_cvtps_epi32(kAll, _mm512_mul_ps(_mm512_mul_ps(x1, vpre), inv));
      }
      _mm_storeu_si128(reinterpret_cast<__m128i*>(aq + 32 * b), _mm512_maskz_cvtepi32_epi8(kAll, q0));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(aq + 32 * b + 16),
                       _mm512_maskz_cvtepi32_epi8(kAll, q1));
      sums.Put(b, scale, SumI16(q0), SumI16(q1));
    }
  }
}

void KernelAvx512Vnni(const QuantTypeInfo& type, const uint8_t* acts, int64_t rows,
                      const uint8_t* w, int64_t d, int64_t v0, int64_t v1, float* out,
                      int64_t ldo, uint8_t* scratch, int64_t few_rows_max) {
  if (rows > few_rows_max || rows > kFewRowsLimit) {
    RunGemm(type, acts, rows, w, d, v0, v1, out, ldo, scratch);
  } else if (!RunFused(type, acts, rows, w, d, v0, v1, out, ldo, scratch)) {
    // hidden_size not a multiple of 256: the unpacking kernel.
    RunKernel<Avx512Vnni>(type, acts, rows, w, d, v0, v1, out, ldo, scratch);
  }
}
}  // namespace quant_kernel_internal
}  // namespace vocabd
