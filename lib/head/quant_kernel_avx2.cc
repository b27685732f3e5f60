// The AVX2 path of the quantized LM-head kernel (quant_kernel.h), for CPUs
// without VNNI: per 16 codes, u and a widened to int16 (vpmovzxbw /
// vpmovsxbw) and multiplied pairwise into 8 int32 lanes (vpmaddwd; u <= 255
// and |a| <= 127 cannot overflow, unlike vpmaddubsw's saturating int16);
// the 16 codes share one sub-block scale dw and one activation scale da.
// Compiled with -mavx2 -mfma -mf16c; reached only when
// QuantKernelIsaSupported(kAvx2).
//
// Few rows (M <= few_rows_max) of every served type with hidden_size a
// multiple of 256 run a fused kernel instead (FusedQ8_0 .. FusedQ6_K below,
// each with the block layout it reads): the codes of each 32-code chunk are
// made in a register straight from the blocks and multiplied with
// vpmaddubsw, which is exact for these codes, then vpmaddwd sums 4 products
// per int32 lane. Per chunk c (32 codes, one activation block), weight row
// r, input row m:
//
//   unsigned codes u (Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K):
//                p  = vpmaddwd(vpmaddubsw(u, a), 1)   u in [0, umax]: each
//                     int16 pair sum |u0 a0 + u1 a1| <= 2 * umax * 127 < 2^15
//                     (umax: Q2_K 3, Q3_K 7, Q4_* 15, Q5_* 31, Q6_K 63,
//                     so at most 16002)
//   signed codes q (Q8_0, IQ4_NL):
//                p  = vpmaddwd(vpmaddubsw(|q|, sign(a, q)), 1)  (ggml's
//                     signed product: |q| <= 128 (IQ4_NL 127), |a| <= 127,
//                     at most 2 * 128 * 127 = 32512 < 2^15)
//   acc[r][m] += float(p) * (ws * da[m][c])
//                ws lanes 0-3: dw of codes 0-15, lanes 4-7: of codes 16-31
//                (one scale per 32 codes: Q8_0, Q4_0 .. Q5_1, IQ4_NL,
//                Q4_K, Q5_K; one per 16: Q2_K, Q3_K, Q6_K)
//
// logit = sum of acc's 8 lanes + sum_j mw[j] * qs[m][j], the offsets mw per
// 32 codes with qs32 (Q4_0 -8 d, Q4_1 m, Q5_0 -16 d, Q5_1 m, Q4_K and Q5_K
// -dmin * min6) or per 16 with qs16 (Q2_K -dmin * min4, Q3_K -4 dw, Q6_K
// -32 dw); Q8_0 and IQ4_NL have none: the signed codes carry it. Each
// (r, m) has its own accumulators summed in k order, so a row's logits do
// not depend on M within this kernel; they differ from the unpacking
// kernel's (M > few_rows_max) by float rounding only (the integer dot
// products are exact in both).
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "lib/head/quant_kernel.h"
#include "lib/head/quant_kernel_impl.h"

namespace vocabd {
namespace {

inline float Reduce8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

struct Avx2 {
  static void Unpack(quant::GgmlType type, const uint8_t* row, int64_t d, uint8_t* u, float* dw,
                     float* mw) {
    UnpackRow(type, row, d, u, dw, mw);
  }
  static constexpr int kMaxMb = 2;
  template <int R, int MB>
  static void Tile(const TileArgs& t) {
    const ActLayout al(t.d);
    const int64_t d = t.d;
    __m256 acc[R][MB];
    for (int r = 0; r < R; ++r)
      for (int m = 0; m < MB; ++m) acc[r][m] = _mm256_setzero_ps();
    for (int64_t k = 0; k < d; k += 16) {
      __m256i wq[R];
      for (int r = 0; r < R; ++r)
        wq[r] = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(t.u[r] + k)));
      for (int m = 0; m < MB; ++m) {
        const __m256i a =
            _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(t.act[m] + k)));
        const __m256 sa =
            _mm256_broadcast_ss(reinterpret_cast<const float*>(t.act[m] + al.da) + k / 32);
        for (int r = 0; r < R; ++r) {
          const __m256i p = _mm256_madd_epi16(wq[r], a);
          acc[r][m] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p),
                                      _mm256_mul_ps(_mm256_set1_ps(t.dw[r][k / 16]), sa), acc[r][m]);
        }
      }
    }
    const int64_t nj = d / 16;
    for (int m = 0; m < MB; ++m) {
      const auto* s = reinterpret_cast<const float*>(t.act[m] + t.min_sums);
      for (int r = 0; r < R; ++r) {
        __m256 macc = _mm256_setzero_ps();
        int64_t j = 0;
        for (; j + 8 <= nj; j += 8)
          macc = _mm256_fmadd_ps(_mm256_loadu_ps(t.mw[r] + j), _mm256_loadu_ps(s + j), macc);
        float tail = 0.0f;
        for (; j < nj; ++j) tail += t.mw[r][j] * s[j];
        t.out[m][r] = Reduce8(acc[r][m]) + (Reduce8(macc) + tail);
      }
    }
  }
};

