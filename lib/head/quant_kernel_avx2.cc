// The AVX2 path of the quantized LM-head kernel (quant_kernel.h), for CPUs
// without VNNI: per 16 codes, u and a widened to int16 (vpmovzxbw /
// vpmovsxbw) and multiplied pairwise into 8 int32 lanes (vpmaddwd; u <= 255
// and |a| <= 127 cannot overflow, unlike vpmaddubsw's saturating int16);
// the 16 codes share one sub-block scale dw and one activation scale da.
// Compiled with -mavx2 -mfma -mf16c; reached only when
// QuantKernelIsaSupported(kAvx2).
//
// Few rows (M <= few_rows_max) of Q8_0, Q4_K and Q6_K with hidden_size a
// multiple of 256 run a fused kernel instead (FusedQ8_0 / FusedQ4_K /
// FusedQ6_K below): the codes of each 32-code chunk are made in a register
// straight from the blocks and multiplied with vpmaddubsw, which is exact
// for these codes, then vpmaddwd sums 4 products per int32 lane. Per chunk
// c (32 codes, one activation block), weight row r, input row m:
//
//   Q4_K, Q6_K:  p  = vpmaddwd(vpmaddubsw(u, a), 1)   u in [0, 63]: each
//                     int16 pair sum |u0 a0 + u1 a1| <= 2 * 63 * 127 < 2^15
//                acc[r][m] += float(p) * (ws * da[m][c])
//                ws lanes 0-3: dw of codes 0-15, lanes 4-7: of codes 16-31
//   Q8_0:        p  = vpmaddwd(vpmaddubsw(|q|, sign(a, q)), 1)  (ggml's
//                     signed product: |q| <= 128, |a| <= 127, exact)
//                acc[r][m] += float(p) * (d * da[m][c])
//
// logit = sum of acc's 8 lanes + sum_j mw[j] * qs[m][j] (Q4_K: per 32
// codes with qs32; Q6_K: per 16 with qs16; Q8_0 has no offset term: the
// signed codes carry it). Each (r, m) has its own accumulators summed in
// k order, so a row's logits do not depend on M within this kernel; they
// differ from the unpacking kernel's (M > few_rows_max) by float rounding
// only (the integer dot products are exact in both).
#include <immintrin.h>

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

// A super-block's weight scales (dw per 16 codes), as two vectors:
//   Q8_0, Q4_K: v[0] lane c = the scale of chunk c (both its halves)
//   Q6_K:       v[0] lanes = dw[0..7], v[1] lanes = dw[8..15]
struct SuperScales {
  __m256 v[2];
};

// Per 256 codes (8 chunks of 32): Scales fills the weight scales and the
// offsets the row's mw term uses (kMw per 256 codes, or none); Codes<C>,
// Weights and Acts build chunk C's operands, Wsc<C> its scale lanes.
// Types with one weight scale per 32-code chunk (Q8_0, Q4_K): SuperScales
// v[0] lane c is chunk c's scale.
struct ChunkScales {
  template <int C>
  static inline __m256 Wsc(const SuperScales& sc) {
    return _mm256_permutevar8x32_ps(sc.v[0], _mm256_set1_epi32(C));
  }
  static inline void ScaleBy(const SuperScales& w, const float* da, SuperScales* out) {
    out->v[0] = _mm256_mul_ps(w.v[0], _mm256_loadu_ps(da));
  }
};

struct FusedQ8_0 : ChunkScales {
  static constexpr int64_t kSuperBytes = 8 * 34;
  static constexpr int kMw = 0;
  static inline void Scales(const uint8_t* sb, SuperScales* sc, float* /*mw*/) {
    const auto* x = reinterpret_cast<const quant::BlockQ8_0*>(sb);
    const __m128i h = _mm_setr_epi16(
        static_cast<short>(x[0].d), static_cast<short>(x[1].d), static_cast<short>(x[2].d),
        static_cast<short>(x[3].d), static_cast<short>(x[4].d), static_cast<short>(x[5].d),
        static_cast<short>(x[6].d), static_cast<short>(x[7].d));
    sc->v[0] = _mm256_cvtph_ps(h);
  }
  template <int C>
  static inline __m256i Codes(const uint8_t* sb) {
    const auto* x = reinterpret_cast<const quant::BlockQ8_0*>(sb);
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[C].qs));
  }
  // |q| as unsigned bytes (|-128| = 0x80 = 128) and a with q's sign.
  static inline __m256i Weights(__m256i q) { return _mm256_sign_epi8(q, q); }
  static inline __m256i Acts(__m256i q, __m256i a) { return _mm256_sign_epi8(a, q); }
};

