#include "lib/head/lm_head.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <tuple>
#include <vector>
#include <initializer_list>
#include <limits>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <unordered_map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "lib/head/lm_head_kernel.h"
#include "lib/head/quant_kernel.h"
#include "lib/core/env_override.h"
#include "lib/core/huge_pages.h"
#include "lib/core/parallel.h"
#include "lib/core/status_macros.h"
#include "oneapi/dnnl/dnnl.hpp"

namespace vocabd {
namespace {

using dnnl::memory;

// A per-thread, growable, 64-byte-aligned scratchpad buffer. oneDNN's user
// scratchpad must not be shared by concurrent executions; one buffer per
// thread satisfies that because Compute is synchronous.
class ScratchBuffer {
 public:
  ~ScratchBuffer() { std::free(data_); }
  // nullptr on allocation failure.
  void* Get(size_t size) {
    if (size <= capacity_) return data_;
    const size_t rounded = (size + kAlign - 1) / kAlign * kAlign;
    void* fresh = std::aligned_alloc(kAlign, rounded);
    if (fresh == nullptr) return nullptr;
    std::free(data_);
    data_ = fresh;
    capacity_ = rounded;
    return data_;
  }

 private:
  static constexpr size_t kAlign = 64;
  void* data_ = nullptr;
  size_t capacity_ = 0;
};

ScratchBuffer& ThreadScratch() {
  thread_local ScratchBuffer buffer;
  return buffer;
}

// Per-thread buffer for the bf16 copy of the hidden rows.
ScratchBuffer& ThreadBf16Src() {
  thread_local ScratchBuffer buffer;
  return buffer;
}

// Per-thread buffers of the quantized path: the quantized activation rows
// (one per Compute call) and each worker's unpacked weight rows.
ScratchBuffer& ThreadQuantActs() {
  thread_local ScratchBuffer buffer;
  return buffer;
}
ScratchBuffer& ThreadQuantUnpack() {
  thread_local ScratchBuffer buffer;
  return buffer;
}
// The packed kernel's activation panel of a call (QuantBuildPackedPanel),
// built by the calling thread and read by every thread of the call.
ScratchBuffer& ThreadPackedPanel() {
  thread_local ScratchBuffer buffer;
  return buffer;
}

// Per-thread buffer of the packed F32 / BF16 kernel's accumulators
// (PackedAccFloats).
ScratchBuffer& ThreadPackedAcc() {
  thread_local ScratchBuffer buffer;
  return buffer;
}

// Per-thread buffer for the hidden rows packed as AMX B tiles.
ScratchBuffer& ThreadAmxPacked() {
  thread_local ScratchBuffer buffer;
  return buffer;
}

// The hidden rows rounded to bf16 (nearest even) in this thread's buffer:
// both paths feed BF16 weights bf16 rows.
absl::StatusOr<const uint16_t*> Bf16Rows(const float* hidden, int64_t count) {
  const size_t n = static_cast<size_t>(count);
  void* converted = ThreadBf16Src().Get(n * sizeof(uint16_t));
  if (converted == nullptr) {
    return absl::ResourceExhaustedError(
        absl::StrCat("LmHead: cannot allocate ", n * 2, " bytes for bf16 rows"));
  }
  ConvertFromF32(hidden, n, DType::kBF16, converted);
  return static_cast<const uint16_t*>(converted);
}

// Fills blocks [b0, b1) of an F32 / BF16 head's packed copy.
void PackDense(DType dtype, const void* w, int64_t vocab, int64_t d, int64_t b0, int64_t b1,
               void* packed) {
  if (dtype == DType::kBF16) {
    PackBf16Blocks(static_cast<const uint16_t*>(w), vocab, d, b0, b1,
                   static_cast<uint16_t*>(packed));
  } else {
    PackF32Blocks(static_cast<const float*>(w), vocab, d, b0, b1, static_cast<float*>(packed));
  }
}

memory::data_type DnnlType(DType dtype) {
  return dtype == DType::kBF16 ? memory::data_type::bf16 : memory::data_type::f32;
}

absl::Status DnnlError(const char* what, const dnnl::error& e) {
  return absl::InternalError(
      absl::StrCat("oneDNN ", what, " failed: ", e.what(), " (dnnl_status ",
                   static_cast<int>(e.status), ")"));
}

// Vocabulary rows per ParallelForStreams task of the small-M kernel: about
// 2 MiB of weights; each thread streams its own contiguous share of the
// tasks, and a 2.1 GB head still has ~1000 tasks for stealing to balance.
int64_t KernelChunkRows(int64_t hidden_size, DType dtype) {
  // A multiple of 32 rows, so that only the last task can end in a partial
  // AMX block.
  constexpr int64_t kChunkBytes = int64_t{2} << 20;
  const int64_t row_bytes = hidden_size * static_cast<int64_t>(DTypeSize(dtype));
  const int64_t rows = kChunkBytes / std::max<int64_t>(row_bytes, 1);
  return std::max<int64_t>(32, rows / 32 * 32);
}

}  // namespace

// One oneDNN matmul primitive built for a fixed M (see lm_head.h).
struct FixedMatmul {
  dnnl::matmul::primitive_desc pd;
  dnnl::matmul matmul;
  memory::desc scratchpad_md;
};

// oneDNN's primitive cache hands a primitive built on one thread to another
// thread that builds the same descriptor (two heads of one shape, or two
// calls for one M). It synchronises through libstdc++ futures (futex waits),
// which ThreadSanitizer cannot see, and nothing else orders those threads.
// Every oneDNN primitive vocabd builds is built under this one lock, so the
// order is a std::mutex's. Building happens at Create and once per M.
static std::mutex& DnnlBuildMutex() {
  static std::mutex* const mu = new std::mutex;
  return *mu;
}

struct LmHead::Impl {
  Options options;
  // The weights Compute reads: options.weights, or the copy SwitchWeights
  // gave (same bytes). Loaded (acquire) once per kernel pass or oneDNN call.
  std::atomic<const void*> weights{nullptr};
  // SwitchWeights' copy, kept alive with the head; set once, under copy_mu.
  std::mutex copy_mu;
  std::shared_ptr<const HugePageBuffer> copy;
  int64_t small_rows_max = 0;  // effective: 0 when the CPU lacks the kernel
  HeadKernelIsa kernel_isa = HeadKernelIsa::kNone;
  bool amx = false;  // BF16 kernel on AMX tiles
  int64_t chunk_rows = 0;
  // F32 kernel: prefetch for one row group (HeadKernelF32), and how that
  // was measured (empty: set).
  bool f32_prefetch = false;
  std::string f32_prefetch_how;
  // F32 / BF16: bytes of the packed copy (lm_head_kernel.h layout) when
  // this head reads one (Options::dense_pack and the kernel can), else 0.
  int64_t dense_pack_bytes = 0;
  // The packed copy Compute reads for every M, null until there is one:
  // made at Create, or given by SwitchToPacked (kept alive in dense_copy,
  // set once under copy_mu). Loaded (acquire) once per call.
  std::atomic<const void*> dense_packed{nullptr};
  std::shared_ptr<const HugePageBuffer> dense_copy;
  // Quantized weights (options.weights_quant set): the type and the path.
  const QuantTypeInfo* quant = nullptr;
  QuantKernelIsa quant_isa = QuantKernelIsa::kScalar;
  int64_t quant_few_rows_max = -1;  // -1: the path has one kernel
  std::string quant_crossover;      // how it was measured (empty: set)
  // The packed copy of the weights (QuantPackedCovers and options.quant_pack;
  // QuantPackedBytes, 64-byte aligned), null when the head reads them in place.
  HugePageBuffer packed;
  int64_t packed_bytes = 0;
  // Records the packed kernel prefetches ahead (QuantPackedKernel), and how
  // that was measured (empty: set).
  int quant_prefetch = 0;
  std::string quant_prefetch_how;
  // The same for calls of more than kPackedTileRows input rows.
  int quant_prefetch_many = 0;
  std::string quant_prefetch_many_how;
  // Tiles of up to this many input rows cut their codes with gf2p8affineqb
  // (QuantPackedKernel), and how that was measured (empty: set).
  int quant_gf_rows_max = 0;
  std::string quant_gf_how;
  dnnl::engine engine;
  memory::desc weights_md;
  memory::desc scratchpad_md;
  dnnl::matmul::primitive_desc pd;
  dnnl::matmul matmul;
  // Fixed-M primitives by M (<= kFixedRowsMax), built on first use. A null
  // entry: oneDNN could not build one for that M; the runtime-M primitive
  // serves it.
  mutable std::mutex fixed_mu;
  mutable std::unordered_map<int64_t, std::shared_ptr<const FixedMatmul>> fixed;