// ---- The fused few-row kernel (see the top of the file).

// 8 int32 lanes, lane i = sum of the 4 products of codes 4i..4i+3.
inline __m256i Dot32(__m256i u, __m256i a) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, a), _mm256_set1_epi16(1));
}

inline __m256i Load32(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

// kBits bits of each byte of v, from bit B, moved to bit T of the same byte
// (the other bits cleared). The shift is of 16-bit lanes, but the bits kept
// come from the same byte: B + kBits <= 8 and T + kBits <= 8.
template <int B, int T, int kBits>
inline __m256i Field(__m256i v) {
  static_assert(B + kBits <= 8 && T + kBits <= 8);
  __m256i s = v;
  if constexpr (B > T) s = _mm256_srli_epi16(v, B - T);
  if constexpr (B < T) s = _mm256_slli_epi16(v, T - B);
  return _mm256_and_si256(s, _mm256_set1_epi8(static_cast<char>(((1 << kBits) - 1) << T)));
}

// A 32-code block's 16 nibble bytes qs as its 32 codes: bytes 0-15 = the
// low nibbles of qs[0..15] (codes 0-15), bytes 16-31 = the high nibbles
// (codes 16-31). One 16-byte load into both halves, the upper one shifted.
inline __m256i Nibbles32(const uint8_t* qs) {
  const __m256i q =
      _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs)));
  return _mm256_and_si256(_mm256_srlv_epi64(q, _mm256_setr_epi64x(0, 0, 4, 4)),
                          _mm256_set1_epi8(0x0F));
}

// Q5_0 / Q5_1's fifth bits: byte j = 0x10 if bit j of the little-endian
// 32-bit qh is set, else 0 (byte j / 8 of qh copied to byte j, tested
// against bit j % 8).
inline __m256i Bit4Of32(const uint8_t* qh4) {
  const __m256i spread = _mm256_shuffle_epi8(
      _mm256_broadcastd_epi32(_mm_loadu_si32(qh4)),
      _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,  //
                       2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
  const __m256i bit = _mm256_set1_epi64x(0x8040201008040201);
  return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit),
                          _mm256_set1_epi8(0x10));
}

// A super-block's weight scales, as two vectors:
//   one scale per 32-code chunk (ChunkScales): v[0] lane c = chunk c's
//   one per 16 codes (SubBlockScales):  v[0] lanes = dw[0..7], v[1] = dw[8..15]
struct SuperScales {
  __m256 v[2];
};

// Each type T below provides, per 256 codes of a row (8 chunks of 32):
//   kSuperBytes            their bytes
//   kMw                    offsets per 256 codes: 8 (one per 32 codes, summed
//                          with qs32), 16 (per 16, with qs16) or 0 (none)
//   Scales(sb, sc, mw)     the weight scales and the kMw offsets
//   ScaleBy(w, da, out)    w times the 8 activation scales of the 256 codes
//   Wsc<C>(sc)             chunk C's 8 lane scales (lanes 0-3: codes 0-15,
//                          lanes 4-7: codes 16-31)
//   Codes<C>(sb)           chunk C's 32 codes, one per byte
//   Weights(q), Acts(q, a) vpmaddubsw's unsigned and signed operands
// (from the bases below), so that chunk C adds
//   float(Dot32(Weights(q), Acts(q, a))) * Wsc<C>(ScaleBy(w, da)).

// Types with one weight scale per 32-code chunk: v[0] lane c.
struct ChunkScales {
  template <int C>
  static inline __m256 Wsc(const SuperScales& sc) {
    return _mm256_permutevar8x32_ps(sc.v[0], _mm256_set1_epi32(C));
  }
  static inline void ScaleBy(const SuperScales& w, const float* da, SuperScales* out) {
    out->v[0] = _mm256_mul_ps(w.v[0], _mm256_loadu_ps(da));
  }
};

