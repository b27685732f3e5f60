// Hand-written small-M LM-head kernels: logits for a few rows (M <= about
// 16) in one pass over the weight matrix.
//
//   x    [M, d]   row-major (F32, or BF16 bits for the BF16 kernel)
//   W    [V, d]   row-major (the embedding layout: one vocabulary row per
//                 weight row), F32 or BF16 bits
//   out  [M, ldo] F32; the kernels write out[m * ldo + v] for v in [v0, v1)
//
// Each call computes the vocabulary rows [v0, v1) (callers split V over
// threads). Every weight row is read from memory once per call: a register
// tile holds R weight rows x MB input rows of 16-lane accumulators (R * MB
// <= 24; MB <= 6, R = 8, 8, 6, 5, 4, 4 for MB = 1..6), each weight vector
// loaded once is multiplied with all MB input rows. M > 6 runs as several
// row groups of near-equal size over the same weight block while it is still
// in L1/L2. d needs no alignment (masked tail loads), V no multiple of R
// (single-row tiles finish it).
//
// Summation order: each (m, v) logit is one accumulator of 16 lanes summed
// along k in order (lane i holds k = i mod 16, or for BF16 the pairs
// k = 2i, 2i+1 mod 32), then reduced across lanes in a fixed tree. It does
// not depend on M, on which tile or thread computed it, or on [v0, v1):
// a row's logits are bit-identical whether it is scored alone or in a batch
// (as long as both go through these kernels).
//
// F32: _mm512_fmadd_ps (AVX512F). BF16: vdpbf16ps (AVX512_BF16: products of
// bf16 pairs, exact in F32, accumulated in F32 with round-to-nearest-even;
// the instruction flushes denormal inputs and results to zero), the same
// instruction oneDNN's bf16 kernels use on this ISA.
#ifndef VOCABD_LIB_HEAD_LM_HEAD_KERNEL_H_
#define VOCABD_LIB_HEAD_LM_HEAD_KERNEL_H_

#include <cstdint>

namespace vocabd {

enum class HeadKernelIsa {
  kNone,        // no hand-written kernel: use oneDNN for every M
  kAvx512,      // F32 kernel (AVX512F)
  kAvx512Bf16,  // F32 kernel and the BF16 kernel (AVX512F + AVX512BW + AVX512_BF16)
};

// The best kernel ISA this CPU supports (__builtin_cpu_supports, which also
// checks that the OS saves the AVX-512 state).
HeadKernelIsa DetectHeadKernelIsa();
const char* HeadKernelIsaName(HeadKernelIsa isa);

// out[m * ldo + v] = sum_k x[m * d + k] * w[v * d + k], m in [0, rows),
// v in [v0, v1). Needs kAvx512 (callers check DetectHeadKernelIsa()).
// Rows run in groups of at most 6 over tiles of weight rows; with two or
// more groups the next tile is prefetched into L2 while a tile's groups
// run. one_group_prefetch: do that also for rows <= 6 (one group), where
// whether it helps depends on the core's hardware prefetchers (LmHead
// measures it). The result does not depend on it.
void HeadKernelF32(const float* x, int64_t rows, const float* w, int64_t d, int64_t v0,
                   int64_t v1, float* out, int64_t ldo, bool one_group_prefetch);

// The same with BF16 x and w (raw bf16 bits) and F32 accumulation and output.
// Needs kAvx512Bf16.
void HeadKernelBf16(const uint16_t* x, int64_t rows, const uint16_t* w, int64_t d, int64_t v0,
                    int64_t v1, float* out, int64_t ldo);

// AMX (BF16 weights, any M): true when the CPU has AMX-TILE and AMX-BF16
// (and the BF16 kernel above) and Linux granted this process the AMX tile
// state (arch_prctl ARCH_REQ_XCOMP_PERM, asked once, here).
bool HeadKernelAmxAvailable();

// The input rows for the AMX kernel: groups of 16 rows (zero-padded) in the
// VNNI pair layout of AMX B tiles, one 16 x 32 tile per 32 columns. d must be
// a multiple of 32. PackedBf16ForAmxSize gives the element count.
int64_t PackedBf16ForAmxSize(int64_t rows, int64_t d);
void PackBf16ForAmx(const uint16_t* x, int64_t rows, int64_t d, uint16_t* packed);

// HeadKernelBf16 with AMX tiles: blocks of 32 (then 16) vocabulary rows, the
// weights loaded in place as A tiles, `packed` as B tiles, F32 accumulation
// (each logit: one tile element summed over k in 32-wide steps; like the
// other kernels its value does not depend on M or the range). Fewer than 16
// rows left at v1 go through HeadKernelBf16 with the unpacked `x`.
// Needs HeadKernelAmxAvailable() and d % 32 == 0.
void HeadKernelBf16Amx(const uint16_t* packed, const uint16_t* x, int64_t rows, const uint16_t* w,
                       int64_t d, int64_t v0, int64_t v1, float* out, int64_t ldo);

}  // namespace vocabd

#endif  // VOCABD_LIB_HEAD_LM_HEAD_KERNEL_H_