  // hidden [m, hidden_size] (the weights' dtype) and logits [m, vocab_size]
  // F32, row-major; m may be DNNL_RUNTIME_DIM_VAL.
  memory::desc SrcDesc(memory::dim m) const {
    return memory::desc({m, options.hidden_size}, DnnlType(options.weights_dtype),
                        memory::format_tag::ab);
  }
  memory::desc DstDesc(memory::dim m) const {
    return memory::desc({m, options.vocab_size}, memory::data_type::f32, memory::format_tag::ab);
  }
  // With the weights operand [K, N], strides {1, K}.
  dnnl::matmul::desc MatmulDesc(memory::dim m) const {
    return dnnl::matmul::desc(SrcDesc(m), weights_md, DstDesc(m));
  }

  // The fixed-M primitive for m rows, or null (use the runtime-M one).
  // Never throws. Built outside fixed_mu (oneDNN JIT-compiles it), under
  // DnnlBuildMutex; if two threads build the same M, the first stored wins.
  // A primitive oneDNN refuses is remembered as null; an allocation failure
  // is not remembered (the next call tries again).
  std::shared_ptr<const FixedMatmul> FixedFor(int64_t m) const {
    {
      std::lock_guard<std::mutex> lock(fixed_mu);
      auto it = fixed.find(m);
      if (it != fixed.end()) return it->second;
    }
    std::shared_ptr<const FixedMatmul> made;
    std::unique_lock<std::mutex> build_lock(DnnlBuildMutex());
    try {
      dnnl::primitive_attr attr;
      attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
      auto f = std::make_shared<FixedMatmul>();
      f->pd = dnnl::matmul::primitive_desc(MatmulDesc(m), attr, engine);
      f->scratchpad_md = f->pd.scratchpad_desc();
      f->matmul = dnnl::matmul(f->pd);
      made = std::move(f);
    } catch (const dnnl::error&) {
      // Served by the runtime-M primitive; remembered so we do not retry.
    } catch (const std::bad_alloc&) {
      return nullptr;
    }
    build_lock.unlock();
    try {
      std::lock_guard<std::mutex> lock(fixed_mu);
      return fixed.emplace(m, std::move(made)).first->second;
    } catch (const std::bad_alloc&) {
      return nullptr;
    }
  }
};

LmHead::LmHead(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
LmHead::~LmHead() = default;

bool LmHead::Bf16Supported() {
  const dnnl::cpu_isa isa = dnnl::get_effective_cpu_isa();
  return isa == dnnl::cpu_isa::avx512_core_bf16 || isa == dnnl::cpu_isa::avx512_core_amx;
}

DType LmHead::weights_dtype() const { return impl_->options.weights_dtype; }
int64_t LmHead::weight_bytes() const {
  if (impl_->quant != nullptr) {
    return impl_->options.vocab_size * (impl_->options.hidden_size / impl_->quant->block_size) *
           impl_->quant->block_bytes;
  }
  return impl_->options.vocab_size * impl_->options.hidden_size *
         static_cast<int64_t>(DTypeSize(impl_->options.weights_dtype));
}
int64_t LmHead::packed_bytes() const { return impl_->packed_bytes; }  // 0 unless packed

const void* LmHead::weights() const { return impl_->weights.load(std::memory_order_acquire); }

absl::Status LmHead::SwitchWeights(std::shared_ptr<const HugePageBuffer> copy) const {
  if (impl_->options.weights_quant.has_value()) {
    return absl::FailedPreconditionError(
        "LmHead: SwitchWeights is for F32 / BF16 heads (a quantized head reads its packed copy "
        "or the weights it was created on)");
  }
  const size_t want = static_cast<size_t>(weight_bytes());
  if (copy == nullptr || copy->data() == nullptr || copy->size() != want) {
    return absl::InvalidArgumentError(absl::StrCat(
        "LmHead: SwitchWeights needs a copy of the ", want, "-byte weights, got ",
        copy == nullptr ? size_t{0} : copy->size(), " bytes"));
  }
  std::lock_guard<std::mutex> lock(impl_->copy_mu);
  if (impl_->copy != nullptr) {
    return absl::FailedPreconditionError("LmHead: SwitchWeights was already called");
  }
  impl_->copy = std::move(copy);
  impl_->weights.store(impl_->copy->data(), std::memory_order_release);
  return absl::OkStatus();
}
int64_t LmHead::dense_pack_bytes() const { return impl_->dense_pack_bytes; }

void LmHead::PackDenseBlocks(const void* weights, int64_t b0, int64_t b1, void* packed) const {
  const Options& o = impl_->options;
  PackDense(o.weights_dtype, weights, o.vocab_size, o.hidden_size, b0, b1, packed);
}

absl::Status LmHead::SwitchToPacked(std::shared_ptr<const HugePageBuffer> packed) const {
  if (impl_->dense_pack_bytes == 0) {
    return absl::FailedPreconditionError(
        "LmHead: SwitchToPacked is for F32 / BF16 heads that read a packed copy "
        "(dense_pack_bytes() is 0)");
  }
  const size_t want = static_cast<size_t>(impl_->dense_pack_bytes);
  if (packed == nullptr || packed->data() == nullptr || packed->size() != want) {
    return absl::InvalidArgumentError(absl::StrCat(
        "LmHead: SwitchToPacked needs a ", want, "-byte packed copy, got ",
        packed == nullptr ? size_t{0} : packed->size(), " bytes"));
  }
  std::lock_guard<std::mutex> lock(impl_->copy_mu);
  if (impl_->dense_copy != nullptr) {
    return absl::FailedPreconditionError("LmHead: the head already reads a packed copy");
  }
  impl_->dense_copy = std::move(packed);
  impl_->dense_packed.store(impl_->dense_copy->data(), std::memory_order_release);
  return absl::OkStatus();
}

int LmHead::quant_prefetch_records() const {
  return impl_->packed.data() != nullptr ? impl_->quant_prefetch : -1;
}
int LmHead::quant_prefetch_records_many() const {
  return impl_->packed.data() != nullptr ? impl_->quant_prefetch_many : -1;
}
int LmHead::quant_gf_rows_max() const {
  return impl_->packed.data() != nullptr ? impl_->quant_gf_rows_max : -1;
}
int64_t LmHead::vocab_size() const { return impl_->options.vocab_size; }
int64_t LmHead::hidden_size() const { return impl_->options.hidden_size; }
int64_t LmHead::small_rows_max() const { return impl_->small_rows_max; }
int64_t LmHead::quant_few_rows_max() const { return impl_->quant_few_rows_max; }
int64_t LmHead::DefaultSmallRowsMax(DType weights_dtype, bool amx) {
  if (amx) return kDefaultAmxRowsMax;
  const HeadKernelIsa isa = DetectHeadKernelIsa();
  if (isa == HeadKernelIsa::kNone) return 0;
  // AVX512_BF16 without AMX (AMD Zen 4/5 class): measured there.
  if (isa == HeadKernelIsa::kAvx512Bf16 && !HeadKernelAmxAvailable()) {
    return weights_dtype == DType::kBF16 ? kDefaultBf16NoAmxRowsMax : kDefaultF32NoAmxRowsMax;
  }
  return kDefaultSmallRowsMax;
}

std::optional<quant::GgmlType> LmHead::weights_quant() const {
  return impl_->options.weights_quant;
}
std::string LmHead::implementation() const {
  if (impl_->quant != nullptr) {
    std::string type = impl_->quant->name;
    for (char& c : type) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
    if (impl_->packed.data() != nullptr) {
      return absl::StrCat("vocabd:", type, "-", QuantKernelIsaName(impl_->quant_isa),
                          " (every M; weights packed at Create, ", impl_->packed_bytes,
                          " bytes, prefetched ", impl_->quant_prefetch, " records ahead",
                          impl_->quant_prefetch_how.empty() ? "" : " (",
                          impl_->quant_prefetch_how, impl_->quant_prefetch_how.empty() ? "" : ")",
                          " at <= ", kPackedTileRows, " rows, ", impl_->quant_prefetch_many,
                          " above", impl_->quant_prefetch_many_how.empty() ? "" : " (",
                          impl_->quant_prefetch_many_how,
                          impl_->quant_prefetch_many_how.empty() ? "" : ")",
                          "; in-place few-row kernel for rows <= ",
                          impl_->quant_few_rows_max, impl_->quant_crossover.empty() ? "" : ", ",
                          impl_->quant_crossover, "; codes cut by gf2p8affineqb in tiles of <= ",
                          impl_->quant_gf_rows_max, " rows",
                          impl_->quant_gf_how.empty() ? "" : ", ", impl_->quant_gf_how, ")");
    }
    if (impl_->quant_few_rows_max < 0) {
      return absl::StrCat("vocabd:", type, "-", QuantKernelIsaName(impl_->quant_isa),
                          " (every M)");
    }
    return absl::StrCat("vocabd:", type, "-", QuantKernelIsaName(impl_->quant_isa),
                        " (every M; few-row kernel for rows <= ", impl_->quant_few_rows_max,
                        impl_->quant_crossover.empty() ? "" : ", ", impl_->quant_crossover, ")");
  }
  std::string onednn;
  if (auto fixed = impl_->FixedFor(kFixedRowsMax)) {
    const char* name = fixed->pd.impl_info_str();
    onednn = absl::StrCat(name == nullptr ? "" : name, " (fixed M <= ", kFixedRowsMax, ")");
  } else {
    const char* name = impl_->pd.impl_info_str();
    onednn = name == nullptr ? "" : name;
  }
  if (impl_->small_rows_max == 0) return onednn;
  const char* kernel = impl_->amx ? "amx_bf16" : HeadKernelIsaName(impl_->kernel_isa);
  if (impl_->dense_packed.load(std::memory_order_acquire) != nullptr) {
    return absl::StrCat("vocabd:", kernel, " (every M; weights packed, ", impl_->dense_pack_bytes,
                        " bytes)");
  }
  std::string prefetch;
  if (impl_->options.weights_dtype == DType::kF32) {
    prefetch = absl::StrCat("; one-group prefetch ", impl_->f32_prefetch ? "on" : "off",
                            impl_->f32_prefetch_how.empty() ? "" : ", ", impl_->f32_prefetch_how);
  }
  return absl::StrCat("vocabd:", kernel, " (rows <= ", impl_->small_rows_max, prefetch, "); ",
                      onednn);
}

namespace {

// VOCABD_LM_HEAD_KERNEL, validated: auto | onednn | no-amx (F32/BF16 heads)
// | scalar | avx2 | avxvnni | avx512vnni (the quantized path's ISA).
absl::StatusOr<std::string> KernelEnv() {
  const char* env = std::getenv("VOCABD_LM_HEAD_KERNEL");
  const std::string value = env == nullptr ? "auto" : env;
  for (const char* known :
       {"auto", "onednn", "no-amx", "scalar", "avx2", "avxvnni", "avx512vnni"}) {
    if (value == known) return value;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("VOCABD_LM_HEAD_KERNEL = '", value,
                   "' (want auto, onednn, no-amx, scalar, avx2, avxvnni or avx512vnni)"));
}

// Seconds of one kernel call over weight rows [0, rows), best of `reps`: the
// packed kernel on `packed` (all `vocab` rows) when set, else
// QuantHeadKernel on w. parallel: the rows split in chunks of `chunk` over
// the threads, as Compute runs them (each thread its own scratch; the
// packed kernel's panel built once per call, inside the timed part);
// prefetch: the packed kernel's prefetch_records.
double TimeKernel(QuantKernelIsa isa, const QuantTypeInfo& type, const uint8_t* acts, int64_t m,
                  const uint8_t* w, const uint8_t* packed, int64_t vocab, int64_t d, int64_t rows,
                  float* out, uint8_t* scratch, int64_t few_rows_max, int64_t chunk = 0,
                  int prefetch = 0, int reps = 3, int gf_rows_max = 0) {
  uint8_t* panel = nullptr;
  if (packed != nullptr) {
    panel = static_cast<uint8_t*>(
        ThreadPackedPanel().Get(static_cast<size_t>(QuantPackedPanelBytes(m, d))));
    if (panel == nullptr) return 1e30;
  }
  auto run = [&](int64_t v0, int64_t v1, uint8_t* s) {
    if (packed != nullptr) {
      QuantPackedKernel(isa, type, panel, m, packed, vocab, d, v0, v1, out, rows, prefetch,
                        gf_rows_max);
    } else {
      QuantHeadKernel(isa, type, acts, m, w, d, v0, v1, out, rows, s, few_rows_max);
    }
  };
  double best = 1e30;
  for (int rep = 0; rep < reps; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    if (panel != nullptr) QuantBuildPackedPanel(isa, type, acts, m, d, panel);  // as Compute does
    if (chunk > 0) {
      const size_t bytes = static_cast<size_t>(QuantUnpackScratchBytes(d));
      ParallelForStreams((rows + chunk - 1) / chunk, [&](int64_t t) {
        auto* s = static_cast<uint8_t*>(ThreadQuantUnpack().Get(bytes));
        if (s != nullptr) run(t * chunk, std::min(rows, (t + 1) * chunk), s);
      });
    } else {
      run(0, rows, scratch);
    }
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

// n fixed pseudo-random floats in [-1, 1) (xorshift32): the hidden rows
// the start-up measurements run on.
std::vector<float> FixedHiddenRows(size_t n) {
  std::vector<float> hidden(n);
  uint32_t state = 0x9E3779B9u;
  for (float& x : hidden) {
    state ^= state << 13, state ^= state >> 17, state ^= state << 5;
    x = static_cast<float>(state >> 8) / 8388608.0f - 1.0f;
  }
  return hidden;
}

// What the start-up measurements run on: kFewRowsLimit fixed pseudo-random
// hidden rows in [-1, 1), quantized, and a scratch and output for `n`
// weight rows.
struct MeasureInputs {
  std::vector<uint8_t> acts_buf, scratch_buf;
  std::vector<float> out;
  uint8_t* acts = nullptr;
  uint8_t* scratch = nullptr;
  // Up to `m` input rows (kFewRowsLimit by default) and n weight rows.
  MeasureInputs(int64_t d, int64_t n, int64_t m = kFewRowsLimit) {
    const std::vector<float> hidden = FixedHiddenRows(static_cast<size_t>(m * d));
    acts_buf.resize(static_cast<size_t>(m * QuantActRowBytes(d)) + 64);
    acts = Align64(acts_buf.data());
    QuantizeActivations(hidden.data(), m, d, acts);
    scratch_buf.resize(static_cast<size_t>(QuantUnpackScratchBytes(d)) + 64);
    scratch = Align64(scratch_buf.data());
    out.resize(static_cast<size_t>(m * n));
  }
  static uint8_t* Align64(uint8_t* p) {
    return reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(p) + 63) & ~uintptr_t{63});
  }
};

// Weight rows a start-up measurement runs on: packed, up to 64 MiB (more
// than the caches hold, so the kernels stream from memory as Compute does
// on a large head; all of a smaller head); in place, up to 1 MiB.
int64_t MeasuredRows(const QuantTypeInfo& type, int64_t vocab, int64_t d, bool packed) {
  const int64_t row_bytes = d / type.block_size * type.block_bytes;
  const int64_t span = packed ? int64_t{64} << 20 : int64_t{1} << 20;
  return std::min(vocab, std::max<int64_t>(4, span / row_bytes));
}

// The start-up measurements are made once per process per key (the
// second head of a kind reuses the first's) and one at a time (both would
// be slower).
std::mutex& MeasureMutex() {
  static std::mutex* const mu = new std::mutex;
  return *mu;
}

// Which tiles of the packed kernel cut their codes with gf2p8affineqb
// (LmHead::Create's comment), on a CPU with GFNI: M = 1, then 2, through
// the packed kernel as Compute runs it, on the head's first 8 MiB of
// records (after an untimed pass the L3 cache holds them, so the
// instructions set the time: the two ways differ only in instructions),
// with gf2p8affineqb and with the shifts, 3 interleaved rounds, best of
// rounds (each the best of 5 calls); gf2p8affineqb for M = 1 .. m while it
// is strictly faster.
int MeasuredGfRowsMax(QuantKernelIsa isa, const QuantTypeInfo& type, const uint8_t* packed,
                      int64_t vocab, int64_t d, int64_t chunk, std::string* how) {
  struct Result {
    int rows;
    std::string how;
  };
  static auto* const measured = new std::map<std::tuple<int, int, int64_t, int64_t>, Result>;
  const int64_t record_row_bytes = QuantPackedBytes(type, kPackedGroupRows, d) / kPackedGroupRows;
  const int64_t n = std::min(vocab, std::max<int64_t>(kPackedGroupRows, (int64_t{8} << 20) /
                                                                          record_row_bytes /
                                                                          kPackedGroupRows *
                                                                          kPackedGroupRows));
  const auto key = std::make_tuple(static_cast<int>(isa), static_cast<int>(type.type), d, n);
  std::lock_guard<std::mutex> lock(MeasureMutex());
  if (auto it = measured->find(key); it != measured->end()) {
    *how = it->second.how;
    return it->second.rows;
  }
  MeasureInputs in(d, n);
  (void)TimeKernel(isa, type, in.acts, 1, nullptr, packed, vocab, d, n, in.out.data(), in.scratch,
                   0, chunk, 0, /*reps=*/1);
  int chosen = 0;
  std::string text = absl::StrCat("measured from L3 on ", n, " weight rows:");
  for (int m = 1; m <= kPackedGfRowsMax; ++m) {
    double gf = 1e30, shifts = 1e30;
    for (int round = 0; round < 3; ++round) {
      gf = std::min(gf, TimeKernel(isa, type, in.acts, m, nullptr, packed, vocab, d, n,
                                   in.out.data(), in.scratch, 0, chunk, 0, /*reps=*/5, m));
      shifts = std::min(shifts, TimeKernel(isa, type, in.acts, m, nullptr, packed, vocab, d, n,
                                           in.out.data(), in.scratch, 0, chunk, 0, /*reps=*/5, 0));
    }
    char part[96];
    std::snprintf(part, sizeof part, "%s M = %d gf2p8affineqb %.1f us, shifts %.1f us",
                  m == 1 ? "" : ";", m, gf * 1e6, shifts * 1e6);
    absl::StrAppend(&text, part);
    if (!(gf < shifts)) break;
    chosen = m;
  }
  *how = text;
  (*measured)[key] = {chosen, *how};
  return chosen;
}

// The packed kernel's prefetch distance (LmHead::Create's comment) for
// calls of `m` input rows: m rows (1: the decode step, the most
// memory-bound call; 2 x kPackedTileRows: calls that use each record for
// several tiles) through the packed kernel as Compute runs it, with
// prefetch_records 0, 1, 2 and 4, in 3 interleaved rounds (so a change of
// the machine's load hits every candidate alike); the fastest
// best-of-rounds wins (ties: the smaller).
int MeasuredPrefetch(QuantKernelIsa isa, const QuantTypeInfo& type, const uint8_t* packed,
                     int64_t vocab, int64_t d, int64_t chunk, int gf_rows_max, int64_t m,
                     std::string* how) {
  struct Result {
    int records;
    std::string how;
  };
  static auto* const measured =
      new std::map<std::tuple<int, int, int64_t, int64_t, int, int64_t>, Result>;
  const int64_t n = MeasuredRows(type, vocab, d, true);
  const auto key =
      std::make_tuple(static_cast<int>(isa), static_cast<int>(type.type), d, n, gf_rows_max, m);
  std::lock_guard<std::mutex> lock(MeasureMutex());
  if (auto it = measured->find(key); it != measured->end()) {
    *how = it->second.how;
    return it->second.records;
  }
  MeasureInputs in(d, n, std::max<int64_t>(m, kFewRowsLimit));
  constexpr int kCandidates[] = {0, 1, 2, 4};
  double best[4] = {1e30, 1e30, 1e30, 1e30};
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < 4; ++i) {
      best[i] = std::min(best[i], TimeKernel(isa, type, in.acts, m, nullptr, packed, vocab, d, n,
                                             in.out.data(), in.scratch, 0, chunk, kCandidates[i],
                                             /*reps=*/1, gf_rows_max));
    }
  }
  int chosen = 0;
  for (int i = 1; i < 4; ++i) {
    if (best[i] < best[chosen]) chosen = i;
  }
  char text[160];
  std::snprintf(text, sizeof text,
                "measured at M = %lld on %lld weight rows: 0 %.3f ms, 1 %.3f ms, 2 %.3f ms, 4 %.3f ms",
                static_cast<long long>(m), static_cast<long long>(n), best[0] * 1e3, best[1] * 1e3,
                best[2] * 1e3,
                best[3] * 1e3);
  *how = text;
  (*measured)[key] = {kCandidates[chosen], *how};
  return kCandidates[chosen];
}

// Whether the F32 kernel prefetches for one row group (LmHead::Create's
// comment): one fixed pseudo-random row through it on up to 64 MiB of the
// head's rows, as Compute runs it (all threads, `chunk` rows per task),
// without and with, after one untimed pass (the mapping's pages), in 3
// interleaved rounds; on only when strictly faster. Once per process per
// (hidden_size, rows measured).
bool MeasuredF32Prefetch(const float* w, int64_t vocab, int64_t d, int64_t chunk,
                         std::string* how) {
  struct Result {
    bool on;
    std::string how;
  };
  static auto* const measured = new std::map<std::pair<int64_t, int64_t>, Result>;
  const int64_t n = std::min(vocab, std::max<int64_t>(8, (int64_t{64} << 20) / (d * 4)));
  const auto key = std::make_pair(d, n);
  std::lock_guard<std::mutex> lock(MeasureMutex());
  if (auto it = measured->find(key); it != measured->end()) {
    *how = it->second.how;
    return it->second.on;
  }
  const std::vector<float> x = FixedHiddenRows(static_cast<size_t>(d));
  std::vector<float> out(static_cast<size_t>(n));
  auto run = [&](bool on) {
    const auto t0 = std::chrono::steady_clock::now();
    ParallelForStreams((n + chunk - 1) / chunk, [&](int64_t t) {
      HeadKernelF32(x.data(), 1, w, d, t * chunk, std::min(n, (t + 1) * chunk), out.data(), n, on);
    });
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  run(false);
  double best[2] = {1e30, 1e30};
  for (int round = 0; round < 3; ++round) {
    for (int on = 0; on < 2; ++on) best[on] = std::min(best[on], run(on == 1));
  }
  const bool on = best[1] < best[0];
  char text[128];
  std::snprintf(text, sizeof text, "measured at M = 1 on %lld weight rows: off %.3f ms, on %.3f ms",
                static_cast<long long>(n), best[0] * 1e3, best[1] * 1e3);
  *how = text;
  (*measured)[key] = {on, *how};
  return on;
}

// The crossover of a path's two kernels (LmHead::Create's comment),
// measured once per process per (path, type, hidden_size, rows measured,
// packed, prefetch); *how says what was measured (implementation() shows
// it). With `packed` set the other kernel is the packed one (prefetching
// `prefetch` records ahead), and both run as Compute runs them (all
// threads, `chunk` rows per task) over up to 64 MiB of weights, more than
// the caches hold: the in-place and packed kernels read the same bytes, so
// at few rows which is faster depends on how each overlaps its
// instructions with memory, not on its instructions alone.
int64_t MeasuredFewRowsMax(QuantKernelIsa isa, const QuantTypeInfo& type, const uint8_t* w,
                           const uint8_t* packed, int64_t vocab, int64_t d, int64_t chunk,
                           int prefetch, int gf_rows_max, std::string* how) {
  struct Result {
    int64_t few_rows_max;
    std::string how;
  };
  static auto* const measured =
      new std::map<std::tuple<int, int, int64_t, int64_t, bool, int, int>, Result>;
  const int64_t n = MeasuredRows(type, vocab, d, packed != nullptr);
  const auto key = std::make_tuple(static_cast<int>(isa), static_cast<int>(type.type), d, n,
                                   packed != nullptr, prefetch, gf_rows_max);
  std::lock_guard<std::mutex> lock(MeasureMutex());
  if (auto it = measured->find(key); it != measured->end()) {
    *how = it->second.how;
    return it->second.few_rows_max;
  }
  MeasureInputs in(d, n);
  int64_t chosen = 0, at = 1;
  double few = 0, other = 0;
  if (packed != nullptr) {
    // M = 1, 2, ... while the in-place few-row kernel is faster (the packed
    // one shares its weight loads among the rows, so it wins from some M on).
    // The two run back to back in 3 rounds (which one goes first alternates)
    // and the in-place kernel is taken only when it wins every round: the
    // machine's memory speed can change between rounds (on a VM it does,
    // minute to minute), and best-of-rounds times taken across such a change
    // once picked the in-place kernel at M = 1 where it was 1.3x slower.
    for (int64_t m = 1; m <= kFewRowsLimit; ++m) {
      at = m;
      few = other = 1e30;
      int few_wins = 0;
      auto time_few = [&] {
        return TimeKernel(isa, type, in.acts, m, w, nullptr, vocab, d, n, in.out.data(),
                          in.scratch, m, chunk, 0, /*reps=*/1);
      };
      auto time_packed = [&] {
        return TimeKernel(isa, type, in.acts, m, w, packed, vocab, d, n, in.out.data(),
                          in.scratch, 0, chunk, prefetch, /*reps=*/1, gf_rows_max);
      };
      for (int round = 0; round < 3; ++round) {
        double f, p;
        if (round % 2 == 0) {
          f = time_few();
          p = time_packed();
        } else {
          p = time_packed();
          f = time_few();
        }
        few = std::min(few, f);
        other = std::min(other, p);
        if (f < p) ++few_wins;
      }
      if (few_wins < 3) break;
      chosen = m;
    }
  } else {
    for (int64_t m = kFewRowsLimit; m >= 1; --m) {
      at = m;
      few = TimeKernel(isa, type, in.acts, m, w, nullptr, vocab, d, n, in.out.data(), in.scratch, m);
      other = TimeKernel(isa, type, in.acts, m, w, packed, vocab, d, n, in.out.data(), in.scratch, 0);
      if (few < other) {
        chosen = m;
        break;
      }
    }
  }
  char text[160];
  std::snprintf(text, sizeof text, "measured on %lld weight rows: M = %lld few-row %.3f ms, %s %.3f ms",
                static_cast<long long>(n), static_cast<long long>(at), few * 1e3,
                packed != nullptr ? "packed" : "other", other * 1e3);
  *how = text;
  (*measured)[key] = {chosen, *how};
  return chosen;
}

}  // namespace

absl::StatusOr<std::unique_ptr<LmHead>> LmHead::CreateQuantized(const Options& options) {
  const uint32_t id = static_cast<uint32_t>(*options.weights_quant);
  const QuantTypeInfo* info = FindQuantTypeInfo(*options.weights_quant);
  if (info == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "LmHead: weights_quant = ggml type ", id,
        " is not served (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K)"));
  }
  if (options.vocab_size <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("LmHead: vocab_size = ", options.vocab_size, " must be > 0"));
  }
  if (options.hidden_size <= 0 || options.hidden_size % info->block_size != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "LmHead: hidden_size = ", options.hidden_size, " must be a positive multiple of ",
        info->name, "'s block size ", info->block_size, " (rows are whole ", info->name,
        " blocks)"));
  }
  if (options.small_rows_max < -1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "LmHead: small_rows_max = ", options.small_rows_max, " must be >= -1"));
  }
  if (options.quant_few_rows_max < -1 || options.quant_few_rows_max > kFewRowsLimit) {
    return absl::InvalidArgumentError(absl::StrCat("LmHead: quant_few_rows_max = ",
                                                   options.quant_few_rows_max, " must be in [-1, ",
                                                   kFewRowsLimit, "]"));
  }
  absl::StatusOr<std::string> kernel_env = KernelEnv();
  if (!kernel_env.ok()) return kernel_env.status();
  absl::StatusOr<int64_t> few_env = RangeEnv("VOCABD_QUANT_FEW_ROWS_MAX", kFewRowsLimit);
  if (!few_env.ok()) return few_env.status();
  absl::StatusOr<int> pack_env = SwitchEnv("VOCABD_QUANT_PACK");
  if (!pack_env.ok()) return pack_env.status();
  if (options.quant_prefetch_records < -1 || options.quant_prefetch_records > kPackedPrefetchMax) {
    return absl::InvalidArgumentError(absl::StrCat("LmHead: quant_prefetch_records = ",
                                                   options.quant_prefetch_records,
                                                   " must be in [-1, ", kPackedPrefetchMax, "]"));
  }
  absl::StatusOr<int64_t> prefetch_env = RangeEnv("VOCABD_QUANT_PREFETCH", kPackedPrefetchMax);
  if (!prefetch_env.ok()) return prefetch_env.status();
  if (options.quant_gf_rows_max < -1 || options.quant_gf_rows_max > kPackedGfRowsMax) {
    return absl::InvalidArgumentError(absl::StrCat("LmHead: quant_gf_rows_max = ",
                                                   options.quant_gf_rows_max, " must be in [-1, ",
                                                   kPackedGfRowsMax, "]"));
  }
  absl::StatusOr<int64_t> gf_env = RangeEnv("VOCABD_QUANT_GF_ROWS", kPackedGfRowsMax);
  if (!gf_env.ok()) return gf_env.status();
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  impl->weights.store(options.weights, std::memory_order_relaxed);
  impl->quant = info;
  impl->quant_isa = DetectQuantKernelIsa();
  for (QuantKernelIsa isa : {QuantKernelIsa::kScalar, QuantKernelIsa::kAvx2,
                             QuantKernelIsa::kAvxVnni, QuantKernelIsa::kAvx512Vnni}) {
    if (*kernel_env != QuantKernelIsaName(isa)) continue;
    if (!QuantKernelIsaSupported(isa)) {
      return absl::FailedPreconditionError(
          absl::StrCat("VOCABD_LM_HEAD_KERNEL = '", *kernel_env, "': this CPU lacks the ",
                       QuantKernelIsaName(isa), " path of the quantized LM head"));
    }
    impl->quant_isa = isa;
  }
  const bool pack = *pack_env >= 0 ? *pack_env == 1 : options.quant_pack;
  if (pack && QuantPackedCovers(impl->quant_isa, info->type, options.hidden_size)) {
    const int64_t bytes = QuantPackedBytes(*info, options.vocab_size, options.hidden_size);
    // In huge pages (lib/core/huge_pages.h): 512x fewer page faults while
    // packing (4 KiB faults took most of a second for a Llama-3 Q8_0 head in
    // a VM) and fewer TLB misses while streaming it.
    const std::string what = absl::StrCat("the packed ", info->name, " weights");
    absl::StatusOr<HugePageBuffer> packed =
        HugePageBuffer::Allocate(static_cast<size_t>(bytes), what.c_str());
    if (!packed.ok()) {
      return absl::Status(packed.status().code(),
                          absl::StrCat("LmHead: ", packed.status().message()));
    }
    impl->packed = std::move(*packed);
    uint8_t* p = impl->packed.data();
    impl->packed_bytes = bytes;
    const int64_t groups = (options.vocab_size + kPackedGroupRows - 1) / kPackedGroupRows;
    constexpr int64_t kGroupsPerTask = 64;
    ParallelFor((groups + kGroupsPerTask - 1) / kGroupsPerTask, [&](int64_t t) {
      QuantPackGroups(impl->quant_isa, *info, static_cast<const uint8_t*>(options.weights),
                      options.vocab_size, options.hidden_size, t * kGroupsPerTask,
                      std::min(groups, (t + 1) * kGroupsPerTask), p);
    });
  }
  const int64_t row_bytes = options.hidden_size / info->block_size * info->block_bytes;
  // Tasks of about 1 MiB of weights, a multiple of 16 rows (the tile
  // heights: 4 for the in-place kernels, a packed group of 16).
  impl->chunk_rows = std::max<int64_t>(16, (int64_t{1} << 20) / row_bytes / 16 * 16);
  if (impl->packed.data() != nullptr) {
    impl->quant_gf_rows_max =
        !QuantCpuHasGfni()                ? 0
        : options.quant_gf_rows_max >= 0 ? options.quant_gf_rows_max
        : *gf_env >= 0                    ? static_cast<int>(*gf_env)
                                          : MeasuredGfRowsMax(impl->quant_isa, *info,
                                                              impl->packed.data(), options.vocab_size,
                                                              options.hidden_size, impl->chunk_rows,
                                                              &impl->quant_gf_how);
    if (!QuantCpuHasGfni()) impl->quant_gf_how = "no GFNI";
    if (options.quant_prefetch_records >= 0 || *prefetch_env >= 0) {
      impl->quant_prefetch = options.quant_prefetch_records >= 0
                                 ? options.quant_prefetch_records
                                 : static_cast<int>(*prefetch_env);
      impl->quant_prefetch_many = impl->quant_prefetch;
    } else {
      impl->quant_prefetch = MeasuredPrefetch(
          impl->quant_isa, *info, impl->packed.data(), options.vocab_size, options.hidden_size,
          impl->chunk_rows, impl->quant_gf_rows_max, 1, &impl->quant_prefetch_how);
      impl->quant_prefetch_many = MeasuredPrefetch(
          impl->quant_isa, *info, impl->packed.data(), options.vocab_size, options.hidden_size,
          impl->chunk_rows, impl->quant_gf_rows_max, 2 * kPackedTileRows,
          &impl->quant_prefetch_many_how);
    }
  }
  if (QuantKernelHasCrossover(impl->quant_isa, info->type, options.hidden_size)) {
    impl->quant_few_rows_max =
        options.quant_few_rows_max >= 0 ? options.quant_few_rows_max
        : *few_env >= 0                 ? *few_env
                                        : MeasuredFewRowsMax(impl->quant_isa, *info,
                                                             static_cast<const uint8_t*>(options.weights),
                                                             impl->packed.data(), options.vocab_size,
                                                             options.hidden_size, impl->chunk_rows,
                                                             impl->quant_prefetch,
                                                             impl->quant_gf_rows_max,
                                                             &impl->quant_crossover);
  }
  // Every M runs vocabd's kernel (oneDNN has no ggml-block matmul).
  impl->small_rows_max = std::numeric_limits<int64_t>::max();
  return std::unique_ptr<LmHead>(new LmHead(std::move(impl)));
}