// Types with one weight scale per 16 codes (Q2_K, Q3_K, Q6_K): v[0] lane j
// = dw[j], v[1] lane j = dw[8 + j].
struct SubBlockScales {
  // v[0] lane j: dw[j] * da[j / 2], v[1] lane j: dw[8 + j] * da[4 + j / 2].
  static inline void ScaleBy(const SuperScales& w, const float* da, SuperScales* out) {
    const __m256 a = _mm256_loadu_ps(da);
    const __m256i lo = _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3);
    const __m256i hi = _mm256_setr_epi32(4, 4, 5, 5, 6, 6, 7, 7);
    out->v[0] = _mm256_mul_ps(w.v[0], _mm256_permutevar8x32_ps(a, lo));
    out->v[1] = _mm256_mul_ps(w.v[1], _mm256_permutevar8x32_ps(a, hi));
  }
  // Lanes 0-3: dw[2C], lanes 4-7: dw[2C + 1] (times the chunk's da).
  template <int C>
  static inline __m256 Wsc(const SuperScales& sc) {
    constexpr int j = 2 * (C % 4);
    return _mm256_permutevar8x32_ps(sc.v[C / 4],
                                    _mm256_setr_epi32(j, j, j, j, j + 1, j + 1, j + 1, j + 1));
  }
  // out = d times the 16 signed bytes s8 (v[0]: bytes 0-7, v[1]: 8-15).
  static inline void FromBytes(__m128i s8, float d, SuperScales* out) {
    const __m256 dv = _mm256_set1_ps(d);
    out->v[0] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(s8)), dv);
    out->v[1] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(s8, 8))), dv);
  }
  // mw[j] = k * sc[j], j = 0..15.
  static inline void StoreTimes(const SuperScales& sc, float k, float* mw) {
    _mm256_storeu_ps(mw, _mm256_mul_ps(sc.v[0], _mm256_set1_ps(k)));
    _mm256_storeu_ps(mw + 8, _mm256_mul_ps(sc.v[1], _mm256_set1_ps(k)));
  }
};

// Unsigned codes u (at most 63): multiplied as they are.
struct UnsignedCodes {
  static inline __m256i Weights(__m256i u) { return u; }
  static inline __m256i Acts(__m256i, __m256i a) { return a; }
};

// Signed codes q (ggml's signed product): |q| as unsigned bytes (|-128| =
// 0x80 = 128) and a with q's sign.
struct SignedCodes {
  static inline __m256i Weights(__m256i q) { return _mm256_sign_epi8(q, q); }
  static inline __m256i Acts(__m256i q, __m256i a) { return _mm256_sign_epi8(a, q); }
};

// The 32-code block types: 256 codes = 8 consecutive blocks, chunk c =
// block c, scale lane c = block c's d.
template <class Block>
struct Blocks32 : ChunkScales {
  static constexpr int64_t kSuperBytes = 8 * static_cast<int64_t>(sizeof(Block));
  template <int C>
  static inline const Block& At(const uint8_t* sb) {
    return reinterpret_cast<const Block*>(sb)[C];
  }
  // The f16 field at byte `off` of each of the 8 blocks, as floats.
  static inline __m256 Halves(const uint8_t* sb, size_t off) {
    auto h = [&](int c) {
      uint16_t v;
      std::memcpy(&v, sb + c * sizeof(Block) + off, 2);
      return static_cast<short>(v);
    };
    return _mm256_cvtph_ps(_mm_setr_epi16(h(0), h(1), h(2), h(3), h(4), h(5), h(6), h(7)));
  }
};

// Q8_0, 8 blocks of 34 B:
//
//   block c: [d:f16][qs:32 x i8]            w = d * qs
//   chunk c: qs as they are, the signed product (|q| <= 128: each int16
//            pair sum <= 2 * 128 * 127 = 32512 < 2^15); no offset term
struct FusedQ8_0 : Blocks32<quant::BlockQ8_0>, SignedCodes {
  static constexpr int kMw = 0;
  static inline void Scales(const uint8_t* sb, SuperScales* sc, float* /*mw*/) {
    sc->v[0] = Halves(sb, offsetof(quant::BlockQ8_0, d));
  }
  template <int C>
  static inline __m256i Codes(const uint8_t* sb) {
    return Load32(At<C>(sb).qs);
  }
};

