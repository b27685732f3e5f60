#include "lib/lm_head_kernel.h"

#include <immintrin.h>

#include <cstdint>

// Everything between the target pragmas below is compiled for AVX-512 and
// only reached after DetectHeadKernelIsa() said the CPU has it. No standard
// library templates are instantiated inside those regions (an AVX-512 copy
// of a shared inline function could be picked by the linker for other
// callers).

namespace vocabd {
namespace {

// Input rows per register tile at most; more rows run as several groups
// over the same weight block (measured: tiles of up to 6 input rows x 4
// weight rows run at the FMA peak with the inputs in L2; 8 x 3 tiles were
// 30% slower, the extra input loads per FMA saturate L2).
constexpr int kMaxGroupRows = 6;

// Weight rows per tile for a group of `mb` input rows: R * mb accumulators
// (<= 24) + R weight vectors + 1 input vector fit the 32 zmm registers.
// M = 1 and 2 use 8 weight rows so that 8+ FMA chains hide the FMA latency.
constexpr int TileRows(int mb) {
  return mb <= 2 ? 8 : mb == 3 ? 6 : mb == 4 ? 5 : 4;
}

// Splits `rows` into groups of at most kMaxGroupRows, as even as possible:
// the first `n_hi` groups have `mb_hi` rows, the rest mb_hi - 1.
struct Groups {
  int64_t count;
  int mb_hi;
  int64_t n_hi;
};
Groups SplitRows(int64_t rows) {
  Groups g;
  g.count = (rows + kMaxGroupRows - 1) / kMaxGroupRows;
  g.mb_hi = static_cast<int>((rows + g.count - 1) / g.count);
  g.n_hi = rows - g.count * (g.mb_hi - 1);
  return g;
}

// ---------------------------------------------------------------------------
// F32 (AVX512F)
#pragma GCC push_options
#pragma GCC target("avx512f")

// Sum of the 16 lanes in a fixed tree: halves, quarters, pairs, lanes.
inline float Reduce16(__m512 v) {
  // The maskz forms with a full mask are the plain instructions; the
  // unmasked intrinsics trip GCC 12's -Wuninitialized (_mm512_undefined_ps).
  constexpr __mmask16 kAll = 0xFFFF;
  v = _mm512_add_ps(v, _mm512_maskz_shuffle_f32x4(kAll, v, v, 0x4E));  // other 256-bit half
  v = _mm512_add_ps(v, _mm512_maskz_shuffle_f32x4(kAll, v, v, 0xB1));  // other 128-bit quarter
  v = _mm512_add_ps(v, _mm512_maskz_permute_ps(kAll, v, 0x4E));        // other pair
  v = _mm512_add_ps(v, _mm512_maskz_permute_ps(kAll, v, 0xB1));        // other lane
  return _mm512_cvtss_f32(v);
}

// out[m * ldo + r] = dot(x[m], w[r]) for r < R, m < MB; rows of x and w have
// stride d.
template <int R, int MB>
void TileF32(const float* x, int64_t d, const float* w, float* out, int64_t ldo) {
  __m512 acc[R][MB];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
    for (int m = 0; m < MB; ++m) acc[r][m] = _mm512_setzero_ps();
  }
  int64_t k = 0;
  for (; k + 16 <= d; k += 16) {
    __m512 wv[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) wv[r] = _mm512_loadu_ps(w + r * d + k);
#pragma GCC unroll 8
    for (int m = 0; m < MB; ++m) {
      const __m512 xv = _mm512_loadu_ps(x + m * d + k);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) acc[r][m] = _mm512_fmadd_ps(wv[r], xv, acc[r][m]);
    }
  }
  if (k < d) {
    const __mmask16 mask = static_cast<__mmask16>((1u << (d - k)) - 1u);
    __m512 wv[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) wv[r] = _mm512_maskz_loadu_ps(mask, w + r * d + k);
#pragma GCC unroll 8
    for (int m = 0; m < MB; ++m) {
      const __m512 xv = _mm512_maskz_loadu_ps(mask, x + m * d + k);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) acc[r][m] = _mm512_fmadd_ps(wv[r], xv, acc[r][m]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
    for (int m = 0; m < MB; ++m) out[m * ldo + r] = Reduce16(acc[r][m]);
  }
}

using TileF32Fn = void (*)(const float*, int64_t, const float*, float*, int64_t);

// mb in [1, kMaxGroupRows]; 0 (an unused "lo" group size) gives a valid
// pointer that is never called.
template <int R>
TileF32Fn TileF32For(int mb) {
  switch (mb) {
    case 2: return &TileF32<R, 2>;
    case 3: return &TileF32<R, 3>;
    case 4: return &TileF32<R, 4>;
    case 5: return &TileF32<R, 5>;
    case 6: return &TileF32<R, 6>;
    default: return &TileF32<R, 1>;
  }
}

TileF32Fn PickF32(int r, int mb) {
  switch (r) {
    case 8: return TileF32For<8>(mb);
    case 6: return TileF32For<6>(mb);
    case 5: return TileF32For<5>(mb);
    case 4: return TileF32For<4>(mb);
    default: return TileF32For<1>(mb);
  }
}

void KernelF32(const float* x, int64_t rows, const float* w, int64_t d, int64_t v0, int64_t v1,
               float* out, int64_t ldo) {
  const Groups g = SplitRows(rows);
  const int tile_r = TileRows(g.mb_hi);
  const TileF32Fn wide_hi = PickF32(tile_r, g.mb_hi);
  const TileF32Fn wide_lo = PickF32(tile_r, g.mb_hi - 1);
  const TileF32Fn narrow_hi = PickF32(1, g.mb_hi);
  const TileF32Fn narrow_lo = PickF32(1, g.mb_hi - 1);
  int64_t v = v0;
  for (; v < v1; ) {
    const bool wide = v + tile_r <= v1;
    const TileF32Fn hi = wide ? wide_hi : narrow_hi;
    const TileF32Fn lo = wide ? wide_lo : narrow_lo;
    const float* wv = w + v * d;
    int64_t m0 = 0;
    for (int64_t i = 0; i < g.count; ++i) {
      const bool is_hi = i < g.n_hi;
      (is_hi ? hi : lo)(x + m0 * d, d, wv, out + m0 * ldo + v, ldo);
      m0 += is_hi ? g.mb_hi : g.mb_hi - 1;
    }
    v += wide ? tile_r : 1;
  }
}

#pragma GCC pop_options

// ---------------------------------------------------------------------------
// BF16 (AVX512F + AVX512BW + AVX512_BF16)
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512bf16")

inline __m512bh LoadBf16(const uint16_t* p) {
  return (__m512bh)(_mm512_loadu_si512(p));
}
inline __m512bh LoadBf16Masked(__mmask32 mask, const uint16_t* p) {
  return (__m512bh)(_mm512_maskz_loadu_epi16(mask, p));
}

template <int R, int MB>
void TileBf16(const uint16_t* x, int64_t d, const uint16_t* w, float* out, int64_t ldo) {
  __m512 acc[R][MB];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
    for (int m = 0; m < MB; ++m) acc[r][m] = _mm512_setzero_ps();
  }
  int64_t k = 0;
  for (; k + 32 <= d; k += 32) {
    __m512bh wv[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) wv[r] = LoadBf16(w + r * d + k);
#pragma GCC unroll 8
    for (int m = 0; m < MB; ++m) {
      const __m512bh xv = LoadBf16(x + m * d + k);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) acc[r][m] = _mm512_dpbf16_ps(acc[r][m], wv[r], xv);
    }
  }
  if (k < d) {
    const __mmask32 mask = static_cast<__mmask32>((uint64_t{1} << (d - k)) - 1u);
    __m512bh wv[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) wv[r] = LoadBf16Masked(mask, w + r * d + k);
#pragma GCC unroll 8
    for (int m = 0; m < MB; ++m) {
      const __m512bh xv = LoadBf16Masked(mask, x + m * d + k);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) acc[r][m] = _mm512_dpbf16_ps(acc[r][m], wv[r], xv);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
    for (int m = 0; m < MB; ++m) out[m * ldo + r] = Reduce16(acc[r][m]);
  }
}