absl::StatusOr<std::unique_ptr<LmHead>> LmHead::Create(const Options& options) {
  if (options.weights == nullptr) {
    return absl::InvalidArgumentError("LmHead: weights is null");
  }
  if (options.vocab_size <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("LmHead: vocab_size = ", options.vocab_size, " must be > 0"));
  }
  if (options.hidden_size <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("LmHead: hidden_size = ", options.hidden_size, " must be > 0"));
  }
  if (options.weights_quant.has_value()) return CreateQuantized(options);
  if (options.weights_dtype != DType::kF32 && options.weights_dtype != DType::kBF16) {
    return absl::InvalidArgumentError(
        absl::StrCat("LmHead: weights_dtype = ", std::string(DTypeName(options.weights_dtype)),
                     " is not supported (F32 or BF16)"));
  }
  // A bad option is INVALID_ARGUMENT whatever this CPU has: validated
  // before the capability checks below.
  if (absl::StatusOr<std::string> env = KernelEnv(); !env.ok()) return env.status();
  if (options.f32_prefetch < -1 || options.f32_prefetch > 1) {
    return absl::InvalidArgumentError(absl::StrCat("LmHead: f32_prefetch = ",
                                                   options.f32_prefetch, " must be -1, 0 or 1"));
  }
  absl::StatusOr<int> f32_prefetch_env = SwitchEnv("VOCABD_F32_PREFETCH");
  if (!f32_prefetch_env.ok()) return f32_prefetch_env.status();
  absl::StatusOr<int> dense_pack_env = SwitchEnv("VOCABD_DENSE_PACK");
  if (!dense_pack_env.ok()) return dense_pack_env.status();
  if (options.weights_dtype == DType::kBF16 && !Bf16Supported()) {
    return absl::FailedPreconditionError(
        "LmHead: BF16 weights need a CPU with AVX512-BF16 or AMX (oneDNN effective ISA has "
        "neither)");
  }
  const memory::dim k = options.hidden_size;
  const memory::dim n = options.vocab_size;
  if (options.small_rows_max < -1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "LmHead: small_rows_max = ", options.small_rows_max, " must be >= -1"));
  }
  // Operators' override, read at every Create (like oneDNN's
  // DNNL_MAX_CPU_ISA): auto | onednn (never vocabd's kernels) | no-amx.
  // The quantized-path values (scalar, avx2, ...) leave F32/BF16 heads on auto.
  absl::StatusOr<std::string> kernel_env_or = KernelEnv();
  if (!kernel_env_or.ok()) return kernel_env_or.status();
  const std::string kernel_env = *kernel_env_or;
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  impl->weights.store(options.weights, std::memory_order_relaxed);
  {
    const HeadKernelIsa isa =
        kernel_env == "onednn" ? HeadKernelIsa::kNone : DetectHeadKernelIsa();
    const bool bf16 = options.weights_dtype == DType::kBF16;
    const bool usable = bf16 ? isa == HeadKernelIsa::kAvx512Bf16 : isa != HeadKernelIsa::kNone;
    impl->amx = usable && bf16 && options.allow_amx && kernel_env != "no-amx" &&
                options.hidden_size % 32 == 0 && HeadKernelAmxAvailable();
    const int64_t dflt = DefaultSmallRowsMax(options.weights_dtype, impl->amx);
    const int64_t want = options.small_rows_max < 0 ? dflt : options.small_rows_max;
    impl->small_rows_max = usable ? want : 0;
    if (impl->small_rows_max == 0) impl->amx = false;
    // The kernel this head runs (the F32 one needs only AVX512F).
    const HeadKernelIsa used = bf16 ? HeadKernelIsa::kAvx512Bf16 : HeadKernelIsa::kAvx512;
    impl->kernel_isa = impl->small_rows_max > 0 ? used : HeadKernelIsa::kNone;
    impl->chunk_rows = KernelChunkRows(options.hidden_size, options.weights_dtype);
    const bool pack = *dense_pack_env >= 0 ? *dense_pack_env == 1 : options.dense_pack;
    if (pack && impl->small_rows_max > 0 && !impl->amx && (!bf16 || options.hidden_size % 2 == 0)) {
      impl->dense_pack_bytes =
          PackedHeadBlocks(options.vocab_size) *
          (bf16 ? PackedBf16BlockStride(options.hidden_size)
                : PackedF32BlockStride(options.hidden_size)) *
          static_cast<int64_t>(DTypeSize(options.weights_dtype));
    }
    if (impl->dense_pack_bytes > 0 && !options.dense_pack_deferred) {
      // In huge pages: 512x fewer page faults while packing, fewer TLB
      // misses while streaming it; blocks filled on all threads.
      absl::StatusOr<HugePageBuffer> packed = HugePageBuffer::Allocate(
          static_cast<size_t>(impl->dense_pack_bytes),
          bf16 ? "the packed BF16 weights" : "the packed F32 weights");
      if (!packed.ok()) {
        return absl::Status(packed.status().code(),
                            absl::StrCat("LmHead: ", packed.status().message()));
      }
      const int64_t blocks = PackedHeadBlocks(options.vocab_size);
      constexpr int64_t kBlocksPerTask = 64;
      void* p = packed->data();
      ParallelFor((blocks + kBlocksPerTask - 1) / kBlocksPerTask, [&](int64_t t) {
        PackDense(options.weights_dtype, options.weights, options.vocab_size, options.hidden_size,
                  t * kBlocksPerTask, std::min(blocks, (t + 1) * kBlocksPerTask), p);
      });
      impl->dense_copy = std::make_shared<const HugePageBuffer>(std::move(*packed));
      impl->dense_packed.store(impl->dense_copy->data(), std::memory_order_relaxed);
      impl->packed_bytes = impl->dense_pack_bytes;
    }
    if (!bf16 && impl->small_rows_max > 0 && impl->dense_packed.load() == nullptr) {
      impl->f32_prefetch =
          options.f32_prefetch >= 0 ? options.f32_prefetch == 1
          : *f32_prefetch_env >= 0  ? *f32_prefetch_env == 1
                                    : MeasuredF32Prefetch(static_cast<const float*>(options.weights),
                                                          options.vocab_size, options.hidden_size,
                                                          impl->chunk_rows, &impl->f32_prefetch_how);
    }
  }
  try {
    std::lock_guard<std::mutex> build_lock(DnnlBuildMutex());
    impl->engine = dnnl::engine(dnnl::engine::kind::cpu, 0);
    const memory::data_type wt = DnnlType(options.weights_dtype);
    // BF16 weights take bf16 src (oneDNN 2.6 has no f32 x bf16 matmul).
    // W is [N, K] row-major; as the [K, N] weights operand element (k, n)
    // sits at k * 1 + n * K: strides {1, K}.
    impl->weights_md = memory::desc({k, n}, wt, memory::dims{1, k});
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    impl->pd = dnnl::matmul::primitive_desc(impl->MatmulDesc(DNNL_RUNTIME_DIM_VAL), attr,
                                            impl->engine);
    impl->scratchpad_md = impl->pd.scratchpad_desc();
    impl->matmul = dnnl::matmul(impl->pd);
  } catch (const dnnl::error& e) {
    return DnnlError("matmul primitive creation", e);
  }
  return std::unique_ptr<LmHead>(new LmHead(std::move(impl)));
}