// Q4_0, Q4_1, Q5_0, Q5_1, 8 blocks of 18, 20, 22, 24 B:
//
//   Q4_0  block c: [d:f16][qs:16 B]                    w = d * u - 8 d
//   Q4_1  block c: [d:f16][m:f16][qs:16 B]             w = d * u + m
//   Q5_0  block c: [d:f16][qh:4 B][qs:16 B]            w = d * u - 16 d
//   Q5_1  block c: [d:f16][m:f16][qh:4 B][qs:16 B]     w = d * u + m
//
//   qs[j] = u[j] & 15 | (u[j + 16] & 15) << 4,  j = 0..15
//   qh (u32, little-endian) bit j = bit 4 of u[j],  j = 0..31
//
// chunk c: Nibbles32(qs) (| Bit4Of32(qh)); u <= 15 (Q4) or 31 (Q5): each
// int16 pair sum <= 2 * 31 * 127 = 7874. mw[c] = kOff * d (kOff = -8, -16)
// or, kOff = 0, the block's m (kMw 8, with qs32).
template <class Block, int kOff, bool kFifthBit>
struct FusedLegacy : Blocks32<Block>, UnsignedCodes {
  using Base = Blocks32<Block>;
  static constexpr int kMw = 8;
  static inline void Scales(const uint8_t* sb, SuperScales* sc, float* mw) {
    sc->v[0] = Base::Halves(sb, offsetof(Block, d));
    if constexpr (kOff != 0) {
      _mm256_storeu_ps(mw, _mm256_mul_ps(sc->v[0], _mm256_set1_ps(static_cast<float>(kOff))));
    } else {
      _mm256_storeu_ps(mw, Base::Halves(sb, offsetof(Block, m)));
    }
  }
  template <int C>
  static inline __m256i Codes(const uint8_t* sb) {
    const Block& b = Base::template At<C>(sb);
    if constexpr (kFifthBit) return _mm256_or_si256(Nibbles32(b.qs), Bit4Of32(b.qh));
    return Nibbles32(b.qs);
  }
};
using FusedQ4_0 = FusedLegacy<quant::BlockQ4_0, -8, false>;
using FusedQ4_1 = FusedLegacy<quant::BlockQ4_1, 0, false>;
using FusedQ5_0 = FusedLegacy<quant::BlockQ5_0, -16, true>;
using FusedQ5_1 = FusedLegacy<quant::BlockQ5_1, 0, true>;

// IQ4_NL, 8 blocks of 18 B:
//
//   block c: [d:f16][qs:16 B]     nibbles as Q4_0, w = d * kvalues_iq4nl[nibble]
//
// chunk c: q = vpshufb(kvalues_iq4nl, Nibbles32(qs)), signed in [-127, 113]
// (q + 128 would not fit vpmaddubsw's pair sums), so the signed product:
// each int16 pair sum <= 2 * 127 * 127 = 32258 < 2^15; no offset term.
struct FusedIQ4_NL : Blocks32<quant::BlockIQ4_NL>, SignedCodes {
  static constexpr int kMw = 0;
  static inline void Scales(const uint8_t* sb, SuperScales* sc, float* /*mw*/) {
    sc->v[0] = Halves(sb, offsetof(quant::BlockIQ4_NL, d));
  }
  template <int C>
  static inline __m256i Codes(const uint8_t* sb) {
    const __m256i table = _mm256_broadcastsi128_si256(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(quant::kValuesIQ4_NL)));
    return _mm256_shuffle_epi8(table, Nibbles32(At<C>(sb).qs));
  }
};

// Q4_K and Q5_K: 8 sub-blocks of 32 codes (the 8 chunks), each a 6-bit
// scale sc and min m packed in 12 bytes:
//
//   [d:f16][dmin:f16][scales:12 B] ...     w = d * sc[C] * u - dmin * m[C]
//
// unpacked by ggml's 32-bit kmask shuffle into 8 scales (bytes 0-7) and
// 8 mins (bytes 8-15); mw per chunk (kMw 8, with qs32).
template <class Block>
struct KScaleMin : ChunkScales, UnsignedCodes {
  static constexpr int64_t kSuperBytes = sizeof(Block);
  static constexpr int kMw = 8;
  static inline const Block* X(const uint8_t* sb) { return reinterpret_cast<const Block*>(sb); }
  static inline void Scales(const uint8_t* sb, SuperScales* sc, float* mw) {
    const Block* x = X(sb);
    uint32_t s[4];
    std::memcpy(s, x->scales, 12);
    const uint32_t kmask1 = 0x3F3F3F3Fu, kmask2 = 0x0F0F0F0Fu, kmask3 = 0x03030303u;
    s[3] = ((s[2] >> 4) & kmask2) | (((s[1] >> 6) & kmask3) << 4);
    const uint32_t m_lo = s[1] & kmask1;
    s[1] = (s[2] & kmask2) | (((s[0] >> 6) & kmask3) << 4);
    s[2] = m_lo;
    s[0] &= kmask1;
    // From registers (a 16-byte load of 4-byte stores fails store forwarding).
    const __m128i b = _mm_setr_epi32(static_cast<int>(s[0]), static_cast<int>(s[1]),
                                     static_cast<int>(s[2]), static_cast<int>(s[3]));
    const __m256 scales = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(b));
    const __m256 mins = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(b, 8)));
    sc->v[0] = _mm256_mul_ps(scales, _mm256_set1_ps(_cvtsh_ss(x->d)));
    _mm256_storeu_ps(mw, _mm256_mul_ps(mins, _mm256_set1_ps(-_cvtsh_ss(x->dmin))));
  }
};