struct FusedQ4_K : ChunkScales {
  static constexpr int64_t kSuperBytes = 144;
  static constexpr int kMw = 8;  // one min per 32 codes, with qs32
  // ggml's 32-bit kmask unpacking of the 12 scale bytes: 8 six-bit scales
  // in bytes 0-7, the 8 mins in bytes 8-15.
  static inline void Scales(const uint8_t* sb, SuperScales* sc, float* mw) {
    const auto* x = reinterpret_cast<const quant::BlockQ4_K*>(sb);
    uint32_t s[4];
    std::memcpy(s, x->scales, 12);
    const uint32_t kmask1 = 0x3F3F3F3Fu, kmask2 = 0x0F0F0F0Fu, kmask3 = 0x03030303u;
    s[3] = ((s[2] >> 4) & kmask2) | (((s[1] >> 6) & kmask3) << 4);
    const uint32_t m_lo = s[1] & kmask1;
    s[1] = (s[2] & kmask2) | (((s[0] >> 6) & kmask3) << 4);
    s[2] = m_lo;
    s[0] &= kmask1;
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s));
    const __m256 scales = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(b));
    const __m256 mins = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(b, 8)));
    sc->v[0] = _mm256_mul_ps(scales, _mm256_set1_ps(_cvtsh_ss(x->d)));
    _mm256_storeu_ps(mw, _mm256_mul_ps(mins, _mm256_set1_ps(-_cvtsh_ss(x->dmin))));
  }
  // Chunk C: qs[32 (C / 2) ..] low nibbles (C even) or high nibbles (C odd).
  template <int C>
  static inline __m256i Codes(const uint8_t* sb) {
    const auto* x = reinterpret_cast<const quant::BlockQ4_K*>(sb);
    const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x->qs + 32 * (C / 2)));
    const __m256i lo = _mm256_set1_epi8(0x0F);
    if constexpr (C % 2 == 0) return _mm256_and_si256(q, lo);
    return _mm256_and_si256(_mm256_srli_epi16(q, 4), lo);
  }
  static inline __m256i Weights(__m256i u) { return u; }
  static inline __m256i Acts(__m256i, __m256i a) { return a; }
};

struct FusedQ6_K {
  static constexpr int64_t kSuperBytes = 210;
  static constexpr int kMw = 16;  // one offset per 16 codes, with qs16
  static inline void Scales(const uint8_t* sb, SuperScales* sc, float* mw) {
    const auto* x = reinterpret_cast<const quant::BlockQ6_K*>(sb);
    const __m128i s8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x->scales));
    const __m256 d = _mm256_set1_ps(_cvtsh_ss(x->d));
    sc->v[0] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(s8)), d);
    sc->v[1] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(s8, 8))), d);
    const __m256 m32 = _mm256_set1_ps(-32.0f);
    _mm256_storeu_ps(mw, _mm256_mul_ps(sc->v[0], m32));
    _mm256_storeu_ps(mw + 8, _mm256_mul_ps(sc->v[1], m32));
  }
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
  // Chunk C = 4 h + q of half h: ql[64 h + 32 (q % 2) ..] low (q < 2) or
  // high nibbles, with bits 2q, 2q + 1 of qh[32 h ..] as bits 4-5.
  template <int C>
  static inline __m256i Codes(const uint8_t* sb) {
    const auto* x = reinterpret_cast<const quant::BlockQ6_K*>(sb);
    constexpr int h = C / 4, q = C % 4;
    const __m256i ql =
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x->ql + 64 * h + 32 * (q % 2)));
    const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x->qh + 32 * h));
    const __m256i lo4 = _mm256_set1_epi8(0x0F);
    __m256i nib;
    if constexpr (q < 2) {
      nib = _mm256_and_si256(ql, lo4);
    } else {
      nib = _mm256_and_si256(_mm256_srli_epi16(ql, 4), lo4);
    }
    // Bits 2q, 2q + 1 of each qh byte moved to bits 4-5.
    __m256i hi;
    if constexpr (2 * q >= 4) {
      hi = _mm256_srli_epi16(qh, 2 * q - 4);
    } else {
      hi = _mm256_slli_epi16(qh, 4 - 2 * q);
    }
    return _mm256_or_si256(nib, _mm256_and_si256(hi, _mm256_set1_epi8(0x30)));
  }
  static inline __m256i Weights(__m256i u) { return u; }
  static inline __m256i Acts(__m256i, __m256i a) { return a; }
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
        // sum_j mw[j] * qs[j] (qs32 for Q4_K, qs16 for Q6_K), 8 j per fma.
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

}  // namespace

namespace quant_kernel_internal {
bool Avx2FusedCovers(quant::GgmlType type, int64_t d) {
  return d % 256 == 0 &&
         (type == quant::GgmlType::kQ8_0 || type == quant::GgmlType::kQ4_K ||
          type == quant::GgmlType::kQ6_K);
}

void KernelAvx2(const QuantTypeInfo& type, const uint8_t* acts, int64_t rows, const uint8_t* w,
                int64_t d, int64_t v0, int64_t v1, float* out, int64_t ldo, uint8_t* scratch,
                int64_t few_rows_max) {
  if (rows < 1 || rows > few_rows_max || rows > kFewRowsLimit || !Avx2FusedCovers(type.type, d)) {
    RunKernel<Avx2>(type, acts, rows, w, d, v0, v1, out, ldo, scratch);
    return;
  }
  const int64_t row_bytes = d / type.block_size * type.block_bytes;
  // 64-byte aligned room for 4 rows x d / 16 floats (scratch holds 4
  // unpacked rows: QuantUnpackScratchBytes).
  auto* mw_buf =
      reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(scratch) + 63) & ~uintptr_t{63});
  switch (type.type) {
    case quant::GgmlType::kQ8_0:
      return FusedKernel<Fused<FusedQ8_0>>(acts, rows, w, d, row_bytes, v0, v1, out, ldo, mw_buf);
    case quant::GgmlType::kQ4_K:
      return FusedKernel<Fused<FusedQ4_K>>(acts, rows, w, d, row_bytes, v0, v1, out, ldo, mw_buf);
    default:
      return FusedKernel<Fused<FusedQ6_K>>(acts, rows, w, d, row_bytes, v0, v1, out, ldo, mw_buf);
  }
}
}  // namespace quant_kernel_internal
}  // namespace vocabd