using TileBf16Fn = void (*)(const uint16_t*, int64_t, const uint16_t*, float*, int64_t);

template <int R>
TileBf16Fn TileBf16For(int mb) {
  switch (mb) {
    case 2: return &TileBf16<R, 2>;
    case 3: return &TileBf16<R, 3>;
    case 4: return &TileBf16<R, 4>;
    case 5: return &TileBf16<R, 5>;
    case 6: return &TileBf16<R, 6>;
    default: return &TileBf16<R, 1>;
  }
}

TileBf16Fn PickBf16(int r, int mb) {
  switch (r) {
    case 8: return TileBf16For<8>(mb);
    case 6: return TileBf16For<6>(mb);
    case 5: return TileBf16For<5>(mb);
    case 4: return TileBf16For<4>(mb);
    default: return TileBf16For<1>(mb);
  }
}

void KernelBf16(const uint16_t* x, int64_t rows, const uint16_t* w, int64_t d, int64_t v0,
                int64_t v1, float* out, int64_t ldo) {
  const Groups g = SplitRows(rows);
  const int tile_r = TileRows(g.mb_hi);
  const TileBf16Fn wide_hi = PickBf16(tile_r, g.mb_hi);
  const TileBf16Fn wide_lo = PickBf16(tile_r, g.mb_hi - 1);
  const TileBf16Fn narrow_hi = PickBf16(1, g.mb_hi);
  const TileBf16Fn narrow_lo = PickBf16(1, g.mb_hi - 1);
  int64_t v = v0;
  for (; v < v1; ) {
    const bool wide = v + tile_r <= v1;
    const TileBf16Fn hi = wide ? wide_hi : narrow_hi;
    const TileBf16Fn lo = wide ? wide_lo : narrow_lo;
    const uint16_t* wv = w + v * d;
    int64_t m0 = 0;
    for (int64_t i = 0; i < g.count; ++i) {
      const bool is_hi = i < g.n_hi;
      (is_hi ? hi : lo)(x + m0 * d, d, wv, out + m0 * ldo + v, ldo);
      m0 += is_hi ? g.mb_hi : g.mb_hi - 1;
    }
    v += wide ? tile_r : 1;
  }
}