// Q4_K, 144 B:
//
//   [d:f16][dmin:f16][scales:12 B][qs:128 B]
//   u[64 g + l] = qs[32 g + l] & 15,  u[64 g + 32 + l] = qs[32 g + l] >> 4
//   (g = 0..3, l = 0..31)
//
// chunk C: the low (C even) or high (C odd) nibbles of qs[32 (C / 2) ..];
// u <= 15: each int16 pair sum <= 2 * 15 * 127 = 3810.
struct FusedQ4_K : KScaleMin<quant::BlockQ4_K> {
  template <int C>
  static inline __m256i Codes(const uint8_t* sb) {
    return Field<4 * (C % 2), 0, 4>(Load32(X(sb)->qs + 32 * (C / 2)));
  }
};

// Q5_K, 176 B:
//
//   [d:f16][dmin:f16][scales:12 B][qh:32 B][qs:128 B]
//   u[32 C + l] = Q4_K's nibble | (bit C of qh[l]) << 4   (C = 0..7)
//
// chunk C: Q4_K's chunk | Field<C, 4, 1>(qh); u <= 31: each int16 pair
// sum <= 2 * 31 * 127 = 7874.
struct FusedQ5_K : KScaleMin<quant::BlockQ5_K> {
  template <int C>
  static inline __m256i Codes(const uint8_t* sb) {
    const quant::BlockQ5_K* x = X(sb);
    return _mm256_or_si256(Field<4 * (C % 2), 0, 4>(Load32(x->qs + 32 * (C / 2))),
                           Field<C, 4, 1>(Load32(x->qh)));
  }
};

// Q2_K, 84 B:
//
//   [scales:16 B][qs:64 B][d:f16][dmin:f16]
//   scales[j] = min4 << 4 | scale4 of codes 16 j .. 16 j + 15
//   u[128 h + 32 s + l] = (qs[32 h + l] >> 2 s) & 3   (h = 0, 1; s = 0..3;
//                                                      l = 0..31)
//   w = d * scale4 * u - dmin * min4
//
// chunk C = 4 h + s: Field<2 s, 0, 2>(qs[32 h ..]); u <= 3: each int16
// pair sum <= 2 * 3 * 127 = 762. mw per 16 codes (kMw 16, with qs16).
struct FusedQ2_K : SubBlockScales, UnsignedCodes {
  static constexpr int64_t kSuperBytes = sizeof(quant::BlockQ2_K);
  static constexpr int kMw = 16;
  static inline void Scales(const uint8_t* sb, SuperScales* sc, float* mw) {
    const auto* x = reinterpret_cast<const quant::BlockQ2_K*>(sb);
    const __m128i s = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x->scales));
    const __m128i lo4 = _mm_set1_epi8(0x0F);
    FromBytes(_mm_and_si128(s, lo4), _cvtsh_ss(x->d), sc);
    SuperScales mins;
    FromBytes(_mm_and_si128(_mm_srli_epi16(s, 4), lo4), -_cvtsh_ss(x->dmin), &mins);
    _mm256_storeu_ps(mw, mins.v[0]);
    _mm256_storeu_ps(mw + 8, mins.v[1]);
  }
  template <int C>
  static inline __m256i Codes(const uint8_t* sb) {
    const auto* x = reinterpret_cast<const quant::BlockQ2_K*>(sb);
    return Field<2 * (C % 4), 0, 2>(Load32(x->qs + 32 * (C / 4)));
  }
};

