// The LM head GEMM: logits = hidden x W^T with oneDNN matmul.
//
//   hidden  [M, hidden_size]          F32, row-major (M = rows, runtime)
//   W       [vocab_size, hidden_size] F32 or BF16, row-major (embedding layout;
//           viewed by oneDNN as weights [K=hidden_size, N=vocab_size] with
//           strides {1, hidden_size}, i.e. format "ba", no copy)
//   logits  [M, vocab_size]           F32, row-major
//
// BF16 weights: oneDNN matmul with bf16 src and weights, f32 accumulation and
// f32 dst. The F32 hidden rows are rounded to bf16 (nearest even) per call, so
// each product carries both roundings; the measured error bound vs float64 is
// documented in docs/models.md ("BF16 weights and the numerical contract") and
// asserted by tests/lib/head/lm_head_contract_test.cc and
// lm_head_kernel_test.cc. Only offered where the CPU has native bf16 dot
// products (AVX512-BF16 or AMX; see Bf16Supported()); elsewhere Create returns
// FAILED_PRECONDITION so the caller can fall back to F32.
//
// Primitives use scratchpad_mode::user, so any thread may call Compute
// concurrently: each call creates its own memory objects for the actual M,
// its own stream, and uses a per-thread scratchpad buffer. oneDNN 2.6 picks
// its fast brgemm matmul (brg:avx512_core, brg:avx512_core_amx) only for a
// known M; with M = DNNL_RUNTIME_DIM_VAL it falls back to gemm:jit, which on
// this weights layout is 1.2-1.6x slower (Llama-3 head, 2 cores: M = 64
// 484 -> 292 ms, M = 256 1133 -> 907 ms). So each M up to kFixedRowsMax gets
// its own primitive, built on first use (~0.1 ms; oneDNN shares the JIT
// kernels) and kept; larger calls run in chunks of kFixedRowsMax rows. The
// runtime-M primitive, built at Create, serves any M oneDNN cannot build a
// fixed primitive for.
//
// vocabd's own kernels for small M (lib/head/lm_head_kernel.h). oneDNN 2.6's
// M = 1 and small-M kernels on this transposed weights layout run far below
// memory bandwidth (docs/performance.md, "Head kernels (head_bench)"), so
// Compute with rows <= small_rows_max() runs vocabd's kernels instead: one
// pass over the weights, the vocabulary split in chunks over the OpenMP
// threads (lib/core/parallel.h).
//   F32:  AVX-512 FMA register tiles (AVX512F), up to kDefaultSmallRowsMax.
//   BF16: AMX tiles (AMX-BF16, hidden_size % 32 == 0, tile state granted by
//         Linux) up to kDefaultAmxRowsMax; else vdpbf16ps register tiles
//         (AVX512_BF16) up to kDefaultSmallRowsMax. Hidden rows are rounded
//         to bf16 (nearest even) exactly as for oneDNN.
//   The FMA and vdpbf16ps tiles run on a packed copy made at Create
//   (Options::dense_pack, on by default: 16 vocabulary rows per vector, one
//   weight load per input rows' broadcast values), or on W row-major.
// Chosen at Create from the CPU's features: without AVX-512 (AVX512_BF16 for
// BF16 weights) every M uses oneDNN, as does every M above the crossover.
// The environment variable VOCABD_LM_HEAD_KERNEL overrides the choice for
// heads created while it is set: "onednn" (oneDNN for every M), "no-amx"
// (vdpbf16ps instead of AMX), "auto" (the default); "scalar", "avx2",
// "avxvnni", "avx512vnni" force that path of the quantized-weights kernel
// (quantized heads only; F32/BF16 heads treat them as "auto"); any other
// value makes Create fail (INVALID_ARGUMENT). Both paths meet the same numerical
// contract; they sum in different orders, so a row's logits may differ
// between them by float rounding (<= 2e-6 of the row's largest |logit| in
// tests/lib/head/lm_head_kernel_test.cc), and on one path a row's logits do not
// depend on M.
//
// Threading: Debian's libdnnl is built on OpenMP (libgomp). Each Compute call
// runs an OpenMP parallel region of omp_get_max_threads() threads (all cores
// unless OMP_NUM_THREADS says otherwise; 2 on the 2-core CI box). Concurrent
// Compute calls each start their own OpenMP team, which oversubscribes the
// cores; that is why the server funnels LM-head work through the dynamic
// batcher / ComputePool (few large GEMMs instead of many small concurrent
// ones). Results do not depend on which thread runs a call.
#ifndef VOCABD_LIB_HEAD_LM_HEAD_H_
#define VOCABD_LIB_HEAD_LM_HEAD_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "lib/core/dtype.h"
#include "lib/core/huge_pages.h"
#include "lib/quant/ggml_blocks.h"

