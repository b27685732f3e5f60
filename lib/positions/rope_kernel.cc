#include "lib/positions/rope_kernel.h"

#include <immintrin.h>

#include <cstdint>

namespace vocabd {
namespace {

// ---- scalar (also the tails of the vector versions) ----

inline void HalfSplitTail(float* x, const float* c, const float* s, int from, int half) {
  float* lo = x;
  float* hi = x + half;
  for (int i = from; i < half; ++i) {
    const float a = lo[i];
    const float b = hi[i];
    lo[i] = a * c[i] - b * s[i];
    hi[i] = b * c[i] + a * s[i];
  }
}

inline void InterleavedTail(float* x, const float* c, const float* s, int from, int half) {
  for (int i = from; i < half; ++i) {
    const float a = x[2 * i];
    const float b = x[2 * i + 1];
    x[2 * i] = a * c[i] - b * s[i];
    x[2 * i + 1] = b * c[i] + a * s[i];
  }
}

void HalfSplitScalar(float* x, int64_t n, int64_t x_stride, const float* const* cos_rows,
                     const float* const* sin_rows, int64_t cs_step, int half) {
  for (int64_t j = 0; j < n; ++j) {
    HalfSplitTail(x + j * x_stride, cos_rows[j * cs_step], sin_rows[j * cs_step], 0, half);
  }
}

void InterleavedScalar(float* x, int64_t n, int64_t x_stride, const float* const* cos_rows,
                       const float* const* sin_rows, int64_t cs_step, int half) {
  for (int64_t j = 0; j < n; ++j) {
    InterleavedTail(x + j * x_stride, cos_rows[j * cs_step], sin_rows[j * cs_step], 0, half);
  }
}

// ---- AVX2 (8 floats) ----

__attribute__((target("avx2"))) void HalfSplitAvx2(float* x, int64_t n, int64_t x_stride,
                                                   const float* const* cos_rows,
                                                   const float* const* sin_rows, int64_t cs_step,
                                                   int half) {
  for (int64_t j = 0; j < n; ++j) {
    float* row = x + j * x_stride;
    const float* c = cos_rows[j * cs_step];
    const float* s = sin_rows[j * cs_step];
    int i = 0;
    for (; i + 8 <= half; i += 8) {
      const __m256 a = _mm256_loadu_ps(row + i);
      const __m256 b = _mm256_loadu_ps(row + half + i);
      const __m256 vc = _mm256_loadu_ps(c + i);
      const __m256 vs = _mm256_loadu_ps(s + i);
      _mm256_storeu_ps(row + i, _mm256_sub_ps(_mm256_mul_ps(a, vc), _mm256_mul_ps(b, vs)));
      _mm256_storeu_ps(row + half + i, _mm256_add_ps(_mm256_mul_ps(b, vc), _mm256_mul_ps(a, vs)));
    }
    HalfSplitTail(row, c, s, i, half);
  }
}

__attribute__((target("avx2"))) void InterleavedAvx2(float* x, int64_t n, int64_t x_stride,
                                                     const float* const* cos_rows,
                                                     const float* const* sin_rows,
                                                     int64_t cs_step, int half) {
  // 8 floats = 4 pairs. cos -> [c0 c0 c1 c1 ...], sin -> [-s0 s0 -s1 s1 ...],
  // swapped x = [b0 a0 b1 a1 ...]:  out = x * cos + swapped * sin.
  const __m256i dup = _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3);
  const __m256 sign = _mm256_castsi256_ps(
      _mm256_setr_epi32(INT32_MIN, 0, INT32_MIN, 0, INT32_MIN, 0, INT32_MIN, 0));
  for (int64_t j = 0; j < n; ++j) {
    float* row = x + j * x_stride;
    const float* c = cos_rows[j * cs_step];
    const float* s = sin_rows[j * cs_step];
    int i = 0;
    for (; i + 4 <= half; i += 4) {
      const __m256 v = _mm256_loadu_ps(row + 2 * i);
      const __m256 vc = _mm256_permutevar8x32_ps(_mm256_castps128_ps256(_mm_loadu_ps(c + i)), dup);
      const __m256 vs = _mm256_xor_ps(
          _mm256_permutevar8x32_ps(_mm256_castps128_ps256(_mm_loadu_ps(s + i)), dup), sign);
      const __m256 sw = _mm256_permute_ps(v, 0xB1);
      _mm256_storeu_ps(row + 2 * i, _mm256_add_ps(_mm256_mul_ps(v, vc), _mm256_mul_ps(sw, vs)));
    }
    InterleavedTail(row, c, s, i, half);
  }
}

// ---- AVX-512 (16 floats) ----

__attribute__((target("avx512f"))) void HalfSplitAvx512(float* x, int64_t n, int64_t x_stride,
                                                        const float* const* cos_rows,
                                                        const float* const* sin_rows,
                                                        int64_t cs_step, int half) {
  for (int64_t j = 0; j < n; ++j) {
    float* row = x + j * x_stride;
    const float* c = cos_rows[j * cs_step];
    const float* s = sin_rows[j * cs_step];
    int i = 0;
    for (; i + 16 <= half; i += 16) {
      const __m512 a = _mm512_loadu_ps(row + i);
      const __m512 b = _mm512_loadu_ps(row + half + i);
      const __m512 vc = _mm512_loadu_ps(c + i);
      const __m512 vs = _mm512_loadu_ps(s + i);
      _mm512_storeu_ps(row + i, _mm512_sub_ps(_mm512_mul_ps(a, vc), _mm512_mul_ps(b, vs)));
      _mm512_storeu_ps(row + half + i, _mm512_add_ps(_mm512_mul_ps(b, vc), _mm512_mul_ps(a, vs)));
    }
    HalfSplitTail(row, c, s, i, half);
  }
}

__attribute__((target("avx512f"))) void InterleavedAvx512(float* x, int64_t n, int64_t x_stride,
                                                          const float* const* cos_rows,
                                                          const float* const* sin_rows,
                                                          int64_t cs_step, int half) {
  const __m512i dup = _mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
  const __m512i sign = _mm512_setr_epi32(INT32_MIN, 0, INT32_MIN, 0, INT32_MIN, 0, INT32_MIN, 0,
                                         INT32_MIN, 0, INT32_MIN, 0, INT32_MIN, 0, INT32_MIN, 0);
  for (int64_t j = 0; j < n; ++j) {
    float* row = x + j * x_stride;
    const float* c = cos_rows[j * cs_step];
    const float* s = sin_rows[j * cs_step];
    int i = 0;
    for (; i + 8 <= half; i += 8) {
      const __m512 v = _mm512_loadu_ps(row + 2 * i);
      // Masked forms throughout: GCC 12's unmasked permutes read
      // _mm512_undefined_ps and warn -Wmaybe-uninitialized (GCC bug 105593).
      const __m512 vc =
          _mm512_maskz_permutexvar_ps(0xFFFF, dup, _mm512_maskz_loadu_ps(0x00FF, c + i));
      const __m512 vs_plain =
          _mm512_maskz_permutexvar_ps(0xFFFF, dup, _mm512_maskz_loadu_ps(0x00FF, s + i));
      const __m512 vs = _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(vs_plain), sign));
      const __m512 sw = _mm512_mask_permute_ps(v, 0xFFFF, v, 0xB1);
      _mm512_storeu_ps(row + 2 * i, _mm512_add_ps(_mm512_mul_ps(v, vc), _mm512_mul_ps(sw, vs)));
    }
    InterleavedTail(row, c, s, i, half);
  }
}

}  // namespace