// Q3_K, 110 B:
//
//   [hmask:32 B][qs:64 B][scales:12 B][d:f16]
//   u[128 h + 32 s + l] = (qs[32 h + l] >> 2 s) & 3
//                         | (bit 4 h + s of hmask[l]) << 2
//   16 six-bit scales s6 (one per 16 codes) in the 12 bytes, unpacked by
//   ggml's kmask shuffle;  w = d * (s6 - 32) * (u - 4)
//
// chunk C = 4 h + s: Q2_K's chunk | Field<C, 2, 1>(hmask); u <= 7: each
// int16 pair sum <= 2 * 7 * 127 = 1778. mw = -4 dw (kMw 16, with qs16).
struct FusedQ3_K : SubBlockScales, UnsignedCodes {
  static constexpr int64_t kSuperBytes = sizeof(quant::BlockQ3_K);
  static constexpr int kMw = 16;
  static inline void Scales(const uint8_t* sb, SuperScales* sc, float* mw) {
    const auto* x = reinterpret_cast<const quant::BlockQ3_K*>(sb);
    uint32_t aux[4];
    Q3KScales(x->scales, aux);
    // From registers: a 16-byte load of the four 4-byte stores would wait
    // for store forwarding, which fails for that shape.
    const __m128i s6 = _mm_setr_epi32(static_cast<int>(aux[0]), static_cast<int>(aux[1]),
                                      static_cast<int>(aux[2]), static_cast<int>(aux[3]));
    FromBytes(_mm_sub_epi8(s6, _mm_set1_epi8(32)), _cvtsh_ss(x->d), sc);
    StoreTimes(*sc, -4.0f, mw);
  }
  template <int C>
  static inline __m256i Codes(const uint8_t* sb) {
    const auto* x = reinterpret_cast<const quant::BlockQ3_K*>(sb);
    return _mm256_or_si256(Field<2 * (C % 4), 0, 2>(Load32(x->qs + 32 * (C / 4))),
                           Field<C, 2, 1>(Load32(x->hmask)));
  }
};

// Q6_K, 210 B:
//
//   [ql:128 B][qh:64 B][scales:16 x i8][d:f16]
//   u[128 h + 32 q + l] = 4 bits of ql[64 h + 32 (q % 2) + l] (low for
//                         q < 2, high for q >= 2)
//                         | (bits 2q, 2q + 1 of qh[32 h + l]) << 4
//   (h = 0, 1; q = 0..3; l = 0..31);  w = d * scales[j] * (u - 32)
//
// chunk C = 4 h + q as drawn; u <= 63: each int16 pair sum <= 2 * 63 * 127
// = 16002. mw = -32 dw (kMw 16, with qs16).
struct FusedQ6_K : SubBlockScales, UnsignedCodes {
  static constexpr int64_t kSuperBytes = sizeof(quant::BlockQ6_K);
  static constexpr int kMw = 16;
  static inline void Scales(const uint8_t* sb, SuperScales* sc, float* mw) {
    const auto* x = reinterpret_cast<const quant::BlockQ6_K*>(sb);
    FromBytes(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x->scales)), _cvtsh_ss(x->d), sc);
    StoreTimes(*sc, -32.0f, mw);
  }
  template <int C>
  static inline __m256i Codes(const uint8_t* sb) {
    const auto* x = reinterpret_cast<const quant::BlockQ6_K*>(sb);
    constexpr int h = C / 4, q = C % 4;
    return _mm256_or_si256(Field<4 * (q / 2), 0, 4>(Load32(x->ql + 64 * h + 32 * (q % 2))),
                           Field<2 * q, 4, 2>(Load32(x->qh + 32 * h)));
  }
};

// Up to this many input rows a tile multiplies each row's weight scales by
// the activation scales once per super-block (kept in registers); above it
// per chunk (fewer live registers).
constexpr int kScaledMb = 2;

// Chunk C (codes 32C..32C+31 of the super-block at k) of R weight rows x
// MB input rows. MB <= kScaledMb: sc[r][m] = row r's weight scales times
// m's activation scales (lane c: chunk c); otherwise sc[r][0] holds the
// weight scales and da[m] gives the activation scales.
template <class T, int R, int MB, int C, int SM>
inline void FusedChunk(const uint8_t* const* sb, const SuperScales (&sc)[R][SM],
                       const uint8_t* const* act, const float* const* da, int64_t k,
                       __m256 (&acc)[R][MB]) {
  __m256i q[R];
  __m256i u[R];
  for (int r = 0; r < R; ++r) {
    q[r] = T::template Codes<C>(sb[r]);
    u[r] = T::Weights(q[r]);
  }
  const int64_t kc = k + 32 * C;
  if constexpr (MB <= kScaledMb) {
    for (int m = 0; m < MB; ++m) {
      const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(act[m] + kc));
      for (int r = 0; r < R; ++r) {
        const __m256i p = Dot32(u[r], T::Acts(q[r], a));
        acc[r][m] =
            _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), T::template Wsc<C>(sc[r][m]), acc[r][m]);
      }
    }
  } else {
    __m256 wsc[R];
    for (int r = 0; r < R; ++r) wsc[r] = T::template Wsc<C>(sc[r][0]);
    for (int m = 0; m < MB; ++m) {
      const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(act[m] + kc));
      const __m256 sa = _mm256_broadcast_ss(da[m] + kc / 32);
      for (int r = 0; r < R; ++r) {
        const __m256i p = Dot32(u[r], T::Acts(q[r], a));
        acc[r][m] =
            _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_mul_ps(wsc[r], sa), acc[r][m]);
      }
    }
  }
}