namespace vocabd {

class LmHead {
 public:
  struct Options {
    // [vocab_size, hidden_size] row-major, of weights_dtype (float or
    // uint16_t bf16 bits); not owned, never written, must outlive the LmHead
    // (for a tied head this is the embedding table itself, so the model
    // holds one copy). Read on every Compute, so changes to the table are
    // seen by later calls (until SwitchWeights names a copy), except by
    // calls that run on a packed copy made at Create (dense_pack,
    // quant_pack).
    const void* weights = nullptr;
    int64_t vocab_size = 0;
    int64_t hidden_size = 0;
    // kF32 or kBF16 (last, so {weights, vocab, hidden} still means F32).
    DType weights_dtype = DType::kF32;
    // Rows up to which Compute uses vocabd's own kernel (when the CPU has
    // it): -1 = the default (kDefaultSmallRowsMax, or kDefaultAmxRowsMax
    // for the AMX kernel), 0 = never (oneDNN for every M).
    int64_t small_rows_max = -1;
    // BF16 weights: run vocabd's kernel on AMX tiles where the CPU and OS
    // allow it and hidden_size % 32 == 0 (false: the AVX512_BF16 kernel).
    bool allow_amx = true;
    // Set: `weights` are ggml-quantized rows read in place (quant_kernel.h):
    // vocab_size rows of hidden_size / block_size blocks of this type
    // (lib/quant/ggml_blocks.h), weights_dtype is ignored.
    std::optional<quant::GgmlType> weights_quant;
    // Quantized weights on a path with two kernels (QuantKernelHasCrossover):
    // the most input rows the few-row (fused) kernel takes, 0..kFewRowsLimit
    // (8); -1 = measured at Create (below). The environment variable
    // VOCABD_QUANT_FEW_ROWS_MAX = 0..8 overrides -1 for operators.
    int64_t quant_few_rows_max = -1;
    // Quantized weights where the path has a packed kernel for the type
    // (QuantPackedCovers: avx512vnni, every served type,
    // hidden_size a multiple of 256): copy the weights at Create into the
    // packed layout (quant_kernel.h; the bytes of weight_bytes() up to 5.5%
    // more, padded to 16 rows, held by
    // the LmHead in 2 MiB-aligned memory advised for huge pages) and run
    // rows above quant_few_rows_max on the packed kernel; rows up to it
    // still read the weights in place (the few-row kernel), so `weights`
    // must stay mapped either way. false: the in-place kernels only. The
    // environment variable VOCABD_QUANT_PACK = 0 | 1 overrides it for
    // operators; another value makes Create fail (INVALID_ARGUMENT).
    bool quant_pack = true;
    // Packed heads: how many 16 x 256-code records ahead the packed kernel
    // prefetches (QuantPackedKernel), 0..kPackedPrefetchMax (8), in every
    // call; -1 = measured at Create (below), once for calls of up to
    // kPackedTileRows input rows and once for more. The environment
    // variable VOCABD_QUANT_PREFETCH = 0..8 overrides -1 for operators.
    int quant_prefetch_records = -1;
    // Packed heads on a CPU with GFNI: tiles of up to this many input rows
    // cut their codes with gf2p8affineqb, wider ones with word shifts and
    // masks (quant_kernel.h; the same codes, so the same logits), 0..2
    // (kPackedGfRowsMax); -1 = measured at Create (below). Without GFNI it
    // is 0. The environment variable VOCABD_QUANT_GF_ROWS = 0..2 overrides
    // -1 for operators.
    int quant_gf_rows_max = -1;
    // F32 weights on vocabd's kernel (rows <= small_rows_max): for rows <= 6
    // (one row group) prefetch the next tile of weight rows into L2 while
    // the current one runs (1) or leave streaming to the hardware
    // prefetchers (0) (HeadKernelF32); -1 = measured at Create (below).
    // VOCABD_F32_PREFETCH = 0 | 1 overrides -1 for operators. Heads with a
    // packed copy (dense_pack) do not use it.
    int f32_prefetch = -1;
    // F32 / BF16 weights on vocabd's AVX-512 kernels (small_rows_max != 0,
    // not the AMX one; BF16 needs an even hidden_size): read a copy of the
    // weights in the packed layout of lm_head_kernel.h (blocks of 16
    // vocabulary rows, weight_bytes() plus 64 bytes per block and the zero
    // rows that fill the last block:
    // dense_pack_bytes(), in 2 MiB-aligned memory advised for huge pages)
    // and run every M on it: each 64-byte load of weights serves every input
    // row, so 8 rows cost little more than one, and many rows run near the
    // FMA peak, as fast as oneDNN's brgemm (docs/performance.md). Logits
    // differ from the row-major kernel's and oneDNN's in summation order
    // only. The copy is made at Create (packed_bytes()), or with
    // dense_pack_deferred by the owner (PackDenseBlocks, SwitchToPacked)
    // while the row-major kernel and oneDNN serve. false: the row-major
    // kernel up to small_rows_max and oneDNN above, on `weights`. The
    // environment variable VOCABD_DENSE_PACK = 0 | 1 overrides it for
    // operators; another value makes Create fail (INVALID_ARGUMENT).
    bool dense_pack = true;
    // With dense_pack: Create does not pack; the owner fills a buffer of
    // dense_pack_bytes() (PackDenseBlocks; e.g. piece by piece on a
    // background thread, as Model does) and hands it over with
    // SwitchToPacked.
    bool dense_pack_deferred = false;
  };
  // The measured crossovers against oneDNN's fixed-M primitives, per CPU
  // feature set (DefaultSmallRowsMax) (bench/head_bench --paths, Llama-3
  // head, 2 cores; docs/performance.md, "Crossovers per CPU feature set"):
  // above them oneDNN is faster. F32 kernel vs
  // brg:avx512_core: 1.15x at 12 rows, 1.02x at 16, 0.88x at 24. AMX kernel
  // vs brg:avx512_core_amx: 1.11x at 224, 0.88x at 256. The vdpbf16ps kernel
  // (no AMX) uses the F32 bound (1.11x at 8 rows, 0.77x at 16 against
  // oneDNN on AMX; measured only on an AMX machine).
  static constexpr int64_t kDefaultSmallRowsMax = 16;
  static constexpr int64_t kDefaultAmxRowsMax = 224;
  // The same measurement on a CPU with AVX512_BF16 and no AMX (2-core AMD
  // Zen 5 VM, heavily loaded; docs/performance.md, "Crossovers per CPU
  // feature set"): F32 kernel vs brg:avx512_core 0.89x at 8 rows, 0.81x at
  // 16; the vdpbf16ps kernel vs brg:avx512_core_bf16 1.20x at 8, 0.94x at 16.
  static constexpr int64_t kDefaultF32NoAmxRowsMax = 8;
  static constexpr int64_t kDefaultBf16NoAmxRowsMax = 12;
  // The crossover for this CPU's feature set (what small_rows_max = -1
  // means): AMX (BF16 on tiles) kDefaultAmxRowsMax; AVX512_BF16 without
  // AMX the two NoAmx values; AVX-512 without BF16 kDefaultSmallRowsMax
  // (its F32 kernel and oneDNN's brg:avx512_core are the same instructions
  // as on the AMX machine, where it was measured); no AVX-512 0 (oneDNN).
  static int64_t DefaultSmallRowsMax(DType weights_dtype, bool amx);
  // Most rows in one oneDNN call (larger M runs in chunks of this many).
  static constexpr int64_t kFixedRowsMax = 256;
  // INVALID_ARGUMENT for null weights, non-positive sizes, a weights_dtype
  // other than F32/BF16, f32_prefetch outside [-1, 1], VOCABD_F32_PREFETCH
  // or VOCABD_DENSE_PACK other than 0 or 1; FAILED_PRECONDITION for BF16
  // when !Bf16Supported(); RESOURCE_EXHAUSTED when the packed copy
  // (dense_pack) cannot be allocated;
  // INTERNAL when oneDNN cannot create the primitive (its message included).
  // F32 heads on vocabd's kernel measure Options::f32_prefetch at Create
  // (when -1 and the variable is unset): one row through the kernel on up
  // to 64 MiB of the head's rows, all threads, without and with, 3
  // interleaved rounds after an untimed pass; on only when faster. Once
  // per process per (hidden_size, rows measured); implementation() shows
  // the choice and both times.
  //
  // Quantized weights (weights_quant set): INVALID_ARGUMENT for a type the
  // kernels do not read (naming the ggml type id) and for hidden_size not a
  // positive multiple of the type's block size (naming the type and the
  // rule); FAILED_PRECONDITION when VOCABD_LM_HEAD_KERNEL forces a path
  // the CPU lacks. weights_dtype and allow_amx are ignored; every M runs
  // vocabd's kernel (lib/head/quant_kernel.h), small_rows_max() is
  // INT64_MAX. The path is chosen from the CPU's features (avx512vnni >
  // avxvnni > avx2 > scalar); VOCABD_LM_HEAD_KERNEL = scalar | avx2 |
  // avxvnni | avx512vnni forces one (tests use it to run every path).
  // Where the path has two kernels (avx512vnni: few-row vs many-row; avx2
  // and avxvnni: the avx2 fused kernel vs the path's unpacking kernel, for
  // the types it fuses), which M runs which is not
  // told by the CPU's features (AVX-512 at full or half rate, the width of
  // the load and shuffle ports), so Create measures it: on the head's own
  // first rows (up to 1 MiB of weights, fixed pseudo-random hidden rows, one
  // thread, best of 3), M = 8, 7, ... 1 until the few-row kernel is faster;
  // few_rows_max = that M (0 if none). Once per process per (path, type,
  // hidden_size), a few ms; implementation() shows both times. On avx2,
  // few_rows_max = 8 also sends larger M through the fused kernel, in groups
  // of 8 (quant_kernel.h, QuantHeadKernel).
  // A packed head (Options::quant_pack) has the in-place few-row kernel and
  // the packed one; both read the same bytes, so at few rows which is
  // faster depends on how each overlaps its instructions with memory:
  // Create times them as Compute runs them (all threads, ~1 MiB tasks, each
  // thread streaming its own contiguous share: ParallelForStreams) on up
  // to 64 MiB of the head's rows, back to back in 3 rounds, M = 1, 2, ...
  // while the in-place kernel is faster in every round (few_rows_max = the
  // last such M, 0 if none; tens of ms; implementation() shows each
  // kernel's best round). Before that, Create measures the packed kernel's prefetch
  // distance (Options::quant_prefetch_records): on the same rows, one input
  // row at 0, 1, 2 and 4 records ahead, 3 interleaved rounds, the fastest
  // wins; then the same with 2 x kPackedTileRows input rows, for calls of
  // more than kPackedTileRows rows (each record serves several tiles; the
  // best distance differs: on a 2-vCPU Zen 5 VM one Q8_0 row ran fastest
  // without prefetch while 16 rows took 1.5-2.0x as long without it as
  // with 4 records, Q4_K 2.1x). Whether and how far software prefetch helps
  // depends on the core's hardware prefetchers and the memory (on that VM:
  // one row of a Q4_K head 1.2-1.6x faster with it, Q8_0 unchanged), so it
  // is measured, not set per CPU. First of all, on a CPU with GFNI, Create
  // measures which tiles cut their codes with gf2p8affineqb
  // (Options::quant_gf_rows_max): one, then two input rows through the
  // packed kernel as Compute runs it on the head's first 8 MiB of records
  // (held in L3 after an untimed pass: the two ways differ only in
  // instructions), both ways, 3 interleaved rounds of best-of-5; gf2p8affineqb
  // for M = 1 .. m while strictly faster (whether it is depends on the pipes
  // the core runs it on; a few ms). Packing itself is one pass over the weights (a Llama-3 Q8_0 head,
  // 558 MB: about 0.6 s on 2 cores of a VM, most of it the first touch of
  // the new memory).
  // RESOURCE_EXHAUSTED when the packed copy cannot be allocated.
  // INVALID_ARGUMENT for quant_few_rows_max or VOCABD_QUANT_FEW_ROWS_MAX
  // outside [-1, 8] / [0, 8], quant_prefetch_records or
  // VOCABD_QUANT_PREFETCH outside [-1, 8] / [0, 8], quant_gf_rows_max or
  // VOCABD_QUANT_GF_ROWS outside [-1, 2] / [0, 2], and for
  // VOCABD_QUANT_PACK other than 0 or 1.
  static absl::StatusOr<std::unique_ptr<LmHead>> Create(const Options& options);
  ~LmHead();
  LmHead(const LmHead&) = delete;
  LmHead& operator=(const LmHead&) = delete;

