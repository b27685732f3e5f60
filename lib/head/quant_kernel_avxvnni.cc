// The AVX-VNNI path of the quantized LM-head kernel (quant_kernel.h): the
// avx512vnni scheme on ymm registers (32 codes per VEX vpdpbusd, 8 int32
// lanes; lanes 0-3 sub-block 2c, 4-7 sub-block 2c + 1; lane scales dal as on AVX-512). Compiled with -mavx2 -mfma -mavxvnni; reached only when
// QuantKernelIsaSupported(kAvxVnni).
#include <immintrin.h>

#include <cstdint>

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

struct AvxVnni {
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
    const __m256i idx = _mm256_set_epi32(1, 1, 1, 1, 0, 0, 0, 0);
    for (int64_t k = 0; k < d; k += 32) {
      __m256i wq[R];
      __m256 ws[R];
      for (int r = 0; r < R; ++r) {
        wq[r] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(t.u[r] + k));
        const __m128 two = _mm_castpd_ps(_mm_load_sd(reinterpret_cast<const double*>(t.dw[r] + k / 16)));
        ws[r] = _mm256_permutevar8x32_ps(_mm256_castps128_ps256(two), idx);
      }
      for (int m = 0; m < MB; ++m) {
        const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(t.act[m] + k));
        const __m256 sa = _mm256_loadu_ps(reinterpret_cast<const float*>(t.act[m] + al.dal) + k / 4);
        for (int r = 0; r < R; ++r) {
          const __m256i p = _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), wq[r], a);
          acc[r][m] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_mul_ps(ws[r], sa), acc[r][m]);
        }
      }
    }
    const int64_t nj = d / 16;  // a multiple of 2
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

}  // namespace

namespace quant_kernel_internal {
void KernelAvxVnni(const QuantTypeInfo& type, const uint8_t* acts, int64_t rows, const uint8_t* w,
                   int64_t d, int64_t v0, int64_t v1, float* out, int64_t ldo, uint8_t* scratch,
                   int64_t few_rows_max) {
  // Up to few_rows_max rows (measured at LmHead::Create): the avx2 path's
  // fused kernel where it covers the type and d (no unpack pass; AVX-VNNI
  // CPUs have AVX2); otherwise this path's unpacking kernel.
  if (rows >= 1 && rows <= few_rows_max && rows <= kFewRowsLimit && Avx2FusedCovers(type.type, d)) {
    KernelAvx2(type, acts, rows, w, d, v0, v1, out, ldo, scratch, few_rows_max);
    return;
  }
  RunKernel<AvxVnni>(type, acts, rows, w, d, v0, v1, out, ldo, scratch);
}
}  // namespace quant_kernel_internal
}  // namespace vocabd
