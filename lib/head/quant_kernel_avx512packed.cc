// The packed kernels of the quantized LM head (quant_kernel.h, "The
// packed kernels"), AVX512-VNNI. Compiled with -mavx2 -mfma -mf16c
// -mavx512f -mavx512bw -mavx512vl -mavx512vnni (CMakeLists); reached only
// when QuantPackedCovers (the avx512vnni path). gf2p8affineqb (Gf) runs
// only where Avx512PackedKernel's `gfni` says the CPU has GFNI
// (quant_kernel.cc reads CPUID).
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "lib/head/quant_kernel.h"
#include "lib/head/quant_kernel_impl.h"

namespace vocabd {
namespace {

// The maskz forms with a full mask are the plain instructions; the unmasked
// intrinsics trip GCC 12's -Wuninitialized (_mm512_undefined_ps).
constexpr __mmask16 kAll = 0xFFFF;

// ---- The packed kernels (QuantPackedCovers: every served type; d a
// multiple of 256). LmHead packs the weights
// once at Create: 16 vocabulary rows per group G, and per group and 256 codes (super-block s: one
// k-quant super-block, eight Q8_0 blocks) one record of T::kBytes, records
// in order (G, s). A record holds the canonical codes u (quant_kernel.h) of
// the 16 rows, arranged so that one zmm W[c] holds, for unit U (codes
// 32U .. 32U + 31) and c = 0..7, codes 32U + 4c .. 32U + 4c + 3 of each row
// in its lane r:
//
//   W[c] = [ u[r0][32U+4c .. +3] | u[r1][...] | ... | u[r15][...] ]  64 B
//
// stored as the type's bits allow, then the scales as in the file (f16 d,
// int 6-bit scales), so that a record holds the 16 rows' block bytes
// (Q4_K / Q5_K: + 64 B, their 6-bit scales and mins one byte each; Q6_K:
// + 32 B for 64-byte alignment):
//
//   Q8_0  W[U][c] as above, 8 x 8 x 64 B; d[U][r] f16               4352 B
//   Q4_K  P[U][j] (j = 0..3), 8 x 4 x 64 B: low nibble = W[j],
//         high = W[j + 4]; d[r], dmin[r] f16; sc[U][r], mn[U][r] u8  2368 B
//   Q6_K  S[U][k] (k = 0..5), 8 x 6 x 64 B: the 6-bit codes of W[4q + i]
//         (q = 0, 1; i = 0..2) in S[3q + i]'s bits 0-5, those of
//         W[4q + 3] in 2-bit pairs in bits 6-7 of the three;
//         d[r] f16; sc[j][r] i8 (j = 16-code sub-block 0..15)      3392 B
//   Q4_0, IQ4_NL  P[U][j] as Q4_K (IQ4_NL: the code book's indices);
//         d[U][r] f16                                               2304 B
//   Q4_1  as Q4_0, then m[U][r] f16                                 2560 B
//   Q5_0  P[U][j], H[U] (8 x 64 B: bit c of byte b = the fifth bit of
//         W[c]'s byte b), d[U][r]                                   2816 B
//   Q5_1  as Q5_0, then m[U][r]                                     3072 B
//   Q5_K  P[U][j], H[U], then Q4_K's d, dmin, sc, mn                2880 B
//   Q2_K  T[U][h] (h = 0, 1), 8 x 2 x 64 B: bits 2c'..2c'+1 of a byte =
//         the 2-bit code of W[4h + c']'s byte; d[r], dmin[r] f16; the
//         file's scale bytes sc[U][r][h] (scale | min << 4)         1344 B
//   Q3_K  T[U][h] as Q2_K, H[U] as Q5_0 (the third bit); d[r] f16;
//         sc[U][r][h] i8 = 6-bit scale - 32; 32 B padding          1856 B
//
// Per unit and input row m (a: int8 codes, s = their int sums and da their
// scale, per 32 codes, or per 16-code half h for Q2_K, Q3_K and Q6_K, whose
// scales are per 16; qs = da * s per 32 codes):
//
//   isum    = -o s + sum_c vpdpbusd(W[c], broadcast a[32U + 4c .. +3])
//           = sum (u - o) a        one int32 lane per vocabulary row (exact;
//                                  o = 128 for Q8_0 and IQ4_NL, 32 for Q6_K,
//                                  16 for Q5_0, 8 for Q4_0, 4 for Q3_K, 0
//                                  with a min)
//
// The types with scales per 32 codes (dw = d x scale, mw = -dmin x min,
// the canonical ones, exact in float):
//
//   acc[m] += float(isum) * (dw[16 rows] * da)  [ + mw[16 rows] * qs: Q4_1,
//                                                 Q5_1, Q4_K, Q5_K ]
//
// The types with scales per 16 codes (Q2_K, Q3_K, Q6_K), whose scales are
// small integers sc times the super-block's d: a unit's two half sums are
// combined in int32, and d is applied once per record (256 codes):
//
//   t[m]    += float(isum0 sc0 + isum1 sc1) * da        (8 units)
//   acc[m]  += t[m] * d  [ + tm[m] * -dmin, Q2_K:
//                          tm[m] = sum_U float(mn0 s0 + mn1 s1) * da ]
//
// isum0 sc0 + isum1 sc1 is one vpmaddwd where both are int16 (Q2_K: |isum|
// <= 16 x 3 x 127, sc <= 15; Q3_K: |isum| <= 16 x 4 x 127, |sc| <= 32),
// two vpmulld and an add for Q6_K (|isum| <= 16 x 32 x 127, |sc| <= 128);
// every combined sum is below 2^24, so its conversion is exact. Per 512
// codes and input row: 8 vpdpbusd (their activation operand a broadcast
// load) and, on the pipes that run them, 2 float instructions (3 with a
// min) for the per-32 types; 2 (Q2_K, Q3_K; Q2_K's mins 2 more) or 3
// (Q6_K) for the per-16 ones, whose form with a multiply and an fma per
// 16 codes took 4. W and the scales are made once per unit for a tile of
// up to 8 input rows. The tiles' activations
// are copied once per call (QuantBuildPackedPanel, before the threads
// split the vocabulary) into a panel interleaved per unit (every operand
// one pointer plus a constant), one Panel per record and tile, in the order
// the kernel reads them (BuildPanels). Units are summed in order: a row's
// logits do not depend on M or on the vocabulary range of the call.
constexpr int kPackedMb = kPackedTileRows;

// A tile's activation panel: for mb rows and nu units (8: one record's),
//   codes [nu][mb][32] i8 | da [nu][mb] f32 | init32 [nu][mb] i32
//   | init16 [2 nu][mb] i32 | qs32 [nu][mb] f32 | s16x2 [nu][mb] i32
// (kPackedPanelBytesPer32 = 56 bytes per row and unit); init = -o s,
// s16x2 = the unit's two 16-code sums s as int16 pairs (s0 | s1 << 16).
struct Panel {
  const int8_t* a;
  const float* da;
  const int32_t* init32;
  const int32_t* init16;
  const float* qs32;
  const int32_t* s16x2;
  Panel(const uint8_t* base, int64_t nu, int64_t mb) {
    a = reinterpret_cast<const int8_t*>(base);
    da = reinterpret_cast<const float*>(base + nu * mb * 32);
    init32 = reinterpret_cast<const int32_t*>(da + nu * mb);
    init16 = init32 + nu * mb;
    qs32 = reinterpret_cast<const float*>(init16 + 2 * nu * mb);
    s16x2 = reinterpret_cast<const int32_t*>(qs32 + nu * mb);
  }
};

// Builds the panel block of mb activation rows and units [u0, u0 + nub)
// for a type of offset o.
inline void BuildPanel(const uint8_t* const* rows, int64_t mb, int64_t d, int64_t u0, int64_t nub,
                       int o, uint8_t* base) {
  const ActLayout al(d);
  const Panel p(base, nub, mb);
  auto* a = const_cast<int8_t*>(p.a);
  auto* da = const_cast<float*>(p.da);
  auto* i32 = const_cast<int32_t*>(p.init32);
  auto* i16 = const_cast<int32_t*>(p.init16);
  auto* q32 = const_cast<float*>(p.qs32);
  auto* pairs = const_cast<int32_t*>(p.s16x2);
  for (int64_t i = 0; i < mb; ++i) {
    const uint8_t* row = rows[i];
    const auto* rda = reinterpret_cast<const float*>(row + al.da);
    const auto* rs32 = reinterpret_cast<const int32_t*>(row + al.s32);
    const auto* rs16 = reinterpret_cast<const int32_t*>(row + al.s16);
    const auto* rq32 = reinterpret_cast<const float*>(row + al.qs32);
    for (int64_t j = 0; j < nub; ++j) {
      const int64_t u = u0 + j;
      std::memcpy(a + (j * mb + i) * 32, row + 32 * u, 32);
      da[j * mb + i] = rda[u];
      i32[j * mb + i] = -o * rs32[u];
      q32[j * mb + i] = rq32[u];
      for (int h = 0; h < 2; ++h) i16[(2 * j + h) * mb + i] = -o * rs16[2 * u + h];
      // |s| <= 16 x 127: each fits int16.
      pairs[j * mb + i] = static_cast<int32_t>((static_cast<uint32_t>(rs16[2 * u]) & 0xFFFF) |
                                               static_cast<uint32_t>(rs16[2 * u + 1]) << 16);
    }
  }
}

// The codes' bit fields are cut in one of two ways, chosen per tile
// (Codes<kGf>, or CodesHalf<kGf> for the per-16 types; the same bytes
// either way):
// - kGf = false: word shifts and a byte mask. A shift of 16-bit words moves
//   bits across the two bytes of a word, but every field cut here lands in
//   bits that come from its own byte, and the mask clears the rest. These
//   run on the vector ALU pipes, beside vpdpbusd (on a Zen 5 core 16
//   vpdpbusd with 4 vpsrlw, vpand or vpternlogd take the time of 16 alone).
// - kGf = true (a CPU with GFNI): one gf2p8affineqb per field, fewer
//   instructions, but on the pipes that run vpdpbusd, vmulps and vfmadd
//   (4 of them added 0.6 cycles to 16 vpdpbusd there).
// With 8 input rows a unit's codes serve 64 vpdpbusd and the shifts are
// faster; with one or two the instruction count decides, and which is
// faster there depends on the core (LmHead measures it at Create:
// gf_rows_max; on a Zen 5 core gf2p8affineqb was, by up to 1.3x from L1).
// gf2p8affineqb bit matrices (byte 7 - i of the qword selects the input
// bits of output bit i): the high nibble to bits 0-3; bits 6-7 to bits 0-1,
// 2-3 or 4-5; bit c to bit 4 (2): the matrix row of output bit 4 (2), byte
// 3 (5), = 1 << c.
constexpr int64_t kGfHighNibble = 0x1020408000000000;
constexpr int64_t kGfTop2To0 = 0x4080000000000000;
constexpr int64_t kGfTop2To2 = 0x0000408000000000;
constexpr int64_t kGfTop2To4 = 0x0000000040800000;
// gf2p8affineqb(v, matrix, 0) in assembly: the file is not compiled with
// -mgfni (a compiler may then emit GFNI for plain byte shifts, and this
// file runs on AVX512-VNNI CPUs without it); only the kGf tiles reach it.
inline __m512i Gf(__m512i v, int64_t matrix) {
  __m512i r;
  __asm__("vgf2p8affineqb $0, %2, %1, %0" : "=v"(r) : "v"(v), "v"(_mm512_set1_epi64(matrix)));
  return r;
}
template <int kShift>
inline __m512i ShiftBytes(__m512i v) {  // v >> kShift (kShift > 0) or v << -kShift, unmasked
  if constexpr (kShift > 0) return _mm512_srli_epi16(v, kShift);
  if constexpr (kShift < 0) return _mm512_slli_epi16(v, -kShift);
  return v;
}
// Bit kFrom of every byte to bit kTo, the other bits cleared.
template <int kFrom, int kTo>
inline __m512i MoveBit(__m512i v) {
  return _mm512_and_si512(ShiftBytes<kFrom - kTo>(v), _mm512_set1_epi8(static_cast<char>(1 << kTo)));
}
// (a & low) | b: vpternlogd's (A & C) | B.
inline __m512i AndOr(__m512i a, __m512i b, __m512i low) { return _mm512_ternarylogic_epi32(a, b, low, 0xEC); }
// m ? a : b bit by bit: vpternlogd's A ? B : C.
inline __m512i Select(__m512i m, __m512i a, __m512i b) { return _mm512_ternarylogic_epi32(m, a, b, 0xCA); }

// sum += vpdpbusd(w, the 4 bytes at p broadcast to every lane), with the
// broadcast folded into the instruction's memory operand ({1to16}): one
// instruction where the intrinsics give a vpbroadcastd and a vpdpbusd.
inline void DpbusdBroadcast(__m512i& sum, __m512i w, const int8_t* p) {
  __asm__("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(sum) : "v"(w), "m"(*reinterpret_cast<const int32_t*>(p)));
}

inline __m512 ScaleU8(const uint8_t* p16, __m512 f) {
  return _mm512_mul_ps(f, _mm512_maskz_cvtepi32_ps(
                              kAll, _mm512_maskz_cvtepu8_epi32(
                                        kAll, _mm_loadu_si128(reinterpret_cast<const __m128i*>(p16)))));
}
// 16 signed bytes at p16 as int32 lanes.
inline __m512i LoadI8(const uint8_t* p16) {
  return _mm512_maskz_cvtepi8_epi32(kAll, _mm_loadu_si128(reinterpret_cast<const __m128i*>(p16)));
}
// 32 bytes at p32, the two sub-block scales of each lane r at 2r, 2r + 1,
// as one lane of two int16 (vpmaddwd's operand): signed or unsigned bytes.
inline __m512i LoadI8Pairs(const uint8_t* p32) {
  return _mm512_maskz_cvtepi8_epi16(~__mmask32{0}, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p32)));
}
inline __m512i LoadU8Pairs(const uint8_t* p32) {
  return _mm512_maskz_cvtepu8_epi16(~__mmask32{0}, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p32)));
}
inline __m512 HalfVec(const uint8_t* p) {
  return _mm512_maskz_cvtph_ps(kAll, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

// The super-block scales of the k-quants with mins (Q2_K, Q4_K, Q5_K): d[r]
// then dmin[r], f16, at p; -dmin kept (mw = -dmin x min).
struct DMin {
  __m512 d, mdmin;
};
inline DMin LoadDMin(const uint8_t* p) {
  return {HalfVec(p), _mm512_sub_ps(_mm512_setzero_ps(), HalfVec(p + 32))};
}
inline void PutDMin(uint16_t d, uint16_t dmin, int r, uint8_t* p) {
  std::memcpy(p + r * 2, &d, 2);
  std::memcpy(p + 32 + r * 2, &dmin, 2);
}
// Q4_K / Q5_K: the 8 six-bit scales and mins (ggml get_scale_min_k4) of
// lane r, one byte each: sc[U][r] at p, mn[U][r] at p + 128.
inline void PutKScales(const uint8_t* scales12, int r, uint8_t* p) {
  for (int U = 0; U < 8; ++U) {
    int sc, m;
    ScaleMinK4(U, scales12, &sc, &m);
    p[U * 16 + r] = static_cast<uint8_t>(sc);
    p[128 + U * 16 + r] = static_cast<uint8_t>(m);
  }
}

// A type without a min term (the packed kernel skips its FMA).
struct NoMin {
  template <class Sb>
  static __m512 Min(const uint8_t*, int, int, const Sb&) { return _mm512_setzero_ps(); }
};

// The canonical codes u[256] of 256 codes of one row (quant_kernel_impl.h's
// unpackers; the scales they also give are not used: records keep the
// file's).
template <void (*Unpack)(const uint8_t*, int64_t, uint8_t*, float*, float*)>
inline void CanonicalCodes(const uint8_t* blocks, int64_t nb, uint8_t* u) {
  float dw[16], mw[16];
  Unpack(blocks, nb, u, dw, mw);
}

// Packing helpers: one row's canonical codes u[256] of a super-block into
// lane r of a record.
inline void PutBytes(const uint8_t* u, int r, uint8_t* w /* [8 U][8 c][16 r][4] */) {
  for (int U = 0; U < 8; ++U)
    for (int c = 0; c < 8; ++c) std::memcpy(w + ((U * 8 + c) * 16 + r) * 4, u + 32 * U + 4 * c, 4);
}
inline void PutNibbles(const uint8_t* u, int r, uint8_t* p /* [8 U][4 j][16 r][4] */) {
  for (int U = 0; U < 8; ++U)
    for (int j = 0; j < 4; ++j)
      for (int i = 0; i < 4; ++i) {
        const uint8_t lo = u[32 * U + 4 * j + i] & 0x0F, hi = u[32 * U + 16 + 4 * j + i] & 0x0F;
        p[((U * 4 + j) * 16 + r) * 4 + i] = static_cast<uint8_t>(lo | hi << 4);
      }
}

struct PackedQ8_0 : NoMin {
  static constexpr int kSub = 32, kOffset = 128;
  static constexpr bool kMins = false;
  static constexpr int64_t kBytes = 4352;
  struct Sb {};
  static Sb Prepare(const uint8_t*) { return {}; }
  template <bool>
  static void Codes(const uint8_t* p, int U, __m512i* w) {
#pragma GCC unroll 8
    for (int c = 0; c < 8; ++c) w[c] = _mm512_load_si512(p + (U * 8 + c) * 64);
  }
  static __m512 Scale(const uint8_t* p, int U, int, const Sb&) { return HalfVec(p + 4096 + U * 32); }
  // One row of 8 blocks (272 B) into lane r.
  static void Pack(const uint8_t* blocks, int r, uint8_t* rec) {
    uint8_t u[256];
    CanonicalCodes<UnpackQ8_0>(blocks, 8, u);
    PutBytes(u, r, rec);
    const auto* x = reinterpret_cast<const quant::BlockQ8_0*>(blocks);
    for (int U = 0; U < 8; ++U) std::memcpy(rec + 4096 + (U * 16 + r) * 2, &x[U].d, 2);
  }
};

struct PackedQ4_K {
  static constexpr int kSub = 32, kOffset = 0;
  static constexpr bool kMins = true;
  static constexpr int64_t kBytes = 2368;
  using Sb = DMin;
  static Sb Prepare(const uint8_t* p) { return LoadDMin(p + 2048); }
  template <bool kGf>
  static void Codes(const uint8_t* p, int U, __m512i* w) {
    const __m512i low4 = _mm512_set1_epi8(0x0F);
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      const __m512i q = _mm512_load_si512(p + (U * 4 + j) * 64);
      w[j] = _mm512_and_si512(q, low4);
      w[j + 4] = kGf ? Gf(q, kGfHighNibble) : _mm512_and_si512(ShiftBytes<4>(q), low4);
    }
  }
  static __m512 Scale(const uint8_t* p, int U, int H, const Sb& sb) { return ScaleU8(p + 2112 + U * 16, sb.d); }
  static __m512 Min(const uint8_t* p, int U, int, const Sb& sb) { return ScaleU8(p + 2240 + U * 16, sb.mdmin); }
  static void Pack(const uint8_t* block, int r, uint8_t* rec) {
    uint8_t u[256];
    CanonicalCodes<UnpackQ4_K>(block, 1, u);
    PutNibbles(u, r, rec);
    const auto* x = reinterpret_cast<const quant::BlockQ4_K*>(block);
    PutDMin(x->d, x->dmin, r, rec + 2048);
    PutKScales(x->scales, r, rec + 2112);
  }
};

struct PackedQ6_K : NoMin {
  static constexpr int kSub = 16, kOffset = 32;
  static constexpr bool kMins = false, kScalePairs = false;
  static constexpr int64_t kBytes = 3392;  // 3360 + 32 B to a multiple of 64
  struct Sb {
    __m512 d;
  };
  static Sb Prepare(const uint8_t* p) { return {HalfVec(p + 3072)}; }
  // Unit U: S[U][k] (k = 0..5), 6 x 64 B. For q = 0, 1 and i = 0..2, byte
  // b of S[3q + i] = W[4q + i]'s byte b (6 bits) | bits 2i..2i+1 of
  // W[4q + 3]'s byte b, in bits 6-7: W[4q + i] = S & 0x3F, and W[4q + 3]
  // gathers the three top pairs: s0 >> 6 in bits 0-1, s1 >> 4 in bits 2-3,
  // s2 >> 2 in bits 4-5 (two bit selects and a mask, or three
  // gf2p8affineqb and an or).
  // W[4q .. 4q + 3] of unit U (q = the 16-code half) in w[0..3].
  template <bool kGf>
  static void CodesHalf(const uint8_t* p, int U, int q, __m512i* w) {
    const __m512i low6 = _mm512_set1_epi8(0x3F);
    const uint8_t* sq = p + (U * 6 + 3 * q) * 64;
    const __m512i s0 = _mm512_load_si512(sq);
    const __m512i s1 = _mm512_load_si512(sq + 64);
    const __m512i s2 = _mm512_load_si512(sq + 128);
    w[0] = _mm512_and_si512(s0, low6);
    w[1] = _mm512_and_si512(s1, low6);
    w[2] = _mm512_and_si512(s2, low6);
    if constexpr (kGf) {
      w[3] = _mm512_ternarylogic_epi32(Gf(s0, kGfTop2To0), Gf(s1, kGfTop2To2), Gf(s2, kGfTop2To4), 0xFE);
    } else {
      const __m512i pairs01 = Select(_mm512_set1_epi8(0x03), ShiftBytes<6>(s0), ShiftBytes<4>(s1));
      w[3] = _mm512_and_si512(Select(_mm512_set1_epi8(0x0F), pairs01, ShiftBytes<2>(s2)), low6);
    }
  }
  // The int8 scale of half H (16 codes) of unit U, one int32 per lane.
  static __m512i ScaleInts(const uint8_t* p, int U, int H) { return LoadI8(p + 3104 + (2 * U + H) * 16); }
  static void Pack(const uint8_t* block, int r, uint8_t* rec) {
    uint8_t u[256];
    CanonicalCodes<UnpackQ6_K>(block, 1, u);
    for (int U = 0; U < 8; ++U)
      for (int q = 0; q < 2; ++q)
        for (int i = 0; i < 3; ++i)
          for (int b = 0; b < 4; ++b) {
            const uint8_t own = u[32 * U + 4 * (4 * q + i) + b];
            const uint8_t third = u[32 * U + 4 * (4 * q + 3) + b];
            rec[((U * 6 + 3 * q + i) * 16 + r) * 4 + b] =
                static_cast<uint8_t>(own | ((third >> (2 * i)) & 3) << 6);
          }
    const auto* x = reinterpret_cast<const quant::BlockQ6_K*>(block);
    std::memcpy(rec + 3072 + r * 2, &x->d, 2);
    for (int j = 0; j < 16; ++j) rec[3104 + j * 16 + r] = static_cast<uint8_t>(x->scales[j]);
  }
};

// ---- The 4- and 5-bit types. Codes in nibble planes P[U][j] (j = 0..3,
// 8 x 4 x 64 B: low nibble = W[j], high = W[j + 4]) and, for the 5-bit
// types, a plane H[U] (8 x 64 B) whose byte b of lane r has in bit c the
// fifth bit (16) of W[c]'s byte b; per unit the f16 block scale d[U][r]
// (and m[U][r]) or, for Q5_K, Q4_K's super-block scales.

// W[J] and W[J + 4] of unit U from nibble plane J at p; kBit5: | the
// fifth bits, bits J and J + 4 of hb moved to bit 4.
template <int J, bool kBit5, bool kGf>
inline void DecodeNibblePlane(const uint8_t* p, int U, __m512i hb, __m512i* w) {
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  const __m512i q = _mm512_load_si512(p + (U * 4 + J) * 64);
  if constexpr (kGf) {
    const __m512i hi = Gf(q, kGfHighNibble);
    if constexpr (kBit5) {
      w[J] = AndOr(q, Gf(hb, int64_t{1} << (24 + J)), low4);
      w[J + 4] = _mm512_or_si512(hi, Gf(hb, int64_t{1} << (24 + J + 4)));
    } else {
      w[J] = _mm512_and_si512(q, low4);
      w[J + 4] = hi;
    }
  } else if constexpr (kBit5) {
    w[J] = AndOr(q, MoveBit<J, 4>(hb), low4);
    w[J + 4] = AndOr(ShiftBytes<4>(q), MoveBit<J + 4, 4>(hb), low4);
  } else {
    w[J] = _mm512_and_si512(q, low4);
    w[J + 4] = _mm512_and_si512(ShiftBytes<4>(q), low4);
  }
}
// W[0..7] of unit U from the nibble planes at p (kBit5: + the fifth bits at h).
template <bool kBit5, bool kGf>
inline void DecodeNibbles(const uint8_t* p, int U, const uint8_t* h, __m512i* w) {
  const __m512i hb = kBit5 ? _mm512_load_si512(h + U * 64) : _mm512_setzero_si512();
  DecodeNibblePlane<0, kBit5, kGf>(p, U, hb, w);
  DecodeNibblePlane<1, kBit5, kGf>(p, U, hb, w);
  DecodeNibblePlane<2, kBit5, kGf>(p, U, hb, w);
  DecodeNibblePlane<3, kBit5, kGf>(p, U, hb, w);
}

// Packing: lane r of the fifth-bit plane from the canonical codes u[256].
inline void PutBit5(const uint8_t* u, int r, uint8_t* h /* [8 U][16 r][4] */) {
  for (int U = 0; U < 8; ++U)
    for (int b = 0; b < 4; ++b) {
      uint8_t v = 0;
      for (int c = 0; c < 8; ++c) v |= static_cast<uint8_t>(((u[32 * U + 4 * c + b] >> 4) & 1) << c);
      h[(U * 16 + r) * 4 + b] = v;
    }
}

// The 32-code block types: Kind gives the block, its canonical unpacker,
// the offset, the fifth-bit plane and the min.
template <class Block, void (*Unpack)(const uint8_t*, int64_t, uint8_t*, float*, float*),
          int Offset, bool Bit5, bool Mins, bool Iq4nl = false>
struct PackedBlock32 {
  static constexpr int kSub = 32, kOffset = Offset;
  static constexpr bool kMins = Mins;
  static constexpr int64_t kCodes = 2048, kH = Bit5 ? 512 : 0;
  static constexpr int64_t kD = kCodes + kH, kM = kD + 256;
  static constexpr int64_t kBytes = kM + (Mins ? 256 : 0);
  struct Sb {};
  static Sb Prepare(const uint8_t*) { return {}; }
  template <bool kGf>
  static void Codes(const uint8_t* p, int U, __m512i* w) {
    DecodeNibbles<Bit5, kGf>(p, U, p + kCodes, w);
    if constexpr (Iq4nl) {  // u = kvalues_iq4nl[nibble] + 128, by vpshufb
      alignas(16) uint8_t t[16];
      for (int i = 0; i < 16; ++i) t[i] = static_cast<uint8_t>(quant::kValuesIQ4_NL[i] + 128);
      const __m512i table =
          _mm512_maskz_broadcast_i32x4(kAll, _mm_load_si128(reinterpret_cast<const __m128i*>(t)));
#pragma GCC unroll 8
      for (int c = 0; c < 8; ++c) w[c] = _mm512_shuffle_epi8(table, w[c]);
    }
  }
  static __m512 Scale(const uint8_t* p, int U, int, const Sb&) { return HalfVec(p + kD + U * 32); }
  static __m512 Min(const uint8_t* p, int U, int, const Sb&) {
    if constexpr (Mins) return HalfVec(p + kM + U * 32);
    return _mm512_setzero_ps();
  }
  // One row of 8 blocks into lane r; the file's nibbles for IQ4_NL (the
  // code book is applied when decoding).
  static void Pack(const uint8_t* blocks, int r, uint8_t* rec) {
    uint8_t u[256];
    const auto* x = reinterpret_cast<const Block*>(blocks);
    if constexpr (Iq4nl) {
      for (int U = 0; U < 8; ++U)
        for (int i = 0; i < 16; ++i) {
          u[32 * U + i] = x[U].qs[i] & 0x0F;
          u[32 * U + 16 + i] = x[U].qs[i] >> 4;
        }
    } else {
      CanonicalCodes<Unpack>(blocks, 8, u);
    }
    PutNibbles(u, r, rec);
    if constexpr (Bit5) PutBit5(u, r, rec + kCodes);
    for (int U = 0; U < 8; ++U) {
      std::memcpy(rec + kD + (U * 16 + r) * 2, &x[U].d, 2);
      if constexpr (Mins) std::memcpy(rec + kM + (U * 16 + r) * 2, &x[U].m, 2);
    }
  }
};

using PackedQ4_0 = PackedBlock32<quant::BlockQ4_0, UnpackQ4_0, 8, false, false>;
using PackedQ4_1 = PackedBlock32<quant::BlockQ4_1, UnpackQ4_1, 0, false, true>;
using PackedQ5_0 = PackedBlock32<quant::BlockQ5_0, UnpackQ5_0, 16, true, false>;
using PackedQ5_1 = PackedBlock32<quant::BlockQ5_1, UnpackQ5_1, 0, true, true>;
using PackedIQ4_NL = PackedBlock32<quant::BlockIQ4_NL, UnpackIQ4_NL, 128, false, false, true>;

// Q5_K: Q4_K's record with the fifth-bit plane after the nibbles.
struct PackedQ5_K {
  static constexpr int kSub = 32, kOffset = 0;
  static constexpr bool kMins = true;
  static constexpr int64_t kBytes = 2880;
  using Sb = DMin;
  static Sb Prepare(const uint8_t* p) { return LoadDMin(p + 2560); }
  template <bool kGf>
  static void Codes(const uint8_t* p, int U, __m512i* w) { DecodeNibbles<true, kGf>(p, U, p + 2048, w); }
  static __m512 Scale(const uint8_t* p, int U, int, const Sb& sb) { return ScaleU8(p + 2624 + U * 16, sb.d); }
  static __m512 Min(const uint8_t* p, int U, int, const Sb& sb) { return ScaleU8(p + 2752 + U * 16, sb.mdmin); }
  static void Pack(const uint8_t* block, int r, uint8_t* rec) {
    uint8_t u[256];
    CanonicalCodes<UnpackQ5_K>(block, 1, u);
    PutNibbles(u, r, rec);
    PutBit5(u, r, rec + 2048);
    const auto* x = reinterpret_cast<const quant::BlockQ5_K*>(block);
    PutDMin(x->d, x->dmin, r, rec + 2560);
    PutKScales(x->scales, r, rec + 2624);
  }
};

// ---- The 2- and 3-bit k-quants: per unit two planes T[U][h] (h = 0, 1;
// 8 x 2 x 64 B) whose byte b of lane r holds the low 2 bits of W[4h + c']'s
// byte b in bits 2c'..2c'+1 (c' = 0..3), cut by shift and mask (by
// gf2p8affineqb in tiles of one or two input rows on a CPU with GFNI); Q3_K's third
// bit in a plane H[U] as the fifth bit of Q5_0. Scales per 16 codes.

// Bits 2C..2C+1 of every byte to bits 0-1.
// gf2p8affineqb's matrix for it: bits 2c, 2c + 1 to output bits 0, 1 (the
// matrix rows of output bits 0 and 1: bytes 7 and 6).
constexpr int64_t GfBits2To0(int c) {
  return (int64_t{1} << (2 * c)) << 56 | (int64_t{1} << (2 * c + 1)) << 48;
}
template <int C, bool kGf>
inline __m512i Cut2(__m512i t) {
  if constexpr (kGf) return Gf(t, GfBits2To0(C));
  return _mm512_and_si512(ShiftBytes<2 * C>(t), _mm512_set1_epi8(0x03));
}

inline void PutBits2(const uint8_t* u, int r, uint8_t* t /* [8 U][2 h][16 r][4] */) {
  for (int U = 0; U < 8; ++U)
    for (int h = 0; h < 2; ++h)
      for (int b = 0; b < 4; ++b) {
        uint8_t v = 0;
        for (int c = 0; c < 4; ++c) v |= static_cast<uint8_t>((u[32 * U + 4 * (4 * h + c) + b] & 3) << (2 * c));
        t[((U * 2 + h) * 16 + r) * 4 + b] = v;
      }
}

// Q2_K, 1344 B: T[U][h] 1024 B, d[r], dmin[r] f16, the file's scale bytes
// sc[U][r][h] (low nibble scale, high nibble min; sub-block j = 2U + h, the
// two of a unit side by side: one lane of int16 pairs).
struct PackedQ2_K {
  static constexpr int kSub = 16, kOffset = 0;
  static constexpr bool kMins = true, kScalePairs = true;
  static constexpr int64_t kBytes = 1344;
  using Sb = DMin;
  static Sb Prepare(const uint8_t* p) { return LoadDMin(p + 1024); }
  // W[4h .. 4h + 3] of unit U in w[0..3].
  template <bool kGf>
  static void CodesHalf(const uint8_t* p, int U, int h, __m512i* w) {
    const __m512i t = _mm512_load_si512(p + (U * 2 + h) * 64);
    w[0] = Cut2<0, kGf>(t), w[1] = Cut2<1, kGf>(t), w[2] = Cut2<2, kGf>(t), w[3] = Cut2<3, kGf>(t);
  }
  // Unit U's two scales (mins) per lane as int16 pairs.
  static __m512i ScalePairs(const uint8_t* p, int U) {
    return _mm512_and_si512(LoadU8Pairs(p + 1088 + U * 32), _mm512_set1_epi16(0x0F));
  }
  static __m512i MinPairs(const uint8_t* p, int U) {
    return _mm512_srli_epi16(LoadU8Pairs(p + 1088 + U * 32), 4);
  }
  static void Pack(const uint8_t* block, int r, uint8_t* rec) {
    uint8_t u[256];
    CanonicalCodes<UnpackQ2_K>(block, 1, u);
    PutBits2(u, r, rec);
    const auto* x = reinterpret_cast<const quant::BlockQ2_K*>(block);
    PutDMin(x->d, x->dmin, r, rec + 1024);
    for (int j = 0; j < 16; ++j) rec[1088 + (j / 2 * 16 + r) * 2 + j % 2] = x->scales[j];
  }
};

// Q3_K, 1856 B: T[U][h] 1024 B, H[U] 512 B (bit c of byte b = bit 2 of
// W[c]'s byte b), d[r] f16, sc[U][r][h] i8 = the 6-bit scale - 32 (as
// Q2_K's), 32 B of padding to a multiple of 64.
struct PackedQ3_K : NoMin {
  static constexpr int kSub = 16, kOffset = 4;
  static constexpr bool kMins = false, kScalePairs = true;
  static constexpr int64_t kBytes = 1856;
  struct Sb {
    __m512 d;
  };
  static Sb Prepare(const uint8_t* p) { return {HalfVec(p + 1536)}; }
  // W[4h .. 4h + 3] of unit U in w[0..3]: W[4h + c] = 2-bit field c of
  // T[U][h] | bit 4h + c of hb moved to bit 2.
  template <bool kGf>
  static void CodesHalf(const uint8_t* p, int U, int h, __m512i* w) {
    const __m512i t = _mm512_load_si512(p + (U * 2 + h) * 64);
    const __m512i hb = _mm512_load_si512(p + 1024 + U * 64);
    if constexpr (kGf) {
#pragma GCC unroll 4
      for (int c = 0; c < 4; ++c) {
        w[c] = _mm512_or_si512(Gf(t, GfBits2To0(c)), Gf(hb, int64_t{1} << (40 + 4 * h + c)));
      }
      return;
    }
    const __m512i low2 = _mm512_set1_epi8(0x03);
    if (h == 0) {
      w[0] = AndOr(t, MoveBit<0, 2>(hb), low2);
      w[1] = AndOr(ShiftBytes<2>(t), MoveBit<1, 2>(hb), low2);
      w[2] = AndOr(ShiftBytes<4>(t), MoveBit<2, 2>(hb), low2);
      w[3] = AndOr(ShiftBytes<6>(t), MoveBit<3, 2>(hb), low2);
    } else {
      w[0] = AndOr(t, MoveBit<4, 2>(hb), low2);
      w[1] = AndOr(ShiftBytes<2>(t), MoveBit<5, 2>(hb), low2);
      w[2] = AndOr(ShiftBytes<4>(t), MoveBit<6, 2>(hb), low2);
      w[3] = AndOr(ShiftBytes<6>(t), MoveBit<7, 2>(hb), low2);
    }
  }
  static __m512i ScalePairs(const uint8_t* p, int U) { return LoadI8Pairs(p + 1568 + U * 32); }
  static void Pack(const uint8_t* block, int r, uint8_t* rec) {
    uint8_t u[256];
    CanonicalCodes<UnpackQ3_K>(block, 1, u);
    PutBits2(u, r, rec);
    for (int U = 0; U < 8; ++U)
      for (int b = 0; b < 4; ++b) {
        uint8_t v = 0;
        for (int c = 0; c < 8; ++c) v |= static_cast<uint8_t>(((u[32 * U + 4 * c + b] >> 2) & 1) << c);
        rec[1024 + (U * 16 + r) * 4 + b] = v;
      }
    const auto* x = reinterpret_cast<const quant::BlockQ3_K*>(block);
    std::memcpy(rec + 1536 + r * 2, &x->d, 2);
    uint32_t aux[4];
    Q3KScales(x->scales, aux);
    int8_t sc[16];
    std::memcpy(sc, aux, 16);
    for (int j = 0; j < 16; ++j) rec[1568 + (j / 2 * 16 + r) * 2 + j % 2] = static_cast<uint8_t>(sc[j] - 32);
  }
};

// The int32 sums of one sub-block (kC x 4 codes per row; kC = 8 for 32
// codes, 4 for a 16-code half) for MB input rows: w = its kC code vectors,
// ab = its first activation code of row 0 (rows 32 bytes apart), init =
// the rows' -o s (read for a type with an offset: each row's first chain
// starts there, a broadcast load, rather than adding it after).
// The MB sums are interleaved (c outer, m inner): MB independent vpdpbusd
// chains side by side in the instruction stream, so the core runs them in
// parallel (one chain per input row in turn left each chain's 4-5 cycle
// latency to the out-of-order window). With one or two input rows, each
// row's sum runs as two chains (even and odd c) added at the end: the same
// int32 sum with half the latency between units.
template <class T, int MB, int kC>
inline void SubBlockSums(const __m512i* w, const int8_t* ab, const int32_t* init, __m512i* isum) {
  constexpr int kSplit = MB <= 2 ? 2 : 1;
  __m512i part[kSplit][MB];
#pragma GCC unroll 8
  for (int m = 0; m < MB; ++m) {
    part[0][m] = T::kOffset != 0 ? _mm512_set1_epi32(init[m]) : _mm512_setzero_si512();
    if constexpr (kSplit == 2) part[kSplit - 1][m] = _mm512_setzero_si512();
  }
#pragma GCC unroll 8
  for (int c = 0; c < kC; ++c) {
#pragma GCC unroll 8
    for (int m = 0; m < MB; ++m) DpbusdBroadcast(part[c % kSplit][m], w[c], ab + m * 32 + 4 * c);
  }
#pragma GCC unroll 8
  for (int m = 0; m < MB; ++m) {
    isum[m] = kSplit == 2 ? _mm512_add_epi32(part[0][m], part[kSplit - 1][m]) : part[0][m];
  }
}

// Unit U (32 codes) of a record of a type with scales per 32 codes, for MB
// input rows; u = the unit's index in the Panel `pn` (the record's Panel:
// u = U). Same float operations in the same order as one row at a time.
template <class T, int MB, bool kGf>
inline void PackedUnit32(const uint8_t* rec, int U, const typename T::Sb& sb, const Panel& pn,
                         int64_t u, __m512* acc) {
  __m512i w[8];
  T::template Codes<kGf>(rec, U, w);
  __m512i isum[MB];
  SubBlockSums<T, MB, 8>(w, pn.a + u * MB * 32, pn.init32 + u * MB, isum);
  const __m512 dw = T::Scale(rec, U, 0, sb);
  __m512 mw = _mm512_setzero_ps();
  if constexpr (T::kMins) mw = T::Min(rec, U, 0, sb);
#pragma GCC unroll 8
  for (int m = 0; m < MB; ++m) {
    acc[m] = _mm512_fmadd_ps(_mm512_maskz_cvtepi32_ps(kAll, isum[m]),
                             _mm512_mul_ps(dw, _mm512_set1_ps(pn.da[u * MB + m])), acc[m]);
    if constexpr (T::kMins) acc[m] = _mm512_fmadd_ps(mw, _mm512_set1_ps(pn.qs32[u * MB + m]), acc[m]);
  }
}

// Unit U of a record of a type with scales per 16 codes (Q2_K, Q3_K,
// Q6_K): t[m] += float(isum0 sc0 + isum1 sc1) * da (the record's d is
// applied by PackedRecord).
template <class T, int MB, bool kGf>
inline void PackedUnit16(const uint8_t* rec, int U, const Panel& pn, int64_t u, __m512* t) {
  // Each half's four code vectors are cut just before its sums: four fewer
  // registers live beside the 8 input rows' sums and accumulators.
  __m512i w[4];
  T::template CodesHalf<kGf>(rec, U, 0, w);
  const int8_t* ab = pn.a + u * MB * 32;
  __m512i comb[MB], isum1[MB];
  SubBlockSums<T, MB, 4>(w, ab, pn.init16 + 2 * u * MB, comb);
  if constexpr (!T::kScalePairs) {
    const __m512i sc0 = T::ScaleInts(rec, U, 0);
#pragma GCC unroll 8
    for (int m = 0; m < MB; ++m) comb[m] = _mm512_mullo_epi32(comb[m], sc0);
  }
  T::template CodesHalf<kGf>(rec, U, 1, w);
  SubBlockSums<T, MB, 4>(w, ab + 16, pn.init16 + (2 * u + 1) * MB, isum1);
  if constexpr (T::kScalePairs) {
    // (isum0 | isum1 << 16) as int16 pairs, then vpmaddwd with (sc0, sc1).
    const __m512i sc = T::ScalePairs(rec, U);
#pragma GCC unroll 8
    for (int m = 0; m < MB; ++m) {
      comb[m] = _mm512_madd_epi16(
          _mm512_mask_blend_epi16(0xAAAAAAAA, comb[m], _mm512_maskz_slli_epi32(kAll, isum1[m], 16)), sc);
    }
  } else {
    const __m512i sc1 = T::ScaleInts(rec, U, 1);
#pragma GCC unroll 8
    for (int m = 0; m < MB; ++m) comb[m] = _mm512_add_epi32(comb[m], _mm512_mullo_epi32(isum1[m], sc1));
  }
#pragma GCC unroll 8
  for (int m = 0; m < MB; ++m) {
    t[m] = _mm512_fmadd_ps(_mm512_maskz_cvtepi32_ps(kAll, comb[m]), _mm512_set1_ps(pn.da[u * MB + m]), t[m]);
  }
}

// One record (256 codes of 16 vocabulary rows) x MB input rows: the MB
// accumulators come from acc_buf[MB][16] (zero for the first record, s = 0)
// and go back to it. Keeping them in memory between records costs MB loads
// and stores per 8 x 8 x MB vpdpbusd and lets every input-row tile use the
// record while it is in L1 (a group of 16 rows x 4,096 codes is 21-70 KB:
// more than a 48 KiB L1 for Q8_0, Q6_K and Q5_1).
template <class T, int MB, bool kGf>
inline void PackedRecord(const uint8_t* rec, int64_t s, const Panel& pn, float* acc_buf) {
  const typename T::Sb sb = T::Prepare(rec);
  __m512 acc[MB];
  if constexpr (T::kSub == 16) {
    __m512 t[MB];
#pragma GCC unroll 8
    for (int m = 0; m < MB; ++m) t[m] = _mm512_setzero_ps();
#pragma GCC unroll 2
    for (int U = 0; U < 8; ++U) PackedUnit16<T, MB, kGf>(rec, U, pn, U, t);
#pragma GCC unroll 8
    for (int m = 0; m < MB; ++m) {
      acc[m] = s == 0 ? _mm512_setzero_ps() : _mm512_load_ps(acc_buf + 16 * m);
      acc[m] = _mm512_fmadd_ps(t[m], sb.d, acc[m]);
    }
    if constexpr (T::kMins) {  // Q2_K: tm[m] = sum_U float(mn0 s0 + mn1 s1) * da
#pragma GCC unroll 8
      for (int m = 0; m < MB; ++m) t[m] = _mm512_setzero_ps();
#pragma GCC unroll 2
      for (int U = 0; U < 8; ++U) {
        const __m512i mn = T::MinPairs(rec, U);
#pragma GCC unroll 8
        for (int m = 0; m < MB; ++m) {
          const __m512i ms = _mm512_madd_epi16(mn, _mm512_set1_epi32(pn.s16x2[U * MB + m]));
          t[m] = _mm512_fmadd_ps(_mm512_maskz_cvtepi32_ps(kAll, ms), _mm512_set1_ps(pn.da[U * MB + m]), t[m]);
        }
      }
#pragma GCC unroll 8
      for (int m = 0; m < MB; ++m) acc[m] = _mm512_fmadd_ps(t[m], sb.mdmin, acc[m]);
    }
  } else {
#pragma GCC unroll 8
    for (int m = 0; m < MB; ++m) acc[m] = s == 0 ? _mm512_setzero_ps() : _mm512_load_ps(acc_buf + 16 * m);
#pragma GCC unroll 2
    for (int U = 0; U < 8; ++U) PackedUnit32<T, MB, kGf>(rec, U, sb, pn, U, acc);
  }
#pragma GCC unroll 8
  for (int m = 0; m < MB; ++m) _mm512_store_ps(acc_buf + 16 * m, acc[m]);
}

template <class T>
void PackGroupsT(const uint8_t* w, int64_t vocab, int64_t d, int64_t g0, int64_t g1,
                 int64_t row_bytes, uint8_t* packed) {
  const int64_t nsb = d / 256;
  const int64_t sb_bytes = row_bytes / nsb;  // the file's bytes per row and 256 codes
  for (int64_t g = g0; g < g1; ++g) {
    for (int64_t s = 0; s < nsb; ++s) {
      uint8_t* rec = packed + (g * nsb + s) * T::kBytes;
      std::memset(rec, 0, static_cast<size_t>(T::kBytes));  // padding rows: zero scales
      for (int r = 0; r < kPackedGroupRows; ++r) {
        const int64_t v = g * kPackedGroupRows + r;
        if (v < vocab) T::Pack(w + v * row_bytes + s * sb_bytes, r, rec);
      }
    }
  }
}

// The panel's first 64-byte boundary (QuantPackedPanelBytes leaves room).
inline uint8_t* PanelBase(const uint8_t* p) {
  return reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(p) + 63) & ~uintptr_t{63});
}