  // logits[M, vocab_size] = hidden[M, hidden_size] x W^T, M = rows.
  // Thread-safe. INVALID_ARGUMENT for rows < 0 or null pointers with
  // rows > 0; rows == 0 is a no-op. oneDNN errors are returned as INTERNAL,
  // allocation failure as RESOURCE_EXHAUSTED; nothing is thrown.
  absl::Status Compute(const float* hidden, int64_t rows, float* logits) const;

  // True when oneDNN's effective ISA has native bf16 dot products
  // (avx512_core_bf16 or avx512_core_amx). Honours ONEDNN_MAX_CPU_ISA /
  // DNNL_MAX_CPU_ISA, so `DNNL_MAX_CPU_ISA=AVX512_CORE` shows the fallback.
  static bool Bf16Supported();

  DType weights_dtype() const;
  // The ggml type of quantized weights (Options::weights_quant), if any.
  std::optional<quant::GgmlType> weights_quant() const;
  // Bytes of the weight matrix (vocab_size * hidden_size * element size;
  // quantized: vocab_size * blocks per row * block bytes).
  int64_t weight_bytes() const;
  // Bytes of the packed copy the head made at Create (Options::quant_pack,
  // or Options::dense_pack without dense_pack_deferred); 0 otherwise. A
  // copy given by SwitchToPacked is not counted (it replaces its owner's
  // copy of the table; dense_pack_bytes() gives its size).
  int64_t packed_bytes() const;
  // The [vocab_size, hidden_size] weights Compute reads now: Options::weights,
  // or the copy of the last SwitchWeights.
  const void* weights() const;
  // F32 / BF16 heads: read `copy` from the next Compute call on; the head
  // keeps it alive from then on. It must hold the same bytes as the current
  // weights (Model's copy in huge pages: Model::Options::head_huge_pages), so
  // no result changes. Calls already running finish on the old weights,
  // Options::weights, which must outlive the LmHead as before. Thread-safe;
  // once per head. INVALID_ARGUMENT for a null or wrongly sized copy,
  // FAILED_PRECONDITION for a quantized head or a second call.
  absl::Status SwitchWeights(std::shared_ptr<const HugePageBuffer> copy) const;
  // F32 / BF16 heads that read a packed copy (Options::dense_pack and the
  // kernel can): its size in bytes, whether made yet or not (a deferred
  // copy exists once the owner calls SwitchToPacked); 0 otherwise.
  int64_t dense_pack_bytes() const;
  // Fills blocks [b0, b1) (vocabulary rows [16 b0, 16 b1)) of a packed copy
  // from `weights` (the [vocab_size, hidden_size] table); any thread, any
  // order of disjoint ranges. Needs dense_pack_bytes() > 0.
  void PackDenseBlocks(const void* weights, int64_t b0, int64_t b1, void* packed) const;
  // Reads `packed` (dense_pack_bytes(), filled by PackDenseBlocks) for
  // every M from the next Compute call on; the head keeps it alive. Calls
  // already running finish as they started. Thread-safe; once per head
  // (none after a copy made at Create). FAILED_PRECONDITION when
  // dense_pack_bytes() is 0 or the head has a packed copy,
  // INVALID_ARGUMENT for a null or wrongly sized buffer.
  absl::Status SwitchToPacked(std::shared_ptr<const HugePageBuffer> packed) const;
  // Packed heads: the records the packed kernel prefetches ahead in calls
  // of up to kPackedTileRows input rows, and of more (measured or set;
  // Options::quant_prefetch_records); -1 when the head is not packed.
  int quant_prefetch_records() const;
  int quant_prefetch_records_many() const;
  // Packed heads: tiles of up to this many input rows cut their codes with
  // gf2p8affineqb (measured or set; Options::quant_gf_rows_max); -1 when
  // the head is not packed.
  int quant_gf_rows_max() const;
  int64_t vocab_size() const;
  int64_t hidden_size() const;
  // Largest M that uses the small-M kernel (0: none, oneDNN for every M).
  int64_t small_rows_max() const;
  // Quantized heads: the most rows the few-row kernel takes (measured or
  // set; Options::quant_few_rows_max); -1 when the path has one kernel.
  int64_t quant_few_rows_max() const;
  // The kernels in use, for logs and diagnostics: oneDNN's implementation
  // name for the fixed-M primitives (e.g. "brg:avx512_core (fixed M <=
  // 256)", or the runtime-M one's, e.g. "gemm:jit", where oneDNN cannot
  // build fixed-M ones), preceded by the small-M kernel when there is one,
  // e.g. "vocabd:avx512 (rows <= 16); brg:avx512_core (fixed M <= 256)".
  // Quantized heads: the type, path and crossover, e.g. "vocabd:q8_0-avx2
  // (every M; few-row kernel for rows <= 8, measured on 240 weight rows: M
  // = 8 few-row 0.307 ms, other 0.458 ms)" (no "measured" part when set);
  // packed: "vocabd:q6_k-avx512vnni (every M; weights packed at Create,
  // 435044352 bytes; in-place few-row kernel for rows <= 1, measured on
  // 19972 weight rows: M = 2 few-row 1.531 ms, packed 1.477 ms)".
  std::string implementation() const;

 private:
  struct Impl;
  explicit LmHead(std::unique_ptr<Impl> impl);
  // The packed F32 / BF16 kernels on the packed copy (Options::dense_pack), every M.
  absl::Status ComputeDensePacked(const float* hidden, int64_t rows, const void* packed,
                                  float* logits) const;
  // The small-M kernel path of Compute (rows <= small_rows_max()).
  absl::Status ComputeSmall(const float* hidden, int64_t rows, float* logits) const;
  static absl::StatusOr<std::unique_ptr<LmHead>> CreateQuantized(const Options& options);
  // Quantized weights: activations quantized, the vocabulary split over threads.
  absl::Status ComputeQuantized(const float* hidden, int64_t rows, float* logits) const;
  // One oneDNN matmul over rows <= kFixedRowsMax rows (fixed-M primitive).
  absl::Status ComputeOneDnn(const float* hidden, int64_t rows, float* logits) const;
  std::unique_ptr<Impl> impl_;
};

}  // namespace vocabd

#endif  // VOCABD_LIB_HEAD_LM_HEAD_H_
