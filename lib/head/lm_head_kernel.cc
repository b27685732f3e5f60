#include "lib/head/lm_head_kernel.h"

#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>

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
Groups SplitRows(int64_t rows, int max_group_rows = kMaxGroupRows) {
  Groups g;
  g.count = (rows + max_group_rows - 1) / max_group_rows;
  g.mb_hi = static_cast<int>((rows + g.count - 1) / g.count);
  g.n_hi = rows - g.count * (g.mb_hi - 1);
  return g;
}

// The packed kernels (lm_head_kernel.h): input rows per register tile at
// most, and the floats of one group's saved accumulators (4 blocks x 8 rows
// x 16 lanes).
constexpr int kMaxPackedGroupRows = 8;
constexpr int64_t kPackedGroupAccFloats = 4 * kMaxPackedGroupRows * 16;
// With two or more row groups k runs in chunks of this many values, each
// chunk of the tile's blocks (up to 4 x 128 x 64 bytes) read by every group
// while it is in L1 / L2.
constexpr int64_t kPackedChunkK = 128;

// No std::min inside the target regions below (a template instantiated there
// could be compiled for AVX-512 and shared with other callers).
inline int64_t LesserOf(int64_t a, int64_t b) { return a < b ? a : b; }

// ---------------------------------------------------------------------------
// F32 (AVX512F)
#pragma GCC push_options
#pragma GCC target("avx512f")
#if defined(__clang__)  // clang ignores GCC target pragmas
#pragma clang attribute push(__attribute__((target("avx512f"))), apply_to = function)
#endif

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
//
// pf, pf_rows: weight rows to prefetch into L2 as k advances (the next
// tile's share of this group, see KernelF32); pf_rows may be 0.
template <int R, int MB>
void TileF32(const float* x, int64_t d, const float* w, float* out, int64_t ldo, const float* pf,
             int pf_rows) {
  __m512 acc[R][MB];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
    for (int m = 0; m < MB; ++m) acc[r][m] = _mm512_setzero_ps();
  }
  int64_t k = 0;
  for (; k + 16 <= d; k += 16) {
    for (int j = 0; j < pf_rows; ++j) {
      _mm_prefetch(reinterpret_cast<const char*>(pf + j * d + k), _MM_HINT_T1);
    }
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

using TileF32Fn = void (*)(const float*, int64_t, const float*, float*, int64_t, const float*,
                          int);

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
               float* out, int64_t ldo, bool one_group_prefetch) {
  const Groups g = SplitRows(rows);
  const int tile_r = TileRows(g.mb_hi);
  const TileF32Fn wide_hi = PickF32(tile_r, g.mb_hi);
  const TileF32Fn wide_lo = PickF32(tile_r, g.mb_hi - 1);
  const TileF32Fn narrow_hi = PickF32(1, g.mb_hi);
  const TileF32Fn narrow_lo = PickF32(1, g.mb_hi - 1);
  // With G >= 2 row groups the later groups read the tile from L2 and
  // would leave memory idle, so while a tile's groups run, the next tile's
  // weight rows are prefetched into L2, group i taking rows
  // [i R / G, (i + 1) R / G). head_bench, Llama-3 head on 2 cores: M = 8
  // 119 -> 110 ms, M = 16 168 -> 150 ms, M = 64 485 -> 460 ms. With one
  // group (M <= 6) the hardware prefetcher alone is faster (M = 1: 75 ms
  // without, 78 ms with), so no prefetch there unless one_group_prefetch
  // (on a Zen 5 VM M = 1 was 42 ms without, 39 ms with). A prefetch
  // distance of two tiles was no better; one group of 8 rows x 3 weight
  // rows was slower.
  const bool prefetch = g.count >= 2 || one_group_prefetch;
  int64_t v = v0;
  for (; v < v1; ) {
    const bool wide = v + tile_r <= v1;
    const TileF32Fn hi = wide ? wide_hi : narrow_hi;
    const TileF32Fn lo = wide ? wide_lo : narrow_lo;
    const float* wv = w + v * d;
    const bool prefetch_next = prefetch && wide && v + 2 * tile_r <= v1;
    int64_t m0 = 0;
    for (int64_t i = 0; i < g.count; ++i) {
      const bool is_hi = i < g.n_hi;
      const int r_lo = static_cast<int>(i * tile_r / g.count);
      const int r_hi = static_cast<int>((i + 1) * tile_r / g.count);
      (is_hi ? hi : lo)(x + m0 * d, d, wv, out + m0 * ldo + v, ldo,
                        prefetch_next ? wv + (tile_r + r_lo) * d : nullptr,
                        prefetch_next ? r_hi - r_lo : 0);
      m0 += is_hi ? g.mb_hi : g.mb_hi - 1;
    }
    v += wide ? tile_r : 1;
  }
}