// The panels of `rows` input rows for a type of offset o, in the order the
// kernel reads them: per block of kPackedRowBlock rows (at row m0:
// m0 * (d / 32) * kPackedPanelBytesPer32), per record s (256 codes, 8
// units) and per tile of kPackedMb rows, one Panel of 8 units:
//
//   block m0: [s = 0: tile 0 | tile 8 | ...][s = 1: tile 0 | ...] ...
//   tile m of record s at (s * mrows + m) * 8 * kPackedPanelBytesPer32
//
// so a group's pass over its records reads its panels as one sequential
// stream.
void BuildPanels(const uint8_t* acts, int64_t rows, int64_t d, int o, uint8_t* panel) {
  const ActLayout al(d);
  const int64_t nu = d / 32, nsb = d / 256;
  uint8_t* base = PanelBase(panel);
  for (int64_t m0 = 0; m0 < rows; m0 += kPackedRowBlock) {
    const int64_t mrows = Min64(kPackedRowBlock, rows - m0);
    uint8_t* block = base + m0 * nu * kPackedPanelBytesPer32;
    for (int64_t s = 0; s < nsb; ++s) {
      for (int64_t m = 0; m < mrows; m += kPackedMb) {
        const int64_t mb = Min64(kPackedMb, mrows - m);
        const uint8_t* r[kPackedMb] = {};
        for (int64_t i = 0; i < mb; ++i) r[i] = acts + (m0 + m + i) * al.bytes;
        BuildPanel(r, mb, d, 8 * s, 8, o, block + (s * mrows + m) * 8 * kPackedPanelBytesPer32);
      }
    }
  }
}

