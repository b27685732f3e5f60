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

// Packed ("vocabulary lanes") layout of the same weights, built once (the
// head's copy, LmHead::Options::dense_pack): blocks of 16 vocabulary rows,
// each a contiguous stream with the rows in the 16 lanes of a vector, so a
// kernel multiplies one 64-byte load of weights by a broadcast input value
// for every input row, and no vector is summed across lanes at the end.
//
//   F32 block b (PackedF32BlockStride(d) = 16 d + 16 floats):
//     [ k = 0: W[16b][0] W[16b+1][0] ... W[16b+15][0] ]   64 bytes
//     [ k = 1: W[16b][1] ...              W[16b+15][1] ]
//     ...
//     [ k = d-1 ............................. ] [ 64 bytes of zeros ]
//   BF16 block b (PackedBf16BlockStride(d) = 16 d + 32 bf16, d even):
//     [ pair j = 0: W[16b][0] W[16b][1] W[16b+1][0] W[16b+1][1] ... ]   64 bytes
//     [ pair j = 1: W[16b][2] W[16b][3] ... ]
//     ... [ 64 bytes of zeros ]
//
// Rows past vocab_size in the last block are zeros. The 64 bytes after each
// block keep the blocks a tile reads side by side (16 d * 4 bytes apart, a
// multiple of 4 KiB for most d) out of the same cache sets.
// PackedHeadBlocks(vocab) blocks in all.
int64_t PackedF32BlockStride(int64_t d);
int64_t PackedBf16BlockStride(int64_t d);
int64_t PackedHeadBlocks(int64_t vocab);
// Fill blocks [b0, b1) of `packed` from row-major w [vocab, d] (threads may
// fill disjoint block ranges at once). BF16 needs d even.
void PackF32Blocks(const float* w, int64_t vocab, int64_t d, int64_t b0, int64_t b1,
                   float* packed);
void PackBf16Blocks(const uint16_t* w, int64_t vocab, int64_t d, int64_t b0, int64_t b1,
                    uint16_t* packed);

// HeadKernelF32 / HeadKernelBf16 on the packed layout, any number of rows:
// out[m * ldo + v] for v in [v0, v1), v0 a multiple of 16, v1 <= vocab_size.
// Register tiles of up to 4 blocks x 8 input rows (4 x 1..6, 3 x 7..8); more
// rows run as groups of <= 8 over k chunks of 128 (the chunk of the tile's
// blocks, up to 32 KiB, read by every group while it is in L1 / L2), so
// the weights are read from memory
// once per call whatever the rows. `acc` holds the groups' accumulators
// between chunks: PackedAccFloats(rows) floats, the caller's (per thread).
//
// Summation order: each F32 logit is one FMA chain over k = 0 .. d-1 in
// order starting from +0.0, acc = fma(W[v][k], x[m][k], acc), i.e. the same
// bits as std::fma in that loop; each BF16 logit is one vdpbf16ps lane over
// the pairs j = 0 .. d/2-1 in order. Neither depends on M, the row's place in
// the batch, [v0, v1) or the thread. Needs kAvx512 (F32) / kAvx512Bf16 (BF16).
int64_t PackedAccFloats(int64_t rows);
void HeadKernelF32Packed(const float* x, int64_t rows, const float* packed, int64_t d, int64_t v0,
                         int64_t v1, float* out, int64_t ldo, float* acc);
void HeadKernelBf16Packed(const uint16_t* x, int64_t rows, const uint16_t* packed, int64_t d,
                          int64_t v0, int64_t v1, float* out, int64_t ldo, float* acc);

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