// ---------------------------------------------------------------------------
// F32, packed layout (lm_head_kernel.h: block b = vocabulary rows
// [16 b, 16 b + 16), one zmm of 16 rows per k).
//
// Register tile: NB blocks x MB input rows of accumulators (NB * MB <= 24),
// one lane per (vocabulary row, input row):
//
//   for k in [k0, k1):
//     w[i]      = block i, k          (one 64-byte load, 16 vocab rows)
//     acc[i][m] = fma(w[i], broadcast(x[m][k]), acc[i][m])
//
// so each logit is one F32 FMA chain over k in order, whatever MB, NB or
// the k chunks (acc is saved in `acc_buf` between chunks).

// Blocks per tile for MB input rows.
constexpr int PackedTileBlocks(int mb) { return mb <= 6 ? 4 : 3; }

// acc_buf: [NB][MB][16] floats; zero-initialised by the caller for k0 = 0.
template <int NB, int MB>
void PackedTileF32(const float* x, int64_t d, const float* pw, int64_t stride, int64_t k0,
                   int64_t k1, float* acc_buf) {
  __m512 acc[NB][MB];
#pragma GCC unroll 8
  for (int i = 0; i < NB; ++i) {
#pragma GCC unroll 8
    for (int m = 0; m < MB; ++m) acc[i][m] = _mm512_loadu_ps(acc_buf + (i * MB + m) * 16);
  }
  for (int64_t k = k0; k < k1; ++k) {
    __m512 wv[NB];
#pragma GCC unroll 8
    for (int i = 0; i < NB; ++i) wv[i] = _mm512_loadu_ps(pw + i * stride + k * 16);
#pragma GCC unroll 8
    for (int m = 0; m < MB; ++m) {
      const __m512 xv = _mm512_set1_ps(x[m * d + k]);
#pragma GCC unroll 8
      for (int i = 0; i < NB; ++i) acc[i][m] = _mm512_fmadd_ps(wv[i], xv, acc[i][m]);
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < NB; ++i) {
#pragma GCC unroll 8
    for (int m = 0; m < MB; ++m) _mm512_storeu_ps(acc_buf + (i * MB + m) * 16, acc[i][m]);
  }
}

using PackedTileF32Fn = void (*)(const float*, int64_t, const float*, int64_t, int64_t, int64_t,
                                float*);

template <int NB>
PackedTileF32Fn PackedF32ForRows(int mb) {
  switch (mb) {
    case 2: return &PackedTileF32<NB, 2>;
    case 3: return &PackedTileF32<NB, 3>;
    case 4: return &PackedTileF32<NB, 4>;
    case 5: return &PackedTileF32<NB, 5>;
    case 6: return &PackedTileF32<NB, 6>;
    case 7: return &PackedTileF32<NB, 7>;
    case 8: return &PackedTileF32<NB, 8>;
    default: return &PackedTileF32<NB, 1>;
  }
}

PackedTileF32Fn PickPackedF32(int nb, int mb) {
  switch (nb) {
    case 4: return PackedF32ForRows<4>(mb);
    case 3: return PackedF32ForRows<3>(mb);
    case 2: return PackedF32ForRows<2>(mb);
    default: return PackedF32ForRows<1>(mb);
  }
}

// Writes tile results: acc_buf [nb][mb][16] -> out rows m0.., vocabulary
// rows [v, v + 16 nb) cut at v_end.
void StorePackedTile(const float* acc_buf, int nb, int mb, float* out, int64_t ldo, int64_t m0,
                     int64_t v, int64_t v_end) {
  for (int i = 0; i < nb; ++i) {
    const int64_t vb = v + 16 * i;
    if (vb >= v_end) break;
    const int64_t n = LesserOf(16, v_end - vb);
    const __mmask16 mask = static_cast<__mmask16>((1u << n) - 1u);
    for (int m = 0; m < mb; ++m) {
      _mm512_mask_storeu_ps(out + (m0 + m) * ldo + vb, mask,
                            _mm512_loadu_ps(acc_buf + (i * mb + m) * 16));
    }
  }
}

// The packed kernels' driver, for F32 (T float, steps = k) and BF16
// (T uint16_t, steps = pairs of k): tiles of up to 4 blocks over the
// vocabulary range, each over every row group; one group runs all steps at
// once, several run in chunks of `chunk` steps, every group over a chunk
// while it is in L1 / L2. pick(nb, mb) gives the tile function.
// acc: kPackedGroupAccFloats per row group of SplitRows(rows, 8).
template <typename T, typename TileFn>
void KernelPacked(const T* x, int64_t rows, const T* packed, int64_t d, int64_t steps,
                  int64_t chunk, int64_t stride, TileFn (*pick)(int, int), int64_t v0, int64_t v1,
                  float* out, int64_t ldo, float* acc) {
  const Groups g = SplitRows(rows, kMaxPackedGroupRows);
  const int nb_max = PackedTileBlocks(g.mb_hi);
  const int64_t sc = g.count == 1 ? steps : chunk;
  for (int64_t v = v0; v < v1; v += 16 * nb_max) {
    const int nb = static_cast<int>(LesserOf(nb_max, (v1 - v + 15) / 16));
    const TileFn hi = pick(nb, g.mb_hi);
    const TileFn lo = pick(nb, g.mb_hi - 1);
    const T* pw = packed + (v / 16) * stride;
    std::memset(acc, 0, static_cast<size_t>(g.count * kPackedGroupAccFloats) * sizeof(float));
    for (int64_t s0 = 0; s0 < steps; s0 += sc) {
      const int64_t s1 = LesserOf(steps, s0 + sc);
      int64_t m0 = 0;
      for (int64_t i = 0; i < g.count; ++i) {
        const bool is_hi = i < g.n_hi;
        (is_hi ? hi : lo)(x + m0 * d, d, pw, stride, s0, s1, acc + i * kPackedGroupAccFloats);
        m0 += is_hi ? g.mb_hi : g.mb_hi - 1;
      }
    }
    int64_t m0 = 0;
    for (int64_t i = 0; i < g.count; ++i) {
      const int mb = i < g.n_hi ? g.mb_hi : g.mb_hi - 1;
      StorePackedTile(acc + i * kPackedGroupAccFloats, nb, mb, out, ldo, m0, v, v1);
      m0 += mb;
    }
  }
}

void KernelF32Packed(const float* x, int64_t rows, const float* packed, int64_t d, int64_t v0,
                     int64_t v1, float* out, int64_t ldo, float* acc) {
  KernelPacked(x, rows, packed, d, d, kPackedChunkK, PackedF32BlockStride(d), &PickPackedF32, v0,
               v1, out, ldo, acc);
}

#if defined(__clang__)
#pragma clang attribute pop
#endif
#pragma GCC pop_options

// ---------------------------------------------------------------------------
// BF16 (AVX512F + AVX512BW + AVX512_BF16)
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512bf16")
#if defined(__clang__)  // clang ignores GCC target pragmas
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512bf16"))), apply_to = function)
#endif

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

// BF16, packed layout (lm_head_kernel.h): per k pair j one zmm holds the
// 16 vocabulary rows' pairs (W[v][2j], W[v][2j+1]); the input pair
// (x[m][2j], x[m][2j+1]) is broadcast as one 32-bit lane:
//
//   acc[i][m] = vdpbf16ps(acc[i][m], w[i], broadcast32(x[m][2j..2j+1]))
//
// Each logit: one lane's vdpbf16ps chain over j in order.
template <int NB, int MB>
void PackedTileBf16(const uint16_t* x, int64_t d, const uint16_t* pw, int64_t stride, int64_t j0,
                    int64_t j1, float* acc_buf) {
  __m512 acc[NB][MB];
#pragma GCC unroll 8
  for (int i = 0; i < NB; ++i) {
#pragma GCC unroll 8
    for (int m = 0; m < MB; ++m) acc[i][m] = _mm512_loadu_ps(acc_buf + (i * MB + m) * 16);
  }
  for (int64_t j = j0; j < j1; ++j) {
    __m512bh wv[NB];
#pragma GCC unroll 8
    for (int i = 0; i < NB; ++i) wv[i] = LoadBf16(pw + i * stride + j * 32);
#pragma GCC unroll 8
    for (int m = 0; m < MB; ++m) {
      int32_t pair;
      std::memcpy(&pair, x + m * d + 2 * j, sizeof pair);
      const __m512bh xv = (__m512bh)(_mm512_set1_epi32(pair));
#pragma GCC unroll 8
      for (int i = 0; i < NB; ++i) acc[i][m] = _mm512_dpbf16_ps(acc[i][m], wv[i], xv);
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < NB; ++i) {
#pragma GCC unroll 8
    for (int m = 0; m < MB; ++m) _mm512_storeu_ps(acc_buf + (i * MB + m) * 16, acc[i][m]);
  }
}

using PackedTileBf16Fn = void (*)(const uint16_t*, int64_t, const uint16_t*, int64_t, int64_t,
                                 int64_t, float*);

template <int NB>
PackedTileBf16Fn PackedBf16ForRows(int mb) {
  switch (mb) {
    case 2: return &PackedTileBf16<NB, 2>;
    case 3: return &PackedTileBf16<NB, 3>;
    case 4: return &PackedTileBf16<NB, 4>;
    case 5: return &PackedTileBf16<NB, 5>;
    case 6: return &PackedTileBf16<NB, 6>;
    case 7: return &PackedTileBf16<NB, 7>;
    case 8: return &PackedTileBf16<NB, 8>;
    default: return &PackedTileBf16<NB, 1>;
  }
}

PackedTileBf16Fn PickPackedBf16(int nb, int mb) {
  switch (nb) {
    case 4: return PackedBf16ForRows<4>(mb);
    case 3: return PackedBf16ForRows<3>(mb);
    case 2: return PackedBf16ForRows<2>(mb);
    default: return PackedBf16ForRows<1>(mb);
  }
}

void KernelBf16Packed(const uint16_t* x, int64_t rows, const uint16_t* packed, int64_t d,
                      int64_t v0, int64_t v1, float* out, int64_t ldo, float* acc) {
  KernelPacked(x, rows, packed, d, d / 2, kPackedChunkK / 2, PackedBf16BlockStride(d),
               &PickPackedBf16, v0, v1, out, ldo, acc);
}

#if defined(__clang__)
#pragma clang attribute pop
#endif
#pragma GCC pop_options


// ---------------------------------------------------------------------------
// BF16 with AMX (AMX-TILE + AMX-BF16): C^T = W x^T in 16 x 16 F32 tiles.
//   A tile: 16 weight rows x 32 bf16, loaded from W in place (stride d).
//   B tile: 16 pairs of k x 16 input rows (VNNI layout), from PackBf16ForAmx.
//   C tile: 16 weight rows x 16 input rows, F32.
// Two A tiles share each B tile; up to two B tiles (32 input rows) per pass,
// so tiles: C 4, A 2, B 2 (all 8). More rows run as further passes over the
// same 32 weight rows (in L2 by then).
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512bf16,amx-tile,amx-bf16")
#if defined(__clang__)  // clang ignores GCC target pragmas
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512bf16,amx-tile,amx-bf16"))), apply_to = function)
#endif

struct alignas(64) TileConfig {
  uint8_t palette_id;
  uint8_t start_row;
  uint8_t reserved[14];
  uint16_t colsb[16];
  uint8_t rows[16];
};

// Every tile 16 rows x 64 bytes. A constant in memory: ldtilecfg's asm
// operand names only the first byte, so a config built in a local could
// have its other stores optimised away.
alignas(64) const TileConfig kAmxConfig = {
    1, 0, {}, {64, 64, 64, 64, 64, 64, 64, 64}, {16, 16, 16, 16, 16, 16, 16, 16}};

void LoadAmxConfig() { _tile_loadconfig(&kAmxConfig); }

// C tiles 0..3 -> out[m * ldo + v]: tile (i, j) holds weight rows
// v + 16 i .. and input rows m0 + 16 j ..; only rows < `rows` are written.
template <int NA, int NB>
void StoreTiles(float* out, int64_t ldo, int64_t v, int64_t m0, int64_t rows) {
  alignas(64) float c[4][16][16];
  _tile_stored(0, c[0], 64);
  if (NA == 2) _tile_stored(1, c[1], 64);
  if (NB == 2) _tile_stored(2, c[2], 64);
  if (NA == 2 && NB == 2) _tile_stored(3, c[3], 64);
  for (int j = 0; j < NB; ++j) {
    for (int n = 0; n < 16; ++n) {
      const int64_t m = m0 + 16 * j + n;
      if (m >= rows) break;
      float* o = out + m * ldo + v;
      for (int i = 0; i < NA; ++i) {
        const float(*t)[16] = c[i + 2 * j];  // tiles: 0 = (0,0) 1 = (1,0) 2 = (0,1) 3 = (1,1)
        for (int r = 0; r < 16; ++r) o[16 * i + r] = t[r][n];
      }
    }
  }
}

// One pass: NA weight blocks of 16 rows from `w` (stride d elements), NB
// packed input groups starting at group g.
template <int NA, int NB>
void AmxPass(const uint16_t* xp, int64_t g, const uint16_t* w, int64_t d, float* out, int64_t ldo,
             int64_t v, int64_t rows) {
  const int64_t kblocks = d / 32;
  const int64_t stride = d * 2;               // bytes between weight rows
  const int64_t group_elems = kblocks * 512;  // one group: kblocks tiles of 16 x 32 bf16
  const uint16_t* b0 = xp + g * group_elems;
  const uint16_t* b1 = b0 + group_elems;
  _tile_zero(0);
  if (NA == 2) _tile_zero(1);
  if (NB == 2) _tile_zero(2);
  if (NA == 2 && NB == 2) _tile_zero(3);
  for (int64_t kb = 0; kb < kblocks; ++kb) {
    _tile_loadd(4, w + kb * 32, stride);
    if (NA == 2) _tile_loadd(5, w + 16 * d + kb * 32, stride);
    _tile_loadd(6, b0 + kb * 512, 64);
    if (NB == 2) _tile_loadd(7, b1 + kb * 512, 64);
    _tile_dpbf16ps(0, 4, 6);
    if (NA == 2) _tile_dpbf16ps(1, 5, 6);
    if (NB == 2) _tile_dpbf16ps(2, 4, 7);
    if (NA == 2 && NB == 2) _tile_dpbf16ps(3, 5, 7);
  }
  StoreTiles<NA, NB>(out, ldo, v, g * 16, rows);
}

template <int NA>
void AmxBlock(const uint16_t* xp, int64_t rows, const uint16_t* w, int64_t d, int64_t v,
              float* out, int64_t ldo) {
  const int64_t groups = (rows + 15) / 16;
  const uint16_t* wv = w + v * d;
  int64_t g = 0;
  for (; g + 2 <= groups; g += 2) AmxPass<NA, 2>(xp, g, wv, d, out, ldo, v, rows);
  if (g < groups) AmxPass<NA, 1>(xp, g, wv, d, out, ldo, v, rows);
}

void KernelBf16Amx(const uint16_t* xp, const uint16_t* x, int64_t rows, const uint16_t* w,
                   int64_t d, int64_t v0, int64_t v1, float* out, int64_t ldo) {
  LoadAmxConfig();
  int64_t v = v0;
  for (; v + 32 <= v1; v += 32) AmxBlock<2>(xp, rows, w, d, v, out, ldo);
  if (v + 16 <= v1) {
    AmxBlock<1>(xp, rows, w, d, v, out, ldo);
    v += 16;
  }
  _tile_release();
  if (v < v1) KernelBf16(x, rows, w, d, v, v1, out, ldo);  // < 16 rows left
}

#if defined(__clang__)
#pragma clang attribute pop
#endif
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
                   int64_t v1, float* out, int64_t ldo, bool one_group_prefetch) {
  if (rows <= 0 || v1 <= v0 || d <= 0) return;
  KernelF32(x, rows, w, d, v0, v1, out, ldo, one_group_prefetch);
}

void HeadKernelBf16(const uint16_t* x, int64_t rows, const uint16_t* w, int64_t d, int64_t v0,
                    int64_t v1, float* out, int64_t ldo) {
  if (rows <= 0 || v1 <= v0 || d <= 0) return;
  KernelBf16(x, rows, w, d, v0, v1, out, ldo);
}

int64_t PackedF32BlockStride(int64_t d) { return 16 * d + 16; }
int64_t PackedBf16BlockStride(int64_t d) { return 16 * d + 32; }
int64_t PackedHeadBlocks(int64_t vocab) { return (vocab + 15) / 16; }

namespace {

// packed block b <- W rows [16 b, 16 b + 16) (zeros past vocab and in the
// padding), element (k, i) at k * 16 + i (F32) or (k / 2) * 32 + 2 i + k % 2
// (BF16): the same index for a 4-byte and a 2-byte T with kPair 1 and 2.
template <typename T, int kPair>
void PackBlocks(const T* w, int64_t vocab, int64_t d, int64_t b0, int64_t b1, int64_t stride,
                T* packed) {
  for (int64_t b = b0; b < b1; ++b) {
    T* dst = packed + b * stride;
    std::memset(dst, 0, static_cast<size_t>(stride) * sizeof(T));
    for (int64_t i = 0; i < 16; ++i) {
      const int64_t v = 16 * b + i;
      if (v >= vocab) break;
      const T* src = w + v * d;
      for (int64_t k = 0; k < d; ++k) {
        dst[(k / kPair) * 16 * kPair + i * kPair + k % kPair] = src[k];
      }
    }
  }
}

}  // namespace

void PackF32Blocks(const float* w, int64_t vocab, int64_t d, int64_t b0, int64_t b1,
                   float* packed) {
  PackBlocks<float, 1>(w, vocab, d, b0, b1, PackedF32BlockStride(d), packed);
}

void PackBf16Blocks(const uint16_t* w, int64_t vocab, int64_t d, int64_t b0, int64_t b1,
                    uint16_t* packed) {
  PackBlocks<uint16_t, 2>(w, vocab, d, b0, b1, PackedBf16BlockStride(d), packed);
}

int64_t PackedAccFloats(int64_t rows) {
  return SplitRows(rows, kMaxPackedGroupRows).count * kPackedGroupAccFloats;
}

void HeadKernelF32Packed(const float* x, int64_t rows, const float* packed, int64_t d, int64_t v0,
                         int64_t v1, float* out, int64_t ldo, float* acc) {
  if (rows <= 0 || v1 <= v0 || d <= 0) return;
  KernelF32Packed(x, rows, packed, d, v0, v1, out, ldo, acc);
}

void HeadKernelBf16Packed(const uint16_t* x, int64_t rows, const uint16_t* packed, int64_t d,
                          int64_t v0, int64_t v1, float* out, int64_t ldo, float* acc) {
  if (rows <= 0 || v1 <= v0 || d <= 0 || d % 2 != 0) return;
  KernelBf16Packed(x, rows, packed, d, v0, v1, out, ldo, acc);
}

}  // namespace vocabd