// R weight rows x MB input rows; d a multiple of 256. mw_buf: R x d / 256 x
// T::kMw floats of scratch (the offsets, summed after the loop). Per
// super-block, the same bytes of the next tile's rows (pf_ahead further)
// are prefetched.
template <class T, int R, int MB>
inline void FusedTile(const uint8_t* const* wrow, const uint8_t* const* act, int64_t d,
                      int64_t pf_ahead, float* mw_buf, float* const* out) {
  const ActLayout al(d);
  const float* da[MB];
  for (int m = 0; m < MB; ++m) da[m] = reinterpret_cast<const float*>(act[m] + al.da);
  __m256 acc[R][MB];
  for (int r = 0; r < R; ++r)
    for (int m = 0; m < MB; ++m) acc[r][m] = _mm256_setzero_ps();
  const int64_t nsb = d / 256;
  for (int64_t s = 0; s < nsb; ++s) {
    constexpr int kSm = MB <= kScaledMb ? MB : 1;
    const uint8_t* sb[R];
    SuperScales sc[R][kSm];
    for (int r = 0; r < R; ++r) {
      sb[r] = wrow[r] + s * T::kSuperBytes;
      const char* pf = reinterpret_cast<const char*>(sb[r] + pf_ahead);
      for (int64_t off = 0; off < T::kSuperBytes; off += 64) _mm_prefetch(pf + off, _MM_HINT_T0);
      _mm_prefetch(pf + T::kSuperBytes - 1, _MM_HINT_T0);
      if constexpr (MB <= kScaledMb) {
        SuperScales w;
        T::Scales(sb[r], &w, mw_buf + (r * nsb + s) * T::kMw);
        for (int m = 0; m < MB; ++m) T::ScaleBy(w, da[m] + 8 * s, &sc[r][m]);
      } else {
        T::Scales(sb[r], &sc[r][0], mw_buf + (r * nsb + s) * T::kMw);
      }
    }
    const int64_t k = 256 * s;
    FusedChunk<T, R, MB, 0>(sb, sc, act, da, k, acc);
    FusedChunk<T, R, MB, 1>(sb, sc, act, da, k, acc);
    FusedChunk<T, R, MB, 2>(sb, sc, act, da, k, acc);
    FusedChunk<T, R, MB, 3>(sb, sc, act, da, k, acc);
    FusedChunk<T, R, MB, 4>(sb, sc, act, da, k, acc);
    FusedChunk<T, R, MB, 5>(sb, sc, act, da, k, acc);
    FusedChunk<T, R, MB, 6>(sb, sc, act, da, k, acc);
    FusedChunk<T, R, MB, 7>(sb, sc, act, da, k, acc);
  }
  for (int m = 0; m < MB; ++m) {
    for (int r = 0; r < R; ++r) {
      float offset = 0.0f;
      if constexpr (T::kMw > 0) {
        // sum_j mw[j] * qs[j] (qs32 with kMw 8, qs16 with 16), 8 j per fma.
        const float* qs =
            reinterpret_cast<const float*>(act[m] + (T::kMw == 8 ? al.qs32 : al.qs16));
        const float* mw = mw_buf + r * nsb * T::kMw;
        __m256 macc = _mm256_setzero_ps();
        for (int64_t j = 0; j < nsb * T::kMw; j += 8)
          macc = _mm256_fmadd_ps(_mm256_loadu_ps(mw + j), _mm256_loadu_ps(qs + j), macc);
        offset = Reduce8(macc);
      }
      out[m][r] = Reduce8(acc[r][m]) + offset;
    }
  }
}

// The fused kernel of type T for FusedRows (quant_kernel_impl.h): tiles of 4
// weight rows at M = 1, 2 at M = 2..4, 1 at M = 5..8 (at most 8
// accumulators of the 16 ymm registers).
template <class T>
struct Fused {
  static constexpr int RowsFor(int mb) { return mb == 1 ? 4 : (mb <= 4 ? 2 : 1); }
  template <int R, int MB>
  static void Tile(const uint8_t* const* wrow, const uint8_t* const* act, int64_t d,
                   int64_t pf_ahead, float* mw_buf, float* const* out) {
    FusedTile<T, R, MB>(wrow, act, d, pf_ahead, mw_buf, out);
  }
};

