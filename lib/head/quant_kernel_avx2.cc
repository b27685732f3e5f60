// The AVX2 path of the quantized LM-head kernel (quant_kernel.h), for CPUs
// without VNNI: per 16 codes, u and a widened to int16 (vpmovzxbw /
// vpmovsxbw) and multiplied pairwise into 8 int32 lanes (vpmaddwd; u <= 255
// and |a| <= 127 cannot overflow, unlike vpmaddubsw's saturating int16);
// the 16 codes share one sub-block scale dw and one activation scale da.
// Compiled with -mavx2 -mfma -mf16c; reached only when
// QuantKernelIsaSupported(kAvx2).
//
// Few rows (M < kGemmMinRows) of Q8_0, Q4_K and Q6_K with hidden_size a
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
// differ from the unpacking kernel's (M >= kGemmMinRows) by float rounding
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

inline float F16(uint16_t h) { return _cvtsh_ss(h); }

// Lanes 0-3 = x, lanes 4-7 = y.
inline __m256 Pair(float x, float y) {
  return _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_set1_ps(x)), _mm_set1_ps(y), 1);
}

// 8 int32 lanes, lane i = sum of the 4 products of codes 4i..4i+3.
inline __m256i Dot32(__m256i u, __m256i a) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, a), _mm256_set1_epi16(1));
}

// Per 256 codes (8 chunks of 32): Scales fills ws[c] (the weight scale of
// chunk c's two 16-code halves) and the offsets the row's mw term uses
// (kMw per 256 codes, or none); Codes<C> / Acts build chunk C's operands.
struct FusedQ8_0 {
  static constexpr int64_t kSuperBytes = 8 * 34;
  static constexpr int kMw = 0;
  static inline void Scales(const uint8_t* sb, float (*ws)[2], float* /*mw*/) {
    const auto* x = reinterpret_cast<const quant::BlockQ8_0*>(sb);
    for (int c = 0; c < 8; ++c) ws[c][0] = ws[c][1] = F16(x[c].d);
  }
  // |q| as unsigned bytes (|-128| = 0x80 = 128).
  static inline __m256i Codes(const uint8_t* sb, int c) {
    const auto* x = reinterpret_cast<const quant::BlockQ8_0*>(sb);
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[c].qs));
  }
  static inline __m256i Weights(__m256i q) { return _mm256_sign_epi8(q, q); }
  static inline __m256i Acts(__m256i q, __m256i a) { return _mm256_sign_epi8(a, q); }
};

struct FusedQ4_K {
  static constexpr int64_t kSuperBytes = 144;
  static constexpr int kMw = 8;  // one min per 32 codes, with qs32
  static inline void Scales(const uint8_t* sb, float (*ws)[2], float* mw) {
    const auto* x = reinterpret_cast<const quant::BlockQ4_K*>(sb);
    const float d = F16(x->d), dmin = F16(x->dmin);
    for (int j = 0; j < 8; ++j) {
      int sc, m;
      ScaleMinK4(j, x->scales, &sc, &m);
      ws[j][0] = ws[j][1] = d * static_cast<float>(sc);
      mw[j] = -dmin * static_cast<float>(m);
    }
  }
  // Chunk c: qs[32 (c / 2) ..] low nibbles (c even) or high nibbles (c odd).
  static inline __m256i Codes(const uint8_t* sb, int c) {
    const auto* x = reinterpret_cast<const quant::BlockQ4_K*>(sb);
    const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x->qs + 32 * (c / 2)));
    const __m256i lo = _mm256_set1_epi8(0x0F);
    return c % 2 == 0 ? _mm256_and_si256(q, lo) : _mm256_and_si256(_mm256_srli_epi16(q, 4), lo);
  }
  static inline __m256i Weights(__m256i u) { return u; }
  static inline __m256i Acts(__m256i, __m256i a) { return a; }
};