namespace vocabd {

bool HeadKernelAmxAvailable() {
  static const bool available = [] {
    if (DetectHeadKernelIsa() != HeadKernelIsa::kAvx512Bf16) return false;
#if defined(__clang__) && __clang_major__ < 16
    // clang < 16 (the fuzz build's Debian clang 14) has no "amx-*" feature
    // strings: treated as no AMX there.
    return false;
#else
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("amx-tile") || !__builtin_cpu_supports("amx-bf16")) return false;
#endif
    // Linux enables the AMX tile state per process on request (5.16+).
    constexpr long kArchReqXcompPerm = 0x1023;
    constexpr long kXfeatureXtiledata = 18;
    return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
  }();
  return available;
}

int64_t PackedBf16ForAmxSize(int64_t rows, int64_t d) { return (rows + 15) / 16 * 16 * d; }

void PackBf16ForAmx(const uint16_t* x, int64_t rows, int64_t d, uint16_t* packed) {
  // packed[g][kb][kk][n][2] = x[16 g + n][32 kb + 2 kk + (0|1)], zeros past `rows`.
  const int64_t groups = (rows + 15) / 16;
  const int64_t kblocks = d / 32;
  for (int64_t g = 0; g < groups; ++g) {
    for (int64_t kb = 0; kb < kblocks; ++kb) {
      uint16_t* tile = packed + (g * kblocks + kb) * 512;
      for (int64_t kk = 0; kk < 16; ++kk) {
        for (int64_t n = 0; n < 16; ++n) {
          const int64_t m = 16 * g + n;
          const bool real = m < rows;
          const uint16_t* src = x + m * d + 32 * kb + 2 * kk;
          tile[kk * 32 + 2 * n] = real ? src[0] : 0;
          tile[kk * 32 + 2 * n + 1] = real ? src[1] : 0;
        }
      }
    }
  }
}

void HeadKernelBf16Amx(const uint16_t* packed, const uint16_t* x, int64_t rows, const uint16_t* w,
                       int64_t d, int64_t v0, int64_t v1, float* out, int64_t ldo) {
  if (rows <= 0 || v1 <= v0 || d <= 0) return;
  KernelBf16Amx(packed, x, rows, w, d, v0, v1, out, ldo);
}

}  // namespace vocabd