RopeIsa DetectRopeIsa() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return RopeIsa::kAvx512;
  if (__builtin_cpu_supports("avx2")) return RopeIsa::kAvx2;
  return RopeIsa::kScalar;
}

const char* RopeIsaName(RopeIsa isa) {
  switch (isa) {
    case RopeIsa::kAuto: return "auto";
    case RopeIsa::kScalar: return "scalar";
    case RopeIsa::kAvx2: return "avx2";
    case RopeIsa::kAvx512: return "avx512";
  }
  return "unknown";
}

RotateRowsFn GetRotateRows(bool interleaved, RopeIsa isa) {
  static const RopeIsa best = DetectRopeIsa();
  if (isa == RopeIsa::kAuto) isa = best;
  if (isa == RopeIsa::kAvx512 && best != RopeIsa::kAvx512) isa = best;
  if (isa == RopeIsa::kAvx2 && best == RopeIsa::kScalar) isa = best;
  switch (isa) {
    case RopeIsa::kAvx512: return interleaved ? InterleavedAvx512 : HalfSplitAvx512;
    case RopeIsa::kAvx2: return interleaved ? InterleavedAvx2 : HalfSplitAvx2;
    default: return interleaved ? InterleavedScalar : HalfSplitScalar;
  }
}

}  // namespace vocabd