template <class T>
void PackedKernelT(const uint8_t* panels, int64_t rows, const uint8_t* packed, int64_t d,
                   int64_t v0, int64_t v1, float* out, int64_t ldo, int prefetch_records,
                   int gf_rows_max) {
  const int64_t nu = d / 32, nsb = d / 256;
  for (int64_t m0 = 0; m0 < rows; m0 += kPackedRowBlock) {
    const int64_t mrows = Min64(kPackedRowBlock, rows - m0);
    const uint8_t* block = PanelBase(panels) + m0 * nu * kPackedPanelBytesPer32;
    // Per group, record by record, every tile of input rows (the record
    // stays in L1 between them); prefetch_records > 0: before each record,
    // prefetch (prefetcht0, every 64-byte line) the record that far ahead,
    // which may be in the next group; prefetches never fault, so lines
    // past the end of the copy are harmless.
    alignas(64) float acc_buf[kPackedRowBlock * 16];
    const int64_t pf_bytes = prefetch_records * T::kBytes;
    for (int64_t v = v0; v < v1; v += kPackedGroupRows) {
      const int64_t g = v / kPackedGroupRows;
      const int64_t nr = Min64(kPackedGroupRows, v1 - v);
      const __mmask16 lanes = static_cast<__mmask16>((1u << nr) - 1);
      const uint8_t* group = packed + g * nsb * T::kBytes;
      for (int64_t s = 0; s < nsb; ++s) {
        const uint8_t* rec = group + s * T::kBytes;
        if (pf_bytes > 0) {
          const char* ahead = reinterpret_cast<const char*>(rec) + pf_bytes;
          for (int64_t b = 0; b < T::kBytes; b += 64) _mm_prefetch(ahead + b, _MM_HINT_T0);
        }
        for (int64_t m = 0; m < mrows; m += kPackedMb) {
          const int mb = static_cast<int>(Min64(kPackedMb, mrows - m));
          const Panel pn(block + (s * mrows + m) * 8 * kPackedPanelBytesPer32, 8, mb);
          float* ab = acc_buf + m * 16;
          switch (mb) {
            case 8: PackedRecord<T, 8, false>(rec, s, pn, ab); break;
            case 7: PackedRecord<T, 7, false>(rec, s, pn, ab); break;
            case 6: PackedRecord<T, 6, false>(rec, s, pn, ab); break;
            case 5: PackedRecord<T, 5, false>(rec, s, pn, ab); break;
            case 4: PackedRecord<T, 4, false>(rec, s, pn, ab); break;
            case 3: PackedRecord<T, 3, false>(rec, s, pn, ab); break;
            case 2:  // up to kPackedGfRowsMax rows: gf2p8affineqb where measured faster
              if (gf_rows_max >= 2) {
                PackedRecord<T, 2, true>(rec, s, pn, ab);
              } else {
                PackedRecord<T, 2, false>(rec, s, pn, ab);
              }
              break;
            default:
              if (gf_rows_max >= 1) {
                PackedRecord<T, 1, true>(rec, s, pn, ab);
              } else {
                PackedRecord<T, 1, false>(rec, s, pn, ab);
              }
              break;
          }
        }
      }
      for (int64_t m = 0; m < mrows; ++m) {
        _mm512_mask_storeu_ps(out + (m0 + m) * ldo + v, lanes, _mm512_load_ps(acc_buf + m * 16));
      }
    }
  }
}
}  // namespace