absl::Status LmHead::Compute(const float* hidden, int64_t rows, float* logits) const {
  if (rows < 0) {
    return absl::InvalidArgumentError(absl::StrCat("LmHead: rows = ", rows, " must be >= 0"));
  }
  if (rows == 0) return absl::OkStatus();
  if (hidden == nullptr || logits == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("LmHead: ", hidden == nullptr ? "hidden" : "logits",
                     " is null with rows = ", rows));
  }
  const Impl& impl = *impl_;
  if (impl.quant != nullptr) return ComputeQuantized(hidden, rows, logits);
  if (const void* packed = impl.dense_packed.load(std::memory_order_acquire); packed != nullptr) {
    return ComputeDensePacked(hidden, rows, packed, logits);
  }
  if (rows <= impl.small_rows_max) return ComputeSmall(hidden, rows, logits);
  // Chunks of at most kFixedRowsMax rows, each through a fixed-M primitive;
  // a last chunk small enough for vocabd's kernel goes there.
  const int64_t d = impl.options.hidden_size;
  const int64_t vocab = impl.options.vocab_size;
  for (int64_t r0 = 0; r0 < rows; r0 += kFixedRowsMax) {
    const int64_t m = std::min(kFixedRowsMax, rows - r0);
    const absl::Status s = m <= impl.small_rows_max
                               ? ComputeSmall(hidden + r0 * d, m, logits + r0 * vocab)
                               : ComputeOneDnn(hidden + r0 * d, m, logits + r0 * vocab);
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status LmHead::ComputeOneDnn(const float* hidden, int64_t rows, float* logits) const {
  const Impl& impl = *impl_;
  const memory::dim m = rows;
  try {
    const std::shared_ptr<const FixedMatmul> fixed = impl.FixedFor(rows);
    const bool bf16 = impl.options.weights_dtype == DType::kBF16;
    const void* src = hidden;
    if (bf16) {
      absl::StatusOr<const uint16_t*> converted = Bf16Rows(hidden, m * impl.options.hidden_size);
      if (!converted.ok()) return converted.status();
      src = *converted;
    }
    // oneDNN takes non-const handles; it never writes SRC or WEIGHTS.
    memory src_mem(impl.SrcDesc(m), impl.engine, const_cast<void*>(src));
    memory wei_mem(impl.weights_md, impl.engine,
                   const_cast<void*>(impl.weights.load(std::memory_order_acquire)));
    memory dst_mem(impl.DstDesc(m), impl.engine, logits);
    std::unordered_map<int, memory> args = {
        {DNNL_ARG_SRC, src_mem}, {DNNL_ARG_WEIGHTS, wei_mem}, {DNNL_ARG_DST, dst_mem}};
    const memory::desc& scratch_md = fixed ? fixed->scratchpad_md : impl.scratchpad_md;
    const size_t scratch_size = scratch_md.get_size();
    if (scratch_size > 0) {
      void* scratch = ThreadScratch().Get(scratch_size);
      if (scratch == nullptr) {
        return absl::ResourceExhaustedError(
            absl::StrCat("LmHead: cannot allocate ", scratch_size, " scratchpad bytes"));
      }
      args.emplace(DNNL_ARG_SCRATCHPAD, memory(scratch_md, impl.engine, scratch));
    }
    dnnl::stream stream(impl.engine);
    (fixed ? fixed->matmul : impl.matmul).execute(stream, args);
    stream.wait();
  } catch (const dnnl::error& e) {
    return DnnlError(absl::StrCat("matmul execution (rows = ", rows, ")").c_str(), e);
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError(
        absl::StrCat("LmHead: out of memory (rows = ", rows, ")"));
  }
  return absl::OkStatus();
}

absl::Status LmHead::ComputeQuantized(const float* hidden, int64_t rows, float* logits) const {
  const Impl& impl = *impl_;
  const int64_t vocab = impl.options.vocab_size;
  const int64_t d = impl.options.hidden_size;
  const size_t act_bytes = static_cast<size_t>(rows * QuantActRowBytes(d));
  auto* acts = static_cast<uint8_t*>(ThreadQuantActs().Get(act_bytes));
  if (acts == nullptr) {
    return absl::ResourceExhaustedError(
        absl::StrCat("LmHead: cannot allocate ", act_bytes, " bytes for quantized rows"));
  }
  QuantizeActivations(hidden, rows, d, acts);
  const int64_t chunk = impl.chunk_rows;
  const int64_t tasks = (vocab + chunk - 1) / chunk;
  if (impl.packed.data() != nullptr && rows > impl.quant_few_rows_max) {
    // The activation panel once per call; every task reads it.
    const size_t panel_bytes = static_cast<size_t>(QuantPackedPanelBytes(rows, d));
    auto* panel = static_cast<uint8_t*>(ThreadPackedPanel().Get(panel_bytes));
    if (panel == nullptr) {
      return absl::ResourceExhaustedError(
          absl::StrCat("LmHead: cannot allocate ", panel_bytes, " bytes for the packed panel"));
    }
    QuantBuildPackedPanel(impl.quant_isa, *impl.quant, acts, rows, d, panel);
    ParallelForStreams(tasks, [&](int64_t t) {
      QuantPackedKernel(impl.quant_isa, *impl.quant, panel, rows, impl.packed.data(), vocab, d,
                        t * chunk, std::min(vocab, (t + 1) * chunk), logits, vocab,
                        rows > kPackedTileRows ? impl.quant_prefetch_many : impl.quant_prefetch,
                        impl.quant_gf_rows_max);
    });
    return absl::OkStatus();
  }
  const size_t scratch_bytes = static_cast<size_t>(QuantUnpackScratchBytes(d));
  const auto* w = static_cast<const uint8_t*>(impl.options.weights);
  std::atomic<bool> oom{false};
  ParallelForStreams(tasks, [&](int64_t t) {
    auto* scratch = static_cast<uint8_t*>(ThreadQuantUnpack().Get(scratch_bytes));
    if (scratch == nullptr) {
      oom.store(true);
      return;
    }
    QuantHeadKernel(impl.quant_isa, *impl.quant, acts, rows, w, d, t * chunk,
                    std::min(vocab, (t + 1) * chunk), logits, vocab, scratch,
                    std::max<int64_t>(impl.quant_few_rows_max, 0));
  });
  if (oom.load()) {
    return absl::ResourceExhaustedError(
        absl::StrCat("LmHead: cannot allocate ", scratch_bytes, " bytes of unpack scratch"));
  }
  return absl::OkStatus();
}

absl::Status LmHead::ComputeSmall(const float* hidden, int64_t rows, float* logits) const {
  const Impl& impl = *impl_;
  const int64_t vocab = impl.options.vocab_size;
  const int64_t d = impl.options.hidden_size;
  const int64_t chunk = impl.chunk_rows;
  const int64_t tasks = (vocab + chunk - 1) / chunk;
  if (impl.options.weights_dtype == DType::kBF16) {
    absl::StatusOr<const uint16_t*> converted = Bf16Rows(hidden, rows * d);
    if (!converted.ok()) return converted.status();
    const uint16_t* x = *converted;
    const auto* w = static_cast<const uint16_t*>(impl.weights.load(std::memory_order_acquire));
    if (impl.amx) {
      const size_t packed_count = static_cast<size_t>(PackedBf16ForAmxSize(rows, d));
      auto* packed =
          static_cast<uint16_t*>(ThreadAmxPacked().Get(packed_count * sizeof(uint16_t)));
      if (packed == nullptr) {
        return absl::ResourceExhaustedError(absl::StrCat(
            "LmHead: cannot allocate ", packed_count * 2, " bytes for packed bf16 rows"));
      }
      PackBf16ForAmx(x, rows, d, packed);
      ParallelForStreams(tasks, [&](int64_t t) {
        HeadKernelBf16Amx(packed, x, rows, w, d, t * chunk, std::min(vocab, (t + 1) * chunk),
                          logits, vocab);
      });
      return absl::OkStatus();
    }
    ParallelForStreams(tasks, [&](int64_t t) {
      HeadKernelBf16(x, rows, w, d, t * chunk, std::min(vocab, (t + 1) * chunk), logits, vocab);
    });
  } else {
    const auto* w = static_cast<const float*>(impl.weights.load(std::memory_order_acquire));
    ParallelForStreams(tasks, [&](int64_t t) {
      HeadKernelF32(hidden, rows, w, d, t * chunk, std::min(vocab, (t + 1) * chunk), logits,
                    vocab, impl.f32_prefetch);
    });
  }
  return absl::OkStatus();
}

absl::Status LmHead::ComputeDensePacked(const float* hidden, int64_t rows, const void* packed,
                                        float* logits) const {
  const Impl& impl = *impl_;
  const bool bf16 = impl.options.weights_dtype == DType::kBF16;
  const void* x = hidden;
  if (bf16) {
    absl::StatusOr<const uint16_t*> converted = Bf16Rows(hidden, rows * impl.options.hidden_size);
    if (!converted.ok()) return converted.status();
    x = *converted;
  }
  const int64_t vocab = impl.options.vocab_size;
  const int64_t d = impl.options.hidden_size;
  const int64_t chunk = impl.chunk_rows;
  const int64_t tasks = (vocab + chunk - 1) / chunk;
  // At most kFixedRowsMax rows per pass over the weights (compute-bound
  // there), so the accumulators stay 64 KiB per thread whatever the rows.
  const int64_t pass_rows = std::min(rows, kFixedRowsMax);
  const size_t acc_bytes = static_cast<size_t>(PackedAccFloats(pass_rows)) * sizeof(float);
  const size_t row_bytes = static_cast<size_t>(d) * (bf16 ? 2 : 4);
  std::atomic<bool> oom{false};
  for (int64_t r0 = 0; r0 < rows && !oom.load(); r0 += pass_rows) {
    const int64_t m = std::min(pass_rows, rows - r0);
    const void* xr = static_cast<const uint8_t*>(x) + static_cast<size_t>(r0) * row_bytes;
    float* out = logits + r0 * vocab;
    ParallelForStreams(tasks, [&](int64_t t) {
      auto* acc = static_cast<float*>(ThreadPackedAcc().Get(acc_bytes));
      if (acc == nullptr) {
        oom.store(true);
        return;
      }
      const int64_t v0 = t * chunk, v1 = std::min(vocab, (t + 1) * chunk);
      if (bf16) {
        HeadKernelBf16Packed(static_cast<const uint16_t*>(xr), m,
                             static_cast<const uint16_t*>(packed), d, v0, v1, out, vocab, acc);
      } else {
        HeadKernelF32Packed(static_cast<const float*>(xr), m, static_cast<const float*>(packed),
                            d, v0, v1, out, vocab, acc);
      }
    });
  }
  if (oom.load()) {
    return absl::ResourceExhaustedError(
        absl::StrCat("LmHead: cannot allocate ", acc_bytes, " bytes of packed-kernel accumulators"));
  }
  return absl::OkStatus();
}

}  // namespace vocabd
