// LM-head kernels on ggml-quantized weights, read in place:
//
//   logits[M, vocab] = hidden[M, d] x W^T,  W = vocab rows of d / QK blocks
//
// Weights: each vocabulary row is d / block_size consecutive ggml blocks of
// one type (lib/quant/ggml_blocks.h draws every layout), e.g. Q8_0, d = 4096:
//
//   row v: [d:f16|qs:32 x i8][d:f16|qs:32 x i8] ... 128 blocks, 34 B each
//   Q4_K:  [d|dmin|scales:12|qs:128] ... 16 super-blocks of 256, 144 B each
//
// Activations are quantized once per call, per row, in blocks of 32 values
// as ggml's Q8_0 (quantize_row_q8_0): da = max|x| / 127,
// a = round(x / da), int8 in [-127, 127]. Per row:
//
//   aq   [d]      int8 codes a
//   dal  [d / 4]  da of the block each group of 4 codes belongs to (one
//                 float per 32-bit lane of an int8 dot product)
//   da   [d / 32] the block scales
//   qs16 [d / 16] da * sum(a) over each 16 values (quantized sums)
//   qs32 [d / 32] the same over each block of 32
//   s32  [d / 32] sum(a) over each block of 32, int32 (the packed kernel's
//                 offset term, exact)
//   s16  [d / 16] the same over each 16 values
//
// Weights are unpacked, a few vocabulary rows at a time into an L1 buffer,
// to one canonical form for every type: unsigned codes u in [0, 255] and a
// scale and offset per 16 values (sub-block j),
//
//   w[k] = dw[j] * u[k] + mw[j],   j = k / 16
//
//   type    u                           dw            mw
//   Q8_0    qs + 128                    d             -128 d
//   Q4_0    nibble                      d             -8 d
//   Q4_1    nibble                      d             m
//   Q5_0    nibble | qh bit << 4        d             -16 d
//   Q5_1    nibble | qh bit << 4        d             m
//   IQ4_NL  kvalues_iq4nl[nibble] + 128 d             -128 d
//   Q2_K    2 bits                      d * scale4    -dmin * min4
//   Q3_K    2 bits | hmask bit << 2     d * (s6 - 32) -4 dw
//   Q4_K    nibble                      d * scale6    -dmin * min6
//   Q5_K    nibble | qh bit << 4        d * scale6    -dmin * min6
//   Q6_K    4 bits | 2 bits << 4        d * scale8    -32 dw
//
// so that one int8 dot product serves every type (u8 x s8: exactly what
// vpdpbusd multiplies):
//
//   logit = sum_j  dw[j] * da[j / 2] * sum_{k in j} u[k] a[k]   (int32, exact)
//         + sum_j  mw[j] * qs16[j]
//
// which equals sum_k w[k] * (da * a[k]) up to float rounding: the offset
// and min terms use the quantized sums, so the unsigned bias of u cancels
// and the error is that of the int8 activations alone, as in ggml's signed
// dot products (the exact float sums were measured 3-4x worse on the golden
// files: the error then is dw * sum(u e), u not centred). Activation blocks
// of 32 are ggml's own for the legacy types (Q8_0 and IQ4_NL then give
// ggml's error up to float rounding) and finer than its one scale per 256
// (Q8_K) for the k-quants (about half ggml's error). Blocks of 8 were
// measured 10-15% more accurate, but they cost the many-row kernel below a
// scale multiply per 8 codes and row, which made it no faster than BF16.
//
// ISA paths (QuantKernelIsa), chosen at run time from the CPU's features:
//   avx512vnni  zmm vpdpbusd: 64 codes per instruction, 16 int32 lanes of 4
//               products; lane scales dw x dal applied in float per 64 codes
//   avxvnni     the same on ymm with the VEX vpdpbusd (AVX-VNNI)
//   avx2        ymm: codes widened to int16, vpmaddwd; for every type at
//               M <= few_rows_max (hidden_size a multiple of 256) a fused
//               kernel: codes made in registers from the blocks,
//               vpmaddubsw + vpmaddwd, the u above except for Q8_0 and
//               IQ4_NL, multiplied as signed codes (qs, kvalues_iq4nl[nibble])
//               with no offset term (drawn in quant_kernel_avx2.cc)
//   scalar      plain C++ (the reference every path is tested against)
// The integer dot products are exact on every path; paths differ only in
// the order of float sums (tested: <= 1e-5 of a row's largest |logit|).
// The few-row kernel (every path; M <= few_rows_max where a path has two
// kernels, QuantKernelHasCrossover): register
// tiles of up to 4 vocabulary rows x 4 input rows (2 on ymm; more rows run
// as groups over the same unpacked weights, which stay in L1); input rows
// are taken in blocks of 64 so their quantized codes stay in L2.
// On avx512vnni, every type with hidden_size a multiple of 256 runs a fused
// form of it (quant_kernel_avx512vnni.cc): the same arithmetic lane for lane
// (bit-identical logits), but each 64-code chunk of u is made in a register
// straight from the blocks (Q8_0: codes XOR 0x80; Q4_K / Q5_K: nibbles by
// vpand / vpsrlw, | qh's bit; Q6_K: nibbles | 2-bit fields of qh; Q2_K /
// Q3_K: 2-bit fields by vpsrlvw, | hmask's bit; Q4_0 .. IQ4_NL: two blocks'
// nibbles, Q5's qh as a 64-bit byte mask, IQ4_NL's code book by vpshufb) and
// consumed at once,
// with no unpack pass through L1; tiles of 4 vocabulary rows x M <= 4 input
// rows, 2 x M for M = 5..8, and software prefetch one tile ahead.
// The many-row kernel (avx512vnni, M > few_rows_max; drawn in
// quant_kernel_avx512vnni.cc): 16 vocabulary rows packed so that one zmm
// holds the same 4 codes of all 16 rows, activations broadcast 4 codes at a
// time, tiles of 16 vocabulary rows x 8 input rows, scales per 32 codes
// (per 16 for Q2_K, Q3_K, Q6_K).
//
// A row's logits are bit-identical for every M on one kernel; the two
// kernels differ by float summation order only.
//
// The packed kernels (avx512vnni: every served type at
// hidden_size a multiple of 256; QuantPackedCovers;
// quant_kernel_avx512packed.cc draws the records): LmHead copies the
// weights once at Create into a layout made for vpdpbusd with 16
// vocabulary rows in the lanes, the file's bytes per row (Q4_K, Q5_K
// 2.3-2.8% more: their scales one byte each; Q3_K 5.5%; Q6_K 1%),
// and runs rows above few_rows_max on it: per 32 codes of 16 vocabulary
// rows and input row, 8 vpdpbusd with the activation codes broadcast,
// accumulator started at -offset * s32 (or s16; exact in int32), then a
// convert, a scale multiply and an fma (one more fma for a min); for Q2_K,
// Q3_K and Q6_K, whose scales are per 16 codes, the two halves' sums are
// combined in int32 with their integer scales (vpmaddwd, or vpmulld for
// Q6_K), converted once and multiplied by da in an fma, and the
// super-block d multiplies once per 256 codes (Q2_K's mins the same way,
// in a second pass over the record); the input rows' sums
// are interleaved (one independent vpdpbusd chain per input row of a tile,
// up to 8), one or two rows' each split in two. The codes of 16 rows are
// made once per 32 codes for up to 8 input rows: an and per 64 bytes, the
// high nibbles and the other bit fields by word shifts, masks and bit
// selects (tiles of one or two input rows on a CPU with GFNI, where LmHead
// measured it faster: gf2p8affineqb; the same codes). The few-row
// kernels above spend 4 instructions per 64 codes and (vocabulary row,
// input row) pair plus the code cuts; these 11-17 (8 of them vpdpbusd) per 512 codes and input
// row plus the cuts once per tile.
//
// The crossover few_rows_max (QuantHeadKernel) depends on how wide the
// core's vector units are, which the feature flags do not tell (AVX-512 at
// full or half rate): LmHead times both kernels on its own weights at
// Create (lm_head.h, "Quantized weights").
#ifndef VOCABD_LIB_HEAD_QUANT_KERNEL_H_
#define VOCABD_LIB_HEAD_QUANT_KERNEL_H_