struct FusedQ6_K {
  static constexpr int64_t kSuperBytes = 210;
  static constexpr int kMw = 16;  // one offset per 16 codes, with qs16
  static inline void Scales(const uint8_t* sb, float (*ws)[2], float* mw) {
    const auto* x = reinterpret_cast<const quant::BlockQ6_K*>(sb);
    const float d = F16(x->d);
    for (int j = 0; j < 16; ++j) {
      const float dw = d * static_cast<float>(x->scales[j]);
      ws[j / 2][j % 2] = dw;
      mw[j] = -32.0f * dw;
    }
  }
  // Chunk c = 4 h + q of half h: ql[64 h + 32 (q % 2) ..] low (q < 2) or
  // high nibbles, with bits 2q, 2q + 1 of qh[32 h ..] as bits 4-5.
  static inline __m256i Codes(const uint8_t* sb, int c) {
    const auto* x = reinterpret_cast<const quant::BlockQ6_K*>(sb);
    const int h = c / 4, q = c % 4;
    const __m256i ql =
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x->ql + 64 * h + 32 * (q % 2)));
    const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x->qh + 32 * h));
    const __m256i lo4 = _mm256_set1_epi8(0x0F);
    const __m256i nib = q < 2 ? _mm256_and_si256(ql, lo4)
                              : _mm256_and_si256(_mm256_srli_epi16(ql, 4), lo4);
    const __m128i sh = _mm_cvtsi32_si128(2 * q);
    const __m256i hi = _mm256_and_si256(_mm256_srl_epi16(qh, sh), _mm256_set1_epi8(0x03));
    return _mm256_or_si256(nib, _mm256_slli_epi16(hi, 4));
  }
  static inline __m256i Weights(__m256i u) { return u; }
  static inline __m256i Acts(__m256i, __m256i a) { return a; }
};