namespace quant_kernel_internal {
static_assert(PackedQ8_0::kBytes == kPackedRecordBytesQ8_0);
static_assert(PackedQ4_K::kBytes == kPackedRecordBytesQ4_K);
static_assert(PackedQ6_K::kBytes == kPackedRecordBytesQ6_K);
static_assert(PackedQ4_0::kBytes == kPackedRecordBytesQ4_0);
static_assert(PackedQ4_1::kBytes == kPackedRecordBytesQ4_1);
static_assert(PackedQ5_0::kBytes == kPackedRecordBytesQ5_0);
static_assert(PackedQ5_1::kBytes == kPackedRecordBytesQ5_1);
static_assert(PackedIQ4_NL::kBytes == kPackedRecordBytesIQ4_NL);
static_assert(PackedQ5_K::kBytes == kPackedRecordBytesQ5_K);
static_assert(PackedQ2_K::kBytes == kPackedRecordBytesQ2_K);
static_assert(PackedQ3_K::kBytes == kPackedRecordBytesQ3_K);

// Calls f with the packed type of `type` (a null pointer of it); false for
// a type without one.
template <class F>
bool WithPacked(quant::GgmlType type, F&& f) {
  using quant::GgmlType;
  switch (type) {
    case GgmlType::kQ8_0: f(static_cast<PackedQ8_0*>(nullptr)); return true;
    case GgmlType::kQ4_0: f(static_cast<PackedQ4_0*>(nullptr)); return true;
    case GgmlType::kQ4_1: f(static_cast<PackedQ4_1*>(nullptr)); return true;
    case GgmlType::kQ5_0: f(static_cast<PackedQ5_0*>(nullptr)); return true;
    case GgmlType::kQ5_1: f(static_cast<PackedQ5_1*>(nullptr)); return true;
    case GgmlType::kIQ4_NL: f(static_cast<PackedIQ4_NL*>(nullptr)); return true;
    case GgmlType::kQ4_K: f(static_cast<PackedQ4_K*>(nullptr)); return true;
    case GgmlType::kQ5_K: f(static_cast<PackedQ5_K*>(nullptr)); return true;
    case GgmlType::kQ6_K: f(static_cast<PackedQ6_K*>(nullptr)); return true;
    case GgmlType::kQ2_K: f(static_cast<PackedQ2_K*>(nullptr)); return true;
    case GgmlType::kQ3_K: f(static_cast<PackedQ3_K*>(nullptr)); return true;
    default: return false;
  }
}
void Avx512PackGroups(const QuantTypeInfo& type, const uint8_t* w, int64_t vocab, int64_t d,
                      int64_t g0, int64_t g1, uint8_t* packed) {
  const int64_t row_bytes = d / type.block_size * type.block_bytes;
  WithPacked(type.type, [&](auto* t) {
    using T = std::remove_pointer_t<decltype(t)>;
    PackGroupsT<T>(w, vocab, d, g0, g1, row_bytes, packed);
  });
}
void Avx512BuildPanels(const QuantTypeInfo& type, const uint8_t* acts, int64_t rows, int64_t d,
                       uint8_t* panel) {
  int offset = 0;
  if (WithPacked(type.type, [&](auto* t) { offset = std::remove_pointer_t<decltype(t)>::kOffset; })) {
    BuildPanels(acts, rows, d, offset, panel);
  }
}
void Avx512PackedKernel(const QuantTypeInfo& type, const uint8_t* panel, int64_t rows,
                        const uint8_t* packed, int64_t d, int64_t v0, int64_t v1, float* out,
                        int64_t ldo, int prefetch_records, int gf_rows_max) {
  WithPacked(type.type, [&](auto* t) {
    using T = std::remove_pointer_t<decltype(t)>;
    PackedKernelT<T>(panel, rows, packed, d, v0, v1, out, ldo, prefetch_records, gf_rows_max);
  });
}
}  // namespace quant_kernel_internal
}  // namespace vocabd
