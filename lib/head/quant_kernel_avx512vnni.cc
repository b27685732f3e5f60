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

#include <cstdint>

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

struct Avx512Vnni {
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

}  // namespace

namespace quant_kernel_internal {
void KernelAvx512Vnni(const QuantTypeInfo& type, const uint8_t* acts, int64_t rows,
                      const uint8_t* w, int64_t d, int64_t v0, int64_t v1, float* out,
                      int64_t ldo, uint8_t* scratch) {
  RunKernel<Avx512Vnni>(type, acts, rows, w, d, v0, v1, out, ldo, scratch);
}
}  // namespace quant_kernel_internal
}  // namespace vocabd