// R weight rows x MB input rows; d a multiple of 256. mw_buf: R x d / 256 x
// T::kMw floats of scratch (the offsets, summed after the loop).
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
    const uint8_t* sb[R];
    float ws[R][8][2];
    for (int r = 0; r < R; ++r) {
      sb[r] = wrow[r] + s * T::kSuperBytes;
      const char* pf = reinterpret_cast<const char*>(sb[r] + pf_ahead);
      for (int64_t off = 0; off < T::kSuperBytes; off += 64) _mm_prefetch(pf + off, _MM_HINT_T0);
      _mm_prefetch(pf + T::kSuperBytes - 1, _MM_HINT_T0);
      T::Scales(sb[r], ws[r], mw_buf + (r * nsb + s) * T::kMw);
    }
    for (int c = 0; c < 8; ++c) {
      const int64_t k = 256 * s + 32 * c;
      __m256i q[R];
      __m256i u[R];
      __m256 wsc[R];
      for (int r = 0; r < R; ++r) {
        q[r] = T::Codes(sb[r], c);
        u[r] = T::Weights(q[r]);
        wsc[r] = Pair(ws[r][c][0], ws[r][c][1]);
      }
      for (int m = 0; m < MB; ++m) {
        const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(act[m] + k));
        const __m256 sa = _mm256_broadcast_ss(da[m] + k / 32);
        for (int r = 0; r < R; ++r) {
          const __m256i p = Dot32(u[r], T::Acts(q[r], a));
          acc[r][m] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_mul_ps(wsc[r], sa), acc[r][m]);
        }
      }
    }
  }
  for (int m = 0; m < MB; ++m) {
    for (int r = 0; r < R; ++r) {
      float offset = 0.0f;
      if constexpr (T::kMw > 0) {
        // sum_j mw[j] * qs[j] (qs32 for Q4_K, qs16 for Q6_K), 8 j per fma.
        const float* qs = reinterpret_cast<const float*>(act[m] + (T::kMw == 8 ? al.qs32 : al.qs16));
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

// Tiles: 4 weight rows at M = 1, 2 at M = 2..4, 1 at M = 5..8 (at most 8
// accumulators of the 16 ymm registers).
template <class T, int MB>
inline void FusedRows(const uint8_t* acts, const uint8_t* w, int64_t d, int64_t row_bytes,
                      int64_t v0, int64_t v1, float* out, int64_t ldo, float* mw_buf) {
  const ActLayout al(d);
  constexpr int kR = MB == 1 ? 4 : (MB <= 4 ? 2 : 1);
  const uint8_t* act[MB];
  for (int m = 0; m < MB; ++m) act[m] = acts + m * al.bytes;
  float tmp[MB][kR];
  float* o[MB];
  for (int m = 0; m < MB; ++m) o[m] = tmp[m];
  int64_t v = v0;
  for (; v + kR <= v1; v += kR) {
    const uint8_t* wr[kR];
    for (int r = 0; r < kR; ++r) wr[r] = w + (v + r) * row_bytes;
    FusedTile<T, kR, MB>(wr, act, d, kR * row_bytes, mw_buf, o);
    for (int m = 0; m < MB; ++m)
      for (int r = 0; r < kR; ++r) out[m * ldo + v + r] = tmp[m][r];
  }
  for (; v < v1; ++v) {
    const uint8_t* wr[1] = {w + v * row_bytes};
    FusedTile<T, 1, MB>(wr, act, d, row_bytes, mw_buf, o);
    for (int m = 0; m < MB; ++m) out[m * ldo + v] = tmp[m][0];
  }
}

template <class T>
inline void FusedKernel(const uint8_t* acts, int64_t rows, const uint8_t* w, int64_t d,
                        int64_t row_bytes, int64_t v0, int64_t v1, float* out, int64_t ldo,
                        float* mw_buf) {
  switch (rows) {
    case 1: return FusedRows<T, 1>(acts, w, d, row_bytes, v0, v1, out, ldo, mw_buf);
    case 2: return FusedRows<T, 2>(acts, w, d, row_bytes, v0, v1, out, ldo, mw_buf);
    case 3: return FusedRows<T, 3>(acts, w, d, row_bytes, v0, v1, out, ldo, mw_buf);
    case 4: return FusedRows<T, 4>(acts, w, d, row_bytes, v0, v1, out, ldo, mw_buf);
    case 5: return FusedRows<T, 5>(acts, w, d, row_bytes, v0, v1, out, ldo, mw_buf);
    case 6: return FusedRows<T, 6>(acts, w, d, row_bytes, v0, v1, out, ldo, mw_buf);
    case 7: return FusedRows<T, 7>(acts, w, d, row_bytes, v0, v1, out, ldo, mw_buf);
    default: return FusedRows<T, 8>(acts, w, d, row_bytes, v0, v1, out, ldo, mw_buf);
  }
}

}  // namespace

namespace quant_kernel_internal {
bool Avx2FusedCovers(quant::GgmlType type, int64_t d, int64_t rows) {
  return rows >= 1 && rows < kGemmMinRows && d % 256 == 0 &&
         (type == quant::GgmlType::kQ8_0 || type == quant::GgmlType::kQ4_K ||
          type == quant::GgmlType::kQ6_K);
}

void KernelAvx2(const QuantTypeInfo& type, const uint8_t* acts, int64_t rows, const uint8_t* w,
                int64_t d, int64_t v0, int64_t v1, float* out, int64_t ldo, uint8_t* scratch) {
  if (!Avx2FusedCovers(type.type, d, rows)) {
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
      return FusedKernel<FusedQ8_0>(acts, rows, w, d, row_bytes, v0, v1, out, ldo, mw_buf);
    case quant::GgmlType::kQ4_K:
      return FusedKernel<FusedQ4_K>(acts, rows, w, d, row_bytes, v0, v1, out, ldo, mw_buf);
    default:
      return FusedKernel<FusedQ6_K>(acts, rows, w, d, row_bytes, v0, v1, out, ldo, mw_buf);
  }
}
}  // namespace quant_kernel_internal
}  // namespace vocabd