#pragma GCC pop_options

}  // namespace

HeadKernelIsa DetectHeadKernelIsa() {
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx512f")) return HeadKernelIsa::kNone;
  if (__builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512bf16")) {
    return HeadKernelIsa::kAvx512Bf16;
  }
  return HeadKernelIsa::kAvx512;
}

const char* HeadKernelIsaName(HeadKernelIsa isa) {
  switch (isa) {
    case HeadKernelIsa::kNone: return "none";
    case HeadKernelIsa::kAvx512: return "avx512";
    case HeadKernelIsa::kAvx512Bf16: return "avx512_bf16";
  }
  return "unknown";
}

void HeadKernelF32(const float* x, int64_t rows, const float* w, int64_t d, int64_t v0,
                   int64_t v1, float* out, int64_t ldo) {
  if (rows <= 0 || v1 <= v0 || d <= 0) return;
  KernelF32(x, rows, w, d, v0, v1, out, ldo);
}

void HeadKernelBf16(const uint16_t* x, int64_t rows, const uint16_t* w, int64_t d, int64_t v0,
                    int64_t v1, float* out, int64_t ldo) {
  if (rows <= 0 || v1 <= v0 || d <= 0) return;
  KernelBf16(x, rows, w, d, v0, v1, out, ldo);
}

}  // namespace vocabd