template <class T>
void Run(const uint8_t* acts, int64_t rows, const uint8_t* w, int64_t d, int64_t row_bytes,
         int64_t v0, int64_t v1, float* out, int64_t ldo, float* mw_buf) {
  FusedKernel<Fused<T>>(acts, rows, w, d, row_bytes, v0, v1, out, ldo, mw_buf);
}

}  // namespace

namespace quant_kernel_internal {
bool Avx2FusedCovers(quant::GgmlType type, int64_t d) {
  using quant::GgmlType;
  if (d % 256 != 0) return false;
  switch (type) {
    case GgmlType::kQ8_0: case GgmlType::kQ4_0: case GgmlType::kQ4_1: case GgmlType::kQ5_0:
    case GgmlType::kQ5_1: case GgmlType::kIQ4_NL: case GgmlType::kQ2_K: case GgmlType::kQ3_K:
    case GgmlType::kQ4_K: case GgmlType::kQ5_K: case GgmlType::kQ6_K:
      return true;
    default:
      return false;
  }
}

void KernelAvx2(const QuantTypeInfo& type, const uint8_t* acts, int64_t rows, const uint8_t* w,
                int64_t d, int64_t v0, int64_t v1, float* out, int64_t ldo, uint8_t* scratch,
                int64_t few_rows_max) {
  // More rows than the fused kernel takes in one pass: when it beat the
  // unpacking kernel at its widest (few_rows_max = kFewRowsLimit), the rows
  // run through it in groups of kFewRowsLimit over this task's vocabulary
  // rows [v0, v1) (about 1 MiB of weights: re-read from L2 per group). The
  // unpacking kernel's time per input row falls little with M on this path
  // (its widened vpmaddwd products dominate the unpack): head_bench on an
  // AVX2 EPYC, Q8_0 128256 x 4096: unpacking 13.9 ms per row at N = 64 and
  // 256, fused 8.7 ms per row at N = 8 (docs/performance.md).
  if (rows > kFewRowsLimit && few_rows_max == kFewRowsLimit && Avx2FusedCovers(type.type, d)) {
    const int64_t act_bytes = QuantActRowBytes(d);
    for (int64_t m = 0; m < rows; m += kFewRowsLimit) {
      KernelAvx2(type, acts + m * act_bytes, Min64(kFewRowsLimit, rows - m), w, d, v0, v1,
                 out + m * ldo, ldo, scratch, few_rows_max);
    }
    return;
  }
  if (rows < 1 || rows > few_rows_max || rows > kFewRowsLimit || !Avx2FusedCovers(type.type, d)) {
    RunKernel<Avx2>(type, acts, rows, w, d, v0, v1, out, ldo, scratch);
    return;
  }
  const int64_t row_bytes = d / type.block_size * type.block_bytes;
  // 64-byte aligned room for 4 rows x d / 16 floats (scratch holds 4
  // unpacked rows: QuantUnpackScratchBytes).
  auto* mw_buf =
      reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(scratch) + 63) & ~uintptr_t{63});
  using quant::GgmlType;
  void (*run)(const uint8_t*, int64_t, const uint8_t*, int64_t, int64_t, int64_t, int64_t, float*,
              int64_t, float*) = Run<FusedQ6_K>;
  switch (type.type) {
    case GgmlType::kQ8_0: run = Run<FusedQ8_0>; break;
    case GgmlType::kQ4_0: run = Run<FusedQ4_0>; break;
    case GgmlType::kQ4_1: run = Run<FusedQ4_1>; break;
    case GgmlType::kQ5_0: run = Run<FusedQ5_0>; break;
    case GgmlType::kQ5_1: run = Run<FusedQ5_1>; break;
    case GgmlType::kIQ4_NL: run = Run<FusedIQ4_NL>; break;
    case GgmlType::kQ2_K: run = Run<FusedQ2_K>; break;
    case GgmlType::kQ3_K: run = Run<FusedQ3_K>; break;
    case GgmlType::kQ4_K: run = Run<FusedQ4_K>; break;
    case GgmlType::kQ5_K: run = Run<FusedQ5_K>; break;
    default: break;  // Q6_K (Avx2FusedCovers admits only these)
  }
  run(acts, rows, w, d, row_bytes, v0, v1, out, ldo, mw_buf);
}
}  // namespace quant_kernel_internal
}  // namespace vocabd