#include <cstddef>
#include <cstdint>

#include "lib/quant/ggml_blocks.h"

namespace vocabd {

enum class QuantKernelIsa { kScalar, kAvx2, kAvxVnni, kAvx512Vnni };

// "scalar", "avx2", "avxvnni", "avx512vnni".
const char* QuantKernelIsaName(QuantKernelIsa isa);
// True when this CPU (and OS) can run the path.
bool QuantKernelIsaSupported(QuantKernelIsa isa);
// The fastest supported path.
QuantKernelIsa DetectQuantKernelIsa();

// The ggml types the head kernels read. null for any other type.
struct QuantTypeInfo {
  quant::GgmlType type;
  const char* name;       // ggml's name: "Q8_0", "Q4_K", ...
  int block_size;         // values per block (32 or 256)
  int block_bytes;        // bytes per block
};
const QuantTypeInfo* FindQuantTypeInfo(quant::GgmlType type);

// Bytes of one quantized activation row (aq, dal, da, qs16, each
// 64-byte aligned within the row). d must be a multiple of 32.
int64_t QuantActRowBytes(int64_t d);
// Quantizes rows x d floats into `acts` (rows * QuantActRowBytes(d) bytes,
// 64-byte aligned).
void QuantizeActivations(const float* x, int64_t rows, int64_t d, uint8_t* acts);

// Bytes of the per-call unpack buffer the kernel needs (64-byte aligned).
int64_t QuantUnpackScratchBytes(int64_t d);

// The most input rows a path's fused few-row kernel takes.
inline constexpr int64_t kFewRowsLimit = 8;

// True when `isa` has two kernels for (type, d) whose crossover
// few_rows_max chooses: avx512vnni (the few-row kernel, fused where it
// covers the type, vs the many-row one), and avx2 and avxvnni where the
// avx2 fused kernel covers the type (fused vs the path's unpacking
// kernel). Scalar has one.
bool QuantKernelHasCrossover(QuantKernelIsa isa, quant::GgmlType type, int64_t d);

// out[m * ldo + v] for m in [0, rows), v in [v0, v1): logits of the
// quantized activations `acts` (QuantizeActivations) against the weight
// rows `w` of `type` (each d / block_size blocks). `scratch` holds
// QuantUnpackScratchBytes(d) bytes, used by this call only. The path must
// be supported (QuantKernelIsaSupported) and d a multiple of the block.
// few_rows_max in [0, kFewRowsLimit]: rows <= few_rows_max run the path's
// few-row kernel, more rows its other one (QuantKernelHasCrossover; paths
// with one kernel ignore it), except on avx2 with few_rows_max =
// kFewRowsLimit, where more rows run the fused kernel in groups of
// kFewRowsLimit (quant_kernel_avx2.cc, KernelAvx2). LmHead measures it at
// Create. On the avxvnni path the few-row kernel is the avx2 path's fused
// one (where Avx2FusedCovers; else the path's unpacking kernel).
void QuantHeadKernel(QuantKernelIsa isa, const QuantTypeInfo& type, const uint8_t* acts,
                     int64_t rows, const uint8_t* w, int64_t d, int64_t v0, int64_t v1,
                     float* out, int64_t ldo, uint8_t* scratch, int64_t few_rows_max);

// ---- Packed weights (the packed kernel above).
// Vocabulary rows per packed group (the lanes of one zmm).
inline constexpr int64_t kPackedGroupRows = 16;
// True when `isa` has a packed kernel for `type` at hidden size d on this
// CPU (the avx512vnni path, d a multiple of 256, a type with one).
bool QuantPackedCovers(QuantKernelIsa isa, quant::GgmlType type, int64_t d);
// Bytes of the packed copy of `vocab` rows (padded to whole groups of
// kPackedGroupRows; the padding rows are zero).
int64_t QuantPackedBytes(const QuantTypeInfo& type, int64_t vocab, int64_t d);
// Packs groups [g0, g1) of the weight rows `w` (vocab rows, row-major
// blocks) into `packed` (QuantPackedBytes, 64-byte aligned). Groups are
// independent: threads may pack disjoint ranges at once.
void QuantPackGroups(QuantKernelIsa isa, const QuantTypeInfo& type, const uint8_t* w,
                     int64_t vocab, int64_t d, int64_t g0, int64_t g1, uint8_t* packed);
// The most records a packed kernel prefetches ahead (QuantPackedKernel).
inline constexpr int kPackedPrefetchMax = 8;
// Input rows per tile of the packed kernel: a call of more rows runs each
// 16 x 256-code record through several tiles (up to 8, one per 8 input rows
// of a block of 64).
inline constexpr int kPackedTileRows = 8;
// Bytes of the packed kernel's activation panel for `rows` input rows
// (QuantBuildPackedPanel), 64 bytes of alignment slack included.
int64_t QuantPackedPanelBytes(int64_t rows, int64_t d);
// Lays out the quantized rows `acts` (rows x QuantActRowBytes(d),
// QuantizeActivations) as the packed kernel reads them, in `panel`
// (QuantPackedPanelBytes(rows, d) bytes; the panel starts at its first
// 64-byte boundary). Built once per call and read by every thread's
// QuantPackedKernel (quant_kernel_avx512packed.cc draws it: per block of
// up to 64 rows, per record of 256 codes and per tile of up to 8 rows, the
// codes interleaved per 32, then da and the offset and min terms' sums).
// Same path and type as the QuantPackedKernel calls.
void QuantBuildPackedPanel(QuantKernelIsa isa, const QuantTypeInfo& type, const uint8_t* acts,
                           int64_t rows, int64_t d, uint8_t* panel);
// QuantPackedKernel: QuantHeadKernel's contract on packed weights (all
// `vocab` rows packed) and the `rows` input rows of `panel`
// (QuantBuildPackedPanel), no scratch:
// out[m * ldo + v], v in [v0, v1), v0 a multiple of kPackedGroupRows.
// A row's logits do not depend on rows, v0, v1 or prefetch_records.
// prefetch_records in [0, kPackedPrefetchMax] (clamped): before each
// 16 x 256-code record (read once per block of up to 64 input rows),
// prefetch (prefetcht0) the
// record that many records further on; 0 leaves streaming to the
// hardware prefetchers. Which distance streams fastest from memory is a
// property of the core and its memory, not of the instructions (LmHead
// measures it at Create).
// gf_rows_max in [0, kPackedGfRowsMax] (clamped; 0 on a CPU without GFNI,
// QuantCpuHasGfni): tiles of up to that many input rows cut the codes with
// gf2p8affineqb, the others with word shifts and masks (the same codes;
// which is faster depends on which pipes the core runs gf2p8affineqb on, so
// LmHead measures it at Create).
void QuantPackedKernel(QuantKernelIsa isa, const QuantTypeInfo& type, const uint8_t* panel,
                       int64_t rows, const uint8_t* packed, int64_t vocab, int64_t d, int64_t v0,
                       int64_t v1, float* out, int64_t ldo, int prefetch_records,
                       int gf_rows_max);
// The most input rows of a packed tile that may cut its codes with
// gf2p8affineqb (wider tiles share each unit's codes among more rows, so
// the shifts' extra instructions cost less than gf2p8affineqb's pipes).
inline constexpr int kPackedGfRowsMax = 2;
// The CPU has GFNI (gf2p8affineqb): CPUID.(EAX=7,ECX=0):ECX bit 8.
bool QuantCpuHasGfni();

namespace quant_kernel_internal {
// The per-ISA entry points (quant_kernel_<isa>.cc, each compiled for its
// ISA); few_rows_max as for QuantHeadKernel.
using KernelFn = void (*)(const QuantTypeInfo& type, const uint8_t* acts, int64_t rows,
                          const uint8_t* w, int64_t d, int64_t v0, int64_t v1, float* out,
                          int64_t ldo, uint8_t* scratch, int64_t few_rows_max);
void KernelScalar(const QuantTypeInfo&, const uint8_t*, int64_t, const uint8_t*, int64_t, int64_t,
                  int64_t, float*, int64_t, uint8_t*, int64_t);
void KernelAvx2(const QuantTypeInfo&, const uint8_t*, int64_t, const uint8_t*, int64_t, int64_t,
                int64_t, float*, int64_t, uint8_t*, int64_t);
// True when the avx2 path has a fused few-row kernel for `type` at hidden
// size d (a multiple of 256; quant_kernel_avx2.cc).
bool Avx2FusedCovers(quant::GgmlType type, int64_t d);
void KernelAvxVnni(const QuantTypeInfo&, const uint8_t*, int64_t, const uint8_t*, int64_t,
                   int64_t, int64_t, float*, int64_t, uint8_t*, int64_t);
int64_t Avx512GemmScratchBytes(int64_t d);
// QuantizeActivations in plain C++ (every CPU), and the same bits 16 lanes
// at a time (AVX-512 F/BW; QuantizeActivations takes it on avx512vnni CPUs).
void QuantizeActivationsScalar(const float* x, int64_t rows, int64_t d, uint8_t* acts);
void Avx512QuantizeActivations(const float* x, int64_t rows, int64_t d, uint8_t* acts);
void KernelAvx512Vnni(const QuantTypeInfo&, const uint8_t*, int64_t, const uint8_t*, int64_t,
                      int64_t, int64_t, float*, int64_t, uint8_t*, int64_t);
// Bytes of one packed record (16 rows x 256 codes; quant_kernel_avx512packed.cc).
inline constexpr int64_t kPackedRecordBytesQ8_0 = 4352;
inline constexpr int64_t kPackedRecordBytesQ4_K = 2368;
inline constexpr int64_t kPackedRecordBytesQ6_K = 3392;
inline constexpr int64_t kPackedRecordBytesQ4_0 = 2304;
inline constexpr int64_t kPackedRecordBytesQ4_1 = 2560;
inline constexpr int64_t kPackedRecordBytesQ5_0 = 2816;
inline constexpr int64_t kPackedRecordBytesQ5_1 = 3072;
inline constexpr int64_t kPackedRecordBytesIQ4_NL = 2304;
inline constexpr int64_t kPackedRecordBytesQ5_K = 2880;
inline constexpr int64_t kPackedRecordBytesQ2_K = 1344;
inline constexpr int64_t kPackedRecordBytesQ3_K = 1856;
void Avx512PackGroups(const QuantTypeInfo& type, const uint8_t* w, int64_t vocab, int64_t d,
                      int64_t g0, int64_t g1, uint8_t* packed);
void Avx512BuildPanels(const QuantTypeInfo& type, const uint8_t* acts, int64_t rows, int64_t d,
                       uint8_t* panel);
// gf_rows_max (0..kPackedGfRowsMax; > 0 only on a CPU with GFNI): tiles of
// up to that many input rows cut the codes with gf2p8affineqb (the same
// codes).
void Avx512PackedKernel(const QuantTypeInfo& type, const uint8_t* panel, int64_t rows,
                        const uint8_t* packed, int64_t d, int64_t v0, int64_t v1, float* out,
                        int64_t ldo, int prefetch_records, int gf_rows_max);
}  // namespace quant_kernel_internal

}  // namespace vocabd

#endif  // VOCABD_LIB_HEAD_QUANT_KERNEL_H_
