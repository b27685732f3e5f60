// LM-head benchmark (docs/performance.md, "Head kernels (head_bench)"):
// vocabd's head (F32, BF16 and ggml-quantized weights) vs OpenBLAS sgemm on
// the same shapes vs the read-only bandwidth floor, all measured in one run,
// for N = 1, 8, 64, 256 rows.
//
//   head_bench --f32 /tmp/vocabd-bench/llama3-f32 --bf16 /tmp/vocabd-bench/llama3-bf16
//              [--rows 1,8,64,256] [--reps 5] [--csv out.csv] [--quant Q8_0,Q4_K,Q6_K]
//              [--quant-paths] [--quant-only [--vocab V --hidden D]] [--allow-busy]
//              [--paths 1,2,4,8,12,16,24,32,64] [--paths-csv paths.csv] [--interleaved 9]
//
// Quantized heads (--quant): the Llama-3 shape (from the F32 checkpoint's
// config, or 128256 x 4096 with --quant-only) of random VALID ggml blocks
// generated in memory (f16 scales in [0.001, 0.02), random codes): the kernels'
// speed does not depend on the values, and no multi-GB file is written
// (tools/vocabd_make_gguf --random writes one when a file is wanted).
// --quant-paths also times every ISA path this CPU has (VOCABD_LM_HEAD_KERNEL)
// at each N.
//
// vocabd's head is what the server runs: the small-M kernel for
// N <= LmHead::kDefaultSmallRowsMax (where the CPU has it), oneDNN above.
// --paths adds a second table timing both implementations at each N (the
// kernel forced on, small_rows_max = N; oneDNN forced, small_rows_max = 0):
// the crossover measurement behind kDefaultSmallRowsMax. --interleaved R
// times the targets' two sides back to back in R rounds (copy vs N = 1,
// N = 8 vs N = 1, F32 vs BF16) and prints the median ratios, which hold up
// better than separate medians when other processes load the machine.
//
// Weights come from the checkpoints through vocabd's own loader (Model),
// read as a server reads them (Model::Options::head_huge_pages: the head's
// copy in huge pages, waited for), BF16 natively. Times are the
// median of --reps runs after one warm-up. GFLOP/s = 2 N V d / time.
// Read-only floor of each weight type = the time to stream a buffer as large
// as its weights with AVX-512 (else AVX2) loads on all OpenMP threads (summed, so the
// loads cannot be dropped), measured in the same run for each size, with
// no software prefetch and with prefetcht0 1, 4 and 16 KiB ahead, the
// fastest taken: the least time any kernel that reads every weight once
// can take.
//
// Compute ceilings, measured in the same run: the F32 FMA peak and the int8
// dot-product peak of every quantized-kernel path the CPU has (vpdpbusd zmm
// / ymm, vpmaddubsw on AVX2); each quantized N >= 64 row prints its int8
// multiply-adds per second (N V d / time) as a share of its path's peak.
// On the avx512vnni path also: the packed kernels' scale instructions
// beside vpdpbusd (each type's ceiling, registers only), vpdpbusd beside
// vector loads, and one unit of the packed kernel's 8-row tile with its
// loads, from L1 (Int8LoadsAvx512, Int8UnitAvx512).
//
// Load: the load average is printed before and after; head_bench refuses to
// start when the 1-minute load average is above 1.5 (the machine is busy:
// no figure would be a result) unless --allow-busy, and then every figure
// of a row measured at load > 1.5 (checked before and after the row) is
// printed BUSY(x) and the exit status is 3.
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>
#include <cblas.h>

#include "lib/core/huge_pages.h"
#include "lib/head/lm_head.h"
#include "lib/head/quant_kernel.h"
#include "lib/quant/ggml_blocks.h"
#include "lib/serving/model.h"

namespace {

using Clock = std::chrono::steady_clock;

// The first three fields of /proc/loadavg ("1.23 0.98 0.77"), for the record:
// the benchmark shares the machine with whatever else runs.
std::string LoadAverage() {
  std::ifstream in("/proc/loadavg");
  std::string a, b, c;
  in >> a >> b >> c;
  return a + " " + b + " " + c;
}

// The 1-minute load average (first field of /proc/loadavg).
double Load1() {
  std::ifstream in("/proc/loadavg");
  double a = 0;
  in >> a;
  return a;
}

// A figure taken while the machine was busy is no result: above this
// 1-minute load average (other processes on a 2-core machine take a core),
// every figure of a table row measured then is printed as "BUSY(x)", and the
// run says so at the end. --allow-busy only lets such a run go on; without
// it head_bench refuses to start at that load.
constexpr double kBusyLoad = 1.5;
bool g_busy_row = false;   // the row being printed was measured at load > kBusyLoad
bool g_any_busy = false;   // some row was

// Formats a figure, marked when the row is busy.
std::string Fig(const char* fmt, double value) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, value);
  return g_busy_row ? std::string("BUSY(") + buf + ")" : std::string(buf);
}

// Call before and after measuring a row: the row is busy when either load
// reading is above kBusyLoad.
void RowLoadStart() { g_busy_row = Load1() > kBusyLoad; }
void RowLoadEnd() {
  g_busy_row = g_busy_row || Load1() > kBusyLoad;
  g_any_busy = g_any_busy || g_busy_row;
}

template <typename F>
double MedianSeconds(int reps, F&& f) {
  f();  // warm-up
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    const auto start = Clock::now();
    f();
    t.push_back(std::chrono::duration<double>(Clock::now() - start).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// The machine's F32 compute ceiling (FLOP/s) on all OpenMP threads:
// independent FMA chains per thread on the widest vectors the CPU has
// (AVX-512: 16 lanes, 16 chains; AVX2 + FMA: 8 lanes, 12 chains, so that
// they and the two operands fit the 16 ymm registers: with 16, GCC kept
// three chains on the stack), registers only, best of 3. It bounds
// every F32 GEMM: N = 256 rows of the Llama-3 head are 269 GFLOP. 0 where
// the CPU has neither.
// One body for both vector widths (each instance compiled for its ISA).
#define VOCABD_FMA_PEAK_BODY(Vec, kLanes, kChains, Set1, Fma, Add, Store)               \
  constexpr long kIters = 20'000'000;                                                     \
  double best = 0;                                                                        \
  for (int rep = 0; rep < 3; ++rep) {                                                     \
    float sink = 0;                                                                       \
    int threads = 1;                                                                      \
    const auto start = Clock::now();                                                      \
    _Pragma("omp parallel reduction(+ : sink)") {                                         \
      _Pragma("omp single") threads = omp_get_num_threads();                              \
      Vec acc[kChains];                                                                   \
      _Pragma("GCC unroll 16") for (int i = 0; i < kChains; ++i) acc[i] =                 \
          Set1(1e-3f * static_cast<float>(i));                                            \
      const Vec a = Set1(0.999999f), b = Set1(1e-7f);                                     \
      for (long it = 0; it < kIters; ++it) {                                              \
        _Pragma("GCC unroll 16") for (int i = 0; i < kChains; ++i) acc[i] =               \
            Fma(acc[i], a, b);                                                            \
      }                                                                                   \
      Vec total = acc[0];                                                                 \
      _Pragma("GCC unroll 16") for (int i = 1; i < kChains; ++i) total = Add(total, acc[i]); \
      alignas(64) float lanes[kLanes];                                                    \
      Store(lanes, total);                                                                \
      for (float l : lanes) sink += l;                                                    \
    }                                                                                     \
    const double s = std::chrono::duration<double>(Clock::now() - start).count();         \
    if (sink == -1.0f) std::printf(" "); /* keeps the chains alive */                     \
    best = std::max(best, 2.0 * kLanes * kChains * static_cast<double>(kIters) * threads / s); \
  }                                                                                       \
  return best;

__attribute__((target("avx512f"))) double FmaPeakAvx512() {
  VOCABD_FMA_PEAK_BODY(__m512, 16, 16, _mm512_set1_ps, _mm512_fmadd_ps, _mm512_add_ps,
                       _mm512_store_ps)
}
__attribute__((target("avx2,fma"))) double FmaPeakAvx2() {
  VOCABD_FMA_PEAK_BODY(__m256, 8, 12, _mm256_set1_ps, _mm256_fmadd_ps, _mm256_add_ps,
                       _mm256_store_ps)
}
#undef VOCABD_FMA_PEAK_BODY

// Which vectors FmaPeak and the read-only floor use on this CPU.
const char* VectorIsa() {
  if (__builtin_cpu_supports("avx512f")) return "avx512f";
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "avx2";
  return "none";
}

double FmaPeak() {
  const std::string isa = VectorIsa();
  if (isa == "avx512f") return FmaPeakAvx512();
  if (isa == "avx2") return FmaPeakAvx2();
  return 0;
}

// The machine's int8 dot-product ceiling (int8 multiply-adds per second) on
// all OpenMP threads, for the instruction the quantized kernels use on each
// path: independent accumulator chains per thread, registers only, best of 3.
// One "MAC" is one u8 x s8 product added into an int32 lane:
//   avx512vnni  vpdpbusd zmm        64 MACs per instruction, 16 chains
//   avxvnni     vpdpbusd ymm (VEX)  32 MACs per instruction, 12 chains
//   avx2        vpmaddubsw + vpmaddwd + vpaddd on ymm: 32 MACs per 3
//               instructions (the AVX2 form of the same u8 x s8 dot
//               product), 6 chains
// 0 where the CPU lacks the path.
// The loops are written in assembly: compiled from intrinsics (an array of
// accumulators), GCC 12 kept some chains on the stack and stored / reloaded
// them every iteration, which put store-forwarding latency into them: it
// measured 391-418 GMAC/s on a Zen 5 core whose vpdpbusd zmm runs 1,100.
template <typename Body>
double Int8PeakRun(Body body, double macs_per_iter_per_thread) {
  double best = 0;
  for (int rep = 0; rep < 3; ++rep) {
    int threads = 1;
    const auto start = Clock::now();
#pragma omp parallel
    {
#pragma omp single
      threads = omp_get_num_threads();
      body();
    }
    const double s = std::chrono::duration<double>(Clock::now() - start).count();
    best = std::max(best, macs_per_iter_per_thread * threads / s);
  }
  return best;
}

constexpr long kInt8Iters = 10'000'000;

#define VOCABD_DP(acc) "vpdpbusd %%zmm17, %%zmm16, %%zmm" #acc "\n\t"
// 16 vpdpbusd zmm per iteration, one per accumulator zmm0..zmm15.
__attribute__((target("avx512f,avx512bw,avx512vnni"))) void Int8ChainsAvx512() {
  long iters = kInt8Iters;
  __asm__ volatile(
      "vpternlogd $0xff, %%zmm16, %%zmm16, %%zmm16\n\t"  // a: all bytes 0xff
      "vpternlogd $0xff, %%zmm17, %%zmm17, %%zmm17\n\t"  // b: all bytes -1
      "1:\n\t" VOCABD_DP(0) VOCABD_DP(1) VOCABD_DP(2) VOCABD_DP(3) VOCABD_DP(4) VOCABD_DP(5)
          VOCABD_DP(6) VOCABD_DP(7) VOCABD_DP(8) VOCABD_DP(9) VOCABD_DP(10) VOCABD_DP(11)
              VOCABD_DP(12) VOCABD_DP(13) VOCABD_DP(14) VOCABD_DP(15)
      "dec %0\n\t"
      "jnz 1b\n\t"
      "vzeroupper\n\t"
      : "+r"(iters)
      :
      : "cc", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9",
        "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "xmm16", "xmm17");
}
#undef VOCABD_DP

#define VOCABD_DP(acc) "%{vex%} vpdpbusd %%ymm13, %%ymm12, %%ymm" #acc "\n\t"
// 12 VEX vpdpbusd ymm per iteration, accumulators ymm0..ymm11.
__attribute__((target("avx2,avxvnni"))) void Int8ChainsAvxVnni() {
  long iters = kInt8Iters;
  __asm__ volatile(
      "vpcmpeqb %%ymm12, %%ymm12, %%ymm12\n\t"
      "vpcmpeqb %%ymm13, %%ymm13, %%ymm13\n\t"
      "1:\n\t" VOCABD_DP(0) VOCABD_DP(1) VOCABD_DP(2) VOCABD_DP(3) VOCABD_DP(4) VOCABD_DP(5)
          VOCABD_DP(6) VOCABD_DP(7) VOCABD_DP(8) VOCABD_DP(9) VOCABD_DP(10) VOCABD_DP(11)
      "dec %0\n\t"
      "jnz 1b\n\t"
      "vzeroupper\n\t"
      : "+r"(iters)
      :
      : "cc", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9",
        "xmm10", "xmm11", "xmm12", "xmm13");
}
#undef VOCABD_DP

// t = maddubs(a, b); t = madd(t, ones); acc += t: 6 accumulators ymm0..5,
// temporaries ymm6..11, a / b / the word multiplier (-1, all bits set) in
// ymm12..14.
#define VOCABD_DP(acc, t)                              \
  "vpmaddubsw %%ymm13, %%ymm12, %%ymm" #t "\n\t"       \
  "vpmaddwd %%ymm14, %%ymm" #t ", %%ymm" #t "\n\t"     \
  "vpaddd %%ymm" #t ", %%ymm" #acc ", %%ymm" #acc "\n\t"
__attribute__((target("avx2"))) void Int8ChainsAvx2() {
  long iters = kInt8Iters;
  __asm__ volatile(
      "vpcmpeqb %%ymm12, %%ymm12, %%ymm12\n\t"
      "vpcmpeqb %%ymm13, %%ymm13, %%ymm13\n\t"
      "vpcmpeqw %%ymm14, %%ymm14, %%ymm14\n\t"
      "1:\n\t" VOCABD_DP(0, 6) VOCABD_DP(1, 7) VOCABD_DP(2, 8) VOCABD_DP(3, 9)
          VOCABD_DP(4, 10) VOCABD_DP(5, 11)
      "dec %0\n\t"
      "jnz 1b\n\t"
      "vzeroupper\n\t"
      : "+r"(iters)
      :
      : "cc", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9",
        "xmm10", "xmm11", "xmm12", "xmm13", "xmm14");
}
#undef VOCABD_DP

// The packed kernels' ceiling on the avx512vnni path: vpdpbusd zmm with
// the multiplies the kernel adds per 8 of them (one input row, 32 codes;
// quant_kernel_avx512packed.cc): scales per 32 codes, a vmulps (weight
// scale x activation scale) and a vfmadd, one more vfmadd for a min (Q4_1,
// Q5_1, Q4_K, Q5_K); Q3_K's two 16-code halves, a vpmaddwd (sums x integer
// scales) and a vfmadd (x da); Q2_K the same twice (its mins); Q6_K two
// vpmulld and a vfmadd. The converts, adds, blends and code cuts run on
// other pipes. Where these share the pipes of vpdpbusd (on a Zen 5 core:
// 16 vpdpbusd take 8 cycles, 2 vmulps, vfmadd, vpmulld or vpmaddwd more
// add one), this bounds the many-row kernel below the peak.
// Per 16 vpdpbusd: F0..F3, the instructions after each 4 of them.
#define VOCABD_DP(acc) "vpdpbusd %%zmm17, %%zmm16, %%zmm" #acc "\n\t"
#define VOCABD_MUL(r) "vmulps %%zmm23, %%zmm22, %%zmm" #r "\n\t"
#define VOCABD_FMA(r) "vfmadd231ps %%zmm23, %%zmm22, %%zmm" #r "\n\t"
#define VOCABD_MADDWD(r) "vpmaddwd %%zmm23, %%zmm22, %%zmm" #r "\n\t"
#define VOCABD_MULLD(r) "vpmulld %%zmm23, %%zmm22, %%zmm" #r "\n\t"
#define VOCABD_DP4(a, b, c, d) VOCABD_DP(a) VOCABD_DP(b) VOCABD_DP(c) VOCABD_DP(d)
#define VOCABD_INT8_MIX(Name, F0, F1, F2, F3)                                                  \
  __attribute__((target("avx512f,avx512bw,avx512vnni"))) void Name() {                        \
    long iters = kInt8Iters;                                                                   \
    __asm__ volatile(                                                                          \
        "vpternlogd $0xff, %%zmm16, %%zmm16, %%zmm16\n\t"                                      \
        "vpternlogd $0xff, %%zmm17, %%zmm17, %%zmm17\n\t"                                      \
        "vpxord %%zmm22, %%zmm22, %%zmm22\n\t"                                                 \
        "vpxord %%zmm23, %%zmm23, %%zmm23\n\t"                                                 \
        "1:\n\t" VOCABD_DP4(0, 1, 2, 3) F0 VOCABD_DP4(4, 5, 6, 7) F1 VOCABD_DP4(8, 9, 10, 11) F2 \
            VOCABD_DP4(12, 13, 14, 15) F3 "dec %0\n\t"                                         \
        "jnz 1b\n\t"                                                                           \
        "vzeroupper\n\t"                                                                       \
        : "+r"(iters)                                                                          \
        :                                                                                      \
        : "cc", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", \
          "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "xmm16", "xmm17", "xmm18",     \
          "xmm19", "xmm20", "xmm21", "xmm22", "xmm23", "xmm24", "xmm25", "xmm26", "xmm27",     \
          "xmm28", "xmm29", "xmm30", "xmm31");                                                 \
  }
// 2 vmulps + 2 vfmadd per 16 vpdpbusd: scales per 32 codes, no min.
VOCABD_INT8_MIX(Int8MixPer32, VOCABD_MUL(18), VOCABD_FMA(20), VOCABD_MUL(19), VOCABD_FMA(21))
// + 2 vfmadd: per 32 codes with a min.
VOCABD_INT8_MIX(Int8MixPer32Min, VOCABD_MUL(18) VOCABD_FMA(20), VOCABD_FMA(24),
                VOCABD_MUL(19) VOCABD_FMA(21), VOCABD_FMA(25))
// 2 vpmaddwd + 2 vfmadd: Q3_K.
VOCABD_INT8_MIX(Int8MixPer16Pairs, VOCABD_MADDWD(18), VOCABD_FMA(20), VOCABD_MADDWD(19),
                VOCABD_FMA(21))
// 4 vpmaddwd + 4 vfmadd: Q2_K (scales and mins).
VOCABD_INT8_MIX(Int8MixPer16PairsMin, VOCABD_MADDWD(18) VOCABD_FMA(20),
                VOCABD_MADDWD(19) VOCABD_FMA(21), VOCABD_MADDWD(26) VOCABD_FMA(24),
                VOCABD_MADDWD(27) VOCABD_FMA(25))
// 4 vpmulld + 2 vfmadd: Q6_K.
VOCABD_INT8_MIX(Int8MixPer16Int32, VOCABD_MULLD(18) VOCABD_MULLD(26), VOCABD_FMA(20),
                VOCABD_MULLD(19) VOCABD_MULLD(27), VOCABD_FMA(21))
// The vector loads beside the packed kernel's vpdpbusd. Each vpdpbusd of
// the kernel takes its activation codes as a broadcast load ({1to16}), and
// a unit of an 8-row tile loads its code vectors, the rows' -o s and da
// (quant_kernel_avx512packed.cc): for Q8_0 89 vector loads per 64
// vpdpbusd. A core that issues two vector loads per cycle (a broadcast
// counts as one) and two vpdpbusd per cycle is then bound by its loads.
// Int8LoadsAvx512: 16 vpdpbusd (registers) and 20 vector broadcast loads
// per iteration (at two loads per cycle: 80% of the peak). Int8UnitAvx512:
// the per-32 kernel's unit of 8 input rows in the Q8_0 form, from a buffer
// in L1: 8 code vectors, 8 broadcasts of -o s (each row's chain start), 64
// vpdpbusd with broadcast activations (8 chains, one per row, restarted
// every unit), the f16 scales, and per row a vmulps by the broadcast da, a
// convert and a vfmadd into the row's accumulator.
alignas(64) const int8_t kUnitBuffer[16384] = {};
// The loops' end: count down `iters`, read kUnitBuffer (%1), every vector
// register clobbered.
#define VOCABD_UNIT_LOOP_END                                                                   \
  "dec %0\n\tjnz 1b\n\tvzeroupper\n\t"                                                         \
      : "+r"(iters)                                                                            \
      : "r"(kUnitBuffer)                                                                       \
      : "cc", "memory", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", \
        "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "xmm16", "xmm17", "xmm18", \
        "xmm19", "xmm20", "xmm21", "xmm22", "xmm23", "xmm24", "xmm25", "xmm26", "xmm27",        \
        "xmm28", "xmm29", "xmm30", "xmm31"
#define VOCABD_LD(r, off) "vpbroadcastd " #off "(%1), %%zmm" #r "\n\t"
__attribute__((target("avx512f,avx512bw,avx512vnni"))) void Int8LoadsAvx512() {
  long iters = kInt8Iters;
  __asm__ volatile(
      "vpxord %%zmm16, %%zmm16, %%zmm16\n\t"
      "vpxord %%zmm17, %%zmm17, %%zmm17\n\t"
      "1:\n\t" VOCABD_DP4(0, 1, 2, 3) VOCABD_LD(20, 0) VOCABD_LD(21, 64) VOCABD_LD(22, 128)
          VOCABD_LD(23, 192) VOCABD_LD(24, 256) VOCABD_DP4(4, 5, 6, 7) VOCABD_LD(25, 320)
              VOCABD_LD(26, 384) VOCABD_LD(27, 448) VOCABD_LD(28, 512) VOCABD_LD(29, 576)
                  VOCABD_DP4(8, 9, 10, 11) VOCABD_LD(20, 640) VOCABD_LD(21, 704) VOCABD_LD(22, 768)
                      VOCABD_LD(23, 832) VOCABD_LD(24, 896) VOCABD_DP4(12, 13, 14, 15)
                          VOCABD_LD(25, 960) VOCABD_LD(26, 1024) VOCABD_LD(27, 1088)
                              VOCABD_LD(28, 1152) VOCABD_LD(29, 1216) VOCABD_UNIT_LOOP_END);
}
#undef VOCABD_LD
// Unit layout in kUnitBuffer: activations [8 rows][32] at 0, code vectors
// W[c] at 512 + 64 c, -o s at 4096 + 4 m, the f16 scales at 8192, da at
// 8448 + 4 m. Sums in zmm0..7, accumulators zmm8..15, W in zmm16..23.
#define VOCABD_W(c, w) "vmovdqa64 512+" #c "*64(%1), %%zmm" #w "\n\t"
#define VOCABD_INIT(m) "vpbroadcastd 4096+" #m "*4(%1), %%zmm" #m "\n\t"
#define VOCABD_RD(m, c, w) "vpdpbusd " #m "*32+" #c "*4(%1)%{1to16%}, %%zmm" #w ", %%zmm" #m "\n\t"
#define VOCABD_RD8(c, w)                                                                  \
  VOCABD_RD(0, c, w) VOCABD_RD(1, c, w) VOCABD_RD(2, c, w) VOCABD_RD(3, c, w) VOCABD_RD(4, c, w) \
      VOCABD_RD(5, c, w) VOCABD_RD(6, c, w) VOCABD_RD(7, c, w)
#define VOCABD_ACC(m, acc)                                    \
  "vmulps 8448+" #m "*4(%1)%{1to16%}, %%zmm24, %%zmm25\n\t" \
  "vcvtdq2ps %%zmm" #m ", %%zmm26\n\t"                       \
  "vfmadd231ps %%zmm25, %%zmm26, %%zmm" #acc "\n\t"
__attribute__((target("avx512f,avx512bw,avx512vnni"))) void Int8UnitAvx512() {
  long iters = kInt8Iters / 4;
  __asm__ volatile(
      "1:\n\t" VOCABD_W(0, 16) VOCABD_W(1, 17) VOCABD_W(2, 18) VOCABD_W(3, 19) VOCABD_W(4, 20)
          VOCABD_W(5, 21) VOCABD_W(6, 22) VOCABD_W(7, 23) VOCABD_INIT(0) VOCABD_INIT(1)
              VOCABD_INIT(2) VOCABD_INIT(3) VOCABD_INIT(4) VOCABD_INIT(5) VOCABD_INIT(6)
                  VOCABD_INIT(7) VOCABD_RD8(0, 16) VOCABD_RD8(1, 17) VOCABD_RD8(2, 18)
                      VOCABD_RD8(3, 19) VOCABD_RD8(4, 20) VOCABD_RD8(5, 21) VOCABD_RD8(6, 22)
                          VOCABD_RD8(7, 23) "vcvtph2ps 8192(%1), %%zmm24\n\t" VOCABD_ACC(0, 8)
                              VOCABD_ACC(1, 9) VOCABD_ACC(2, 10) VOCABD_ACC(3, 11) VOCABD_ACC(4, 12)
                                  VOCABD_ACC(5, 13) VOCABD_ACC(6, 14) VOCABD_ACC(7, 15)
                                      VOCABD_UNIT_LOOP_END);
}
#undef VOCABD_UNIT_LOOP_END
#undef VOCABD_ACC
#undef VOCABD_RD8
#undef VOCABD_RD
#undef VOCABD_INIT
#undef VOCABD_W
#undef VOCABD_INT8_MIX
#undef VOCABD_DP4
#undef VOCABD_MULLD
#undef VOCABD_MADDWD
#undef VOCABD_FMA
#undef VOCABD_MUL
#undef VOCABD_DP

// The mixes above, by kind: 0 per 32 codes, 1 with a min, 2 Q3_K, 3 Q2_K,
// 4 Q6_K.
constexpr int kPackedMixes = 5;
int PackedMix(vocabd::quant::GgmlType t) {
  using vocabd::quant::GgmlType;
  if (t == GgmlType::kQ3_K) return 2;
  if (t == GgmlType::kQ2_K) return 3;
  if (t == GgmlType::kQ6_K) return 4;
  const bool min = t == GgmlType::kQ4_1 || t == GgmlType::kQ5_1 || t == GgmlType::kQ4_K ||
                   t == GgmlType::kQ5_K;
  return min ? 1 : 0;
}
const char* const kPackedMixNames[kPackedMixes] = {
    "per 32 codes", "per 32 with a min", "per 16, int16 pairs (Q3_K)",
    "per 16, int16 pairs with a min (Q2_K)", "per 16, int32 (Q6_K)"};
// 0 without the avx512vnni path.
double Int8MixPeak(int mix) {
  if (!vocabd::QuantKernelIsaSupported(vocabd::QuantKernelIsa::kAvx512Vnni)) return 0;
  const double macs = static_cast<double>(kInt8Iters) * 16 * 64;
  switch (mix) {
    case 0: return Int8PeakRun(Int8MixPer32, macs);
    case 1: return Int8PeakRun(Int8MixPer32Min, macs);
    case 2: return Int8PeakRun(Int8MixPer16Pairs, macs);
    case 3: return Int8PeakRun(Int8MixPer16PairsMin, macs);
    default: return Int8PeakRun(Int8MixPer16Int32, macs);
  }
}

// {loads beside vpdpbusd, the 8-row unit} in GMAC/s; 0 without the
// avx512vnni path.
struct LoadCeilings {
  double loads = 0, unit = 0;
};
LoadCeilings Int8LoadCeilings() {
  if (!vocabd::QuantKernelIsaSupported(vocabd::QuantKernelIsa::kAvx512Vnni)) return {};
  return {Int8PeakRun(Int8LoadsAvx512, static_cast<double>(kInt8Iters) * 16 * 64),
          Int8PeakRun(Int8UnitAvx512, static_cast<double>(kInt8Iters / 4) * 64 * 64)};
}

double Int8Peak(vocabd::QuantKernelIsa isa) {
  if (!vocabd::QuantKernelIsaSupported(isa)) return 0;
  const double iters = static_cast<double>(kInt8Iters);
  switch (isa) {
    case vocabd::QuantKernelIsa::kAvx512Vnni: return Int8PeakRun(Int8ChainsAvx512, iters * 16 * 64);
    case vocabd::QuantKernelIsa::kAvxVnni: return Int8PeakRun(Int8ChainsAvxVnni, iters * 12 * 32);
    case vocabd::QuantKernelIsa::kAvx2: return Int8PeakRun(Int8ChainsAvx2, iters * 6 * 32);
    case vocabd::QuantKernelIsa::kScalar: return 0;
  }
  return 0;
}

// Streams [buf, buf + bytes) once with 64-byte loads (one zmm, or two ymm
// without AVX-512) on all OpenMP threads (each its contiguous share),
// XOR-folding everything so the loads stay; pf > 0: each line is
// prefetched (prefetcht0) pf bytes ahead of its load. Returns the fold
// (callers print nothing of it; it keeps it live).
__attribute__((target("avx512f"))) uint64_t StreamReadAvx512(const char* buf, size_t bytes,
                                                             size_t pf) {
  uint64_t fold = 0;
#pragma omp parallel reduction(^ : fold)
  {
    const size_t n = omp_get_num_threads(), id = omp_get_thread_num();
    const size_t lines = bytes / 64;
    const size_t begin = lines * id / n, end = lines * (id + 1) / n;
    __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
    size_t i = begin;
    for (; i + 4 <= end; i += 4) {
      const char* p = buf + i * 64;
      if (pf > 0) {
        for (size_t b = 0; b < 256; b += 64) _mm_prefetch(p + pf + b, _MM_HINT_T0);
      }
      a0 = _mm512_xor_si512(a0, _mm512_load_si512(p));
      a1 = _mm512_xor_si512(a1, _mm512_load_si512(p + 64));
      a2 = _mm512_xor_si512(a2, _mm512_load_si512(p + 128));
      a3 = _mm512_xor_si512(a3, _mm512_load_si512(p + 192));
    }
    for (; i < end; ++i) a0 = _mm512_xor_si512(a0, _mm512_load_si512(buf + i * 64));
    a0 = _mm512_xor_si512(_mm512_xor_si512(a0, a1), _mm512_xor_si512(a2, a3));
    alignas(64) uint64_t lanes[8];
    _mm512_store_si512(lanes, a0);
    for (uint64_t l : lanes) fold ^= l;
  }
  return fold;
}

__attribute__((target("avx2"))) uint64_t StreamReadAvx2(const char* buf, size_t bytes,
                                                         size_t pf) {
  uint64_t fold = 0;
#pragma omp parallel reduction(^ : fold)
  {
    const size_t n = omp_get_num_threads(), id = omp_get_thread_num();
    const size_t lines = bytes / 64;
    const size_t begin = lines * id / n, end = lines * (id + 1) / n;
    __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
    size_t i = begin;
    for (; i + 2 <= end; i += 2) {
      if (pf > 0) {
        _mm_prefetch(buf + i * 64 + pf, _MM_HINT_T0);
        _mm_prefetch(buf + i * 64 + pf + 64, _MM_HINT_T0);
      }
      const auto* p = reinterpret_cast<const __m256i*>(buf + i * 64);
      a0 = _mm256_xor_si256(a0, _mm256_load_si256(p));
      a1 = _mm256_xor_si256(a1, _mm256_load_si256(p + 1));
      a2 = _mm256_xor_si256(a2, _mm256_load_si256(p + 2));
      a3 = _mm256_xor_si256(a3, _mm256_load_si256(p + 3));
    }
    for (; i < end; ++i) {
      const auto* p = reinterpret_cast<const __m256i*>(buf + i * 64);
      a0 = _mm256_xor_si256(a0, _mm256_load_si256(p));
      a1 = _mm256_xor_si256(a1, _mm256_load_si256(p + 1));
    }
    a0 = _mm256_xor_si256(_mm256_xor_si256(a0, a1), _mm256_xor_si256(a2, a3));
    alignas(32) uint64_t lanes[4];
    _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), a0);
    for (uint64_t l : lanes) fold ^= l;
  }
  return fold;
}

uint64_t StreamRead(const char* buf, size_t bytes, size_t pf) {
  return std::string(VectorIsa()) == "avx512f" ? StreamReadAvx512(buf, bytes, pf)
                                               : StreamReadAvx2(buf, bytes, pf);
}

// The floor's buffer: huge pages (lib/core/huge_pages.h), as the LmHead's
// served tables, touched page by page from all threads.
struct ReadBuffer {
  vocabd::HugePageBuffer mem;
  char* data = nullptr;
  size_t bytes = 0;
  explicit ReadBuffer(size_t n) : bytes(n) {
    auto b = vocabd::HugePageBuffer::Allocate(n, "the read-only floor's buffer");
    if (!b.ok()) {
      std::fprintf(stderr, "%s\n", b.status().ToString().c_str());
      std::exit(1);
    }
    mem = std::move(*b);
    data = reinterpret_cast<char*>(mem.data());
#pragma omp parallel for
    for (long i = 0; i < static_cast<long>(n); i += 4096) data[i] = static_cast<char>(i >> 12);
  }
};

// The prefetch distances the floor loop tries (0: none), in bytes.
constexpr size_t kFloorPrefetch[] = {0, 1024, 4096, 16384};

// Seconds to stream `bytes` of `buf` (the read-only floor for a weight
// matrix of that size): the least, over the prefetch distances
// kFloorPrefetch, of the median of `reps` runs (the hardware prefetchers
// alone do not reach the memory's rate on every core: on a Zen 5 VM,
// software prefetch made the loop up to 1.3x faster); *pf_used gets the
// winning distance.
double ReadFloor(const ReadBuffer& buf, size_t bytes, int reps, size_t* pf_used) {
  volatile uint64_t sink = 0;
  double best = 1e30;
  for (size_t pf : kFloorPrefetch) {
    const double t = MedianSeconds(reps, [&] { sink = sink ^ StreamRead(buf.data, bytes, pf); });
    if (t < best) best = t, *pf_used = pf;
  }
  return best;
}

// The AnonHugePages line of /proc/meminfo (memory in transparent huge
// pages now), or a note that it could not be read.
std::string AnonHugePages() {
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("AnonHugePages:", 0) == 0) return "/proc/meminfo " + line;
  }
  return "AnonHugePages unknown";
}

// "no prefetch" or "prefetch N KiB ahead".
std::string PrefetchText(size_t pf) {
  return pf == 0 ? "no prefetch" : "prefetch " + std::to_string(pf / 1024) + " KiB ahead";
}

// Random valid ggml blocks of `type` for a vocab x hidden head (see the
// header comment), generated on all threads.
std::vector<uint8_t> RandomQuantHead(const vocabd::QuantTypeInfo& info, int64_t vocab,
                                     int64_t hidden) {
  const int64_t per_row = hidden / info.block_size;
  std::vector<uint8_t> w(static_cast<size_t>(vocab * per_row * info.block_bytes));
  // Offsets of the f16 scale fields in each block (lib/quant/ggml_blocks.h).
  std::vector<int> f16_fields;
  using vocabd::quant::GgmlType;
  switch (info.type) {
    case GgmlType::kQ4_1: case GgmlType::kQ5_1: case GgmlType::kQ4_K: case GgmlType::kQ5_K:
      f16_fields = {0, 2}; break;
    case GgmlType::kQ2_K: f16_fields = {80, 82}; break;
    case GgmlType::kQ3_K: f16_fields = {108}; break;
    case GgmlType::kQ6_K: f16_fields = {208}; break;
    default: f16_fields = {0}; break;
  }
#pragma omp parallel for schedule(static)
  for (long row = 0; row < static_cast<long>(vocab); ++row) {
    std::mt19937 rng(static_cast<uint32_t>(row));
    std::uniform_real_distribution<float> scale(0.001f, 0.02f);
    uint8_t* r = w.data() + row * per_row * info.block_bytes;
    for (int64_t i = 0; i < per_row * info.block_bytes; ++i) r[i] = static_cast<uint8_t>(rng());
    for (int64_t b = 0; b < per_row; ++b) {
      for (int off : f16_fields) {
        const uint16_t h = vocabd::FloatToHalf(scale(rng));
        std::memcpy(r + b * info.block_bytes + off, &h, 2);
      }
    }
  }
  return w;
}

std::unique_ptr<vocabd::LmHead> QuantHead(const uint8_t* w, vocabd::quant::GgmlType type,
                                          int64_t vocab, int64_t hidden) {
  vocabd::LmHead::Options o;
  o.weights = w;
  o.vocab_size = vocab;
  o.hidden_size = hidden;
  o.weights_quant = type;
  auto head = vocabd::LmHead::Create(o);
  if (!head.ok()) {
    std::fprintf(stderr, "%s\n", head.status().ToString().c_str());
    std::exit(1);
  }
  return std::move(*head);
}

std::unique_ptr<vocabd::LmHead> HeadOf(const vocabd::Model& m, int64_t small_rows_max = -1) {
  const vocabd::WeightTensor& w = m.checkpoint().lm_head();
  vocabd::LmHead::Options o;
  m.WaitForHeadCopy();
  o.weights = m.lm_head().weights();  // what the model's head reads
  o.weights_dtype = w.dtype;
  o.vocab_size = m.config().vocab_size;
  o.hidden_size = m.config().hidden_size;
  o.small_rows_max = small_rows_max;
  auto head = vocabd::LmHead::Create(o);
  if (!head.ok()) {
    std::fprintf(stderr, "%s\n", head.status().ToString().c_str());
    std::exit(1);
  }
  return std::move(*head);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"vocabd LM-head benchmark. Quantized heads (--quant) are random valid ggml blocks "
               "generated in memory (no file is written)."};
  std::string f32_path = "/tmp/vocabd-bench/llama3-f32";
  std::string bf16_path = "/tmp/vocabd-bench/llama3-bf16";
  std::vector<int64_t> rows_list = {1, 8, 64, 256};
  int reps = 5;
  std::string csv;
  std::vector<int64_t> paths_rows;
  std::string paths_csv;
  std::vector<std::string> quant_names = {"Q8_0", "Q4_K", "Q6_K"};
  bool quant_paths = false, quant_only = false, allow_busy = false;
  app.add_option("--paths", paths_rows,
                 "also time the small-M kernel vs oneDNN at these N (crossover table)")
      ->delimiter(',');
  app.add_option("--paths-csv", paths_csv, "write the crossover table as CSV here");
  int rounds = 0;
  app.add_option("--interleaved", rounds,
                 "also measure the target ratios in this many interleaved rounds (median)");
  app.add_option("--f32", f32_path, "F32 checkpoint folder")->capture_default_str();
  app.add_option("--bf16", bf16_path, "BF16 checkpoint folder")->capture_default_str();
  app.add_option("--rows", rows_list, "row counts N")->delimiter(',')->capture_default_str();
  app.add_option("--reps", reps, "timed repetitions per point (median)")->capture_default_str();
  app.add_option("--csv", csv, "also write the table as CSV here");
  app.add_option("--quant", quant_names,
                 "ggml types of the quantized heads (random valid blocks made in memory, "
                 "Llama-3 shape); empty: none")
      ->delimiter(',')->capture_default_str();
  app.add_flag("--quant-paths", quant_paths,
               "also time every quantized-kernel ISA path this CPU has");
  app.add_flag("--quant-only", quant_only,
               "no F32/BF16 checkpoints (128256 x 4096): quantized heads only");
  int64_t shape_vocab = 128256, shape_hidden = 4096;
  app.add_option("--vocab", shape_vocab, "with --quant-only: vocab_size of the quantized heads")
      ->capture_default_str();
  app.add_option("--hidden", shape_hidden,
                 "with --quant-only: hidden_size (a multiple of 256) of the quantized heads")
      ->capture_default_str();
  app.add_flag("--allow-busy", allow_busy,
               "run even when the 1-minute load average is above 1.5 (every figure measured "
               "then is printed BUSY(x): not a result)");
  CLI11_PARSE(app, argc, argv);
  std::printf("load average before: %s\n", LoadAverage().c_str());
  if (Load1() > kBusyLoad && !allow_busy) {
    std::fprintf(stderr,
                 "head_bench: 1-minute load average %.2f > %.1f: the machine is busy and no "
                 "figure would be a result. Run when it is idle, or pass --allow-busy to get "
                 "figures marked BUSY.\n",
                 Load1(), kBusyLoad);
    return 2;
  }

  std::unique_ptr<vocabd::Model> f32, bf16;
  std::unique_ptr<vocabd::LmHead> head32, head16;
  int64_t v = 128256, d = 4096;
  if (quant_only) {
    v = shape_vocab;
    d = shape_hidden;
  } else {
    auto f = vocabd::Model::Create({"f32", f32_path});
    if (!f.ok()) {
      std::fprintf(stderr, "%s\n", f.status().ToString().c_str());
      return 1;
    }
    auto b = vocabd::Model::Create({"bf16", bf16_path});
    if (!b.ok()) {
      std::fprintf(stderr, "%s\n", b.status().ToString().c_str());
      return 1;
    }
    f32 = std::move(*f);
    bf16 = std::move(*b);
    head32 = HeadOf(*f32);
    head16 = HeadOf(*bf16);
    v = head32->vocab_size();
    d = head32->hidden_size();
  }
  struct QuantCase {
    std::string name;
    const vocabd::QuantTypeInfo* info = nullptr;
    std::vector<uint8_t> w;
    std::unique_ptr<vocabd::LmHead> head;
    double floor = 0;
    size_t floor_pf = 0;  // the floor loop's fastest prefetch distance
    double create_ms = 0;  // LmHead::Create (packing and the measured crossover)
    std::vector<double> ms;  // per rows_list entry
  };
  std::vector<QuantCase> quants;
  for (const std::string& name : quant_names) {
    if (name.empty()) continue;  // --quant "": none
    const vocabd::QuantTypeInfo* info = nullptr;
    for (uint32_t id = 0; id < 64 && info == nullptr; ++id) {
      const auto* i = vocabd::FindQuantTypeInfo(static_cast<vocabd::quant::GgmlType>(id));
      if (i != nullptr && name == i->name) info = i;
    }
    if (info == nullptr) {
      std::fprintf(stderr, "--quant: unknown or unserved ggml type '%s'\n", name.c_str());
      return 1;
    }
    QuantCase q;
    q.name = name;
    q.info = info;
    q.w = RandomQuantHead(*info, v, d);
    const auto t0 = std::chrono::steady_clock::now();
    q.head = QuantHead(q.w.data(), info->type, v, d);
    q.create_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    quants.push_back(std::move(q));
  }
  const int threads = omp_get_max_threads();
  openblas_set_num_threads(threads);
  std::printf("shape V=%ld d=%ld, %d threads\n", static_cast<long>(v), static_cast<long>(d),
              threads);
  if (!quant_only) {
    std::printf("F32 head: %s\nBF16 head: %s (%s)\n", head32->implementation().c_str(),
                head16->implementation().c_str(),
                std::string(vocabd::DTypeName(head16->weights_dtype())).c_str());
    std::printf("weights read from: F32 %s, BF16 %s; %s\n", f32->head_memory().c_str(),
                bf16->head_memory().c_str(), AnonHugePages().c_str());
  }
  std::printf("quantized-kernel paths on this CPU:");
  for (auto isa : {vocabd::QuantKernelIsa::kAvx512Vnni, vocabd::QuantKernelIsa::kAvxVnni,
                   vocabd::QuantKernelIsa::kAvx2, vocabd::QuantKernelIsa::kScalar}) {
    if (vocabd::QuantKernelIsaSupported(isa)) std::printf(" %s", vocabd::QuantKernelIsaName(isa));
  }
  std::printf("\n");
  for (const QuantCase& q : quants) {
    std::printf("%s head (%.1f MB, LmHead::Create %.0f ms): %s\n", q.name.c_str(),
                q.head->weight_bytes() / 1e6, q.create_ms, q.head->implementation().c_str());
  }
  // The read-only floors, one buffer as large as the largest weights.
  size_t max_bytes = 0;
  if (!quant_only) max_bytes = static_cast<size_t>(head32->weight_bytes());
  for (const QuantCase& q : quants) max_bytes = std::max(max_bytes, static_cast<size_t>(q.head->weight_bytes()));
  ReadBuffer rbuf(max_bytes);
  StreamRead(rbuf.data, rbuf.bytes, 0);
  std::printf("load average at start: %s\n", LoadAverage().c_str());
  double floor32 = 0, floor16 = 0;
  size_t floor32_pf = 0, floor16_pf = 0;
  if (!quant_only) {
    RowLoadStart();
    floor32 = ReadFloor(rbuf, static_cast<size_t>(head32->weight_bytes()), reps, &floor32_pf);
    floor16 = ReadFloor(rbuf, static_cast<size_t>(head16->weight_bytes()), reps, &floor16_pf);
    RowLoadEnd();
    std::printf("read-only floor (%s loads, %d threads): F32 %s ms (%s GB/s, %s), BF16 %s ms (%s)\n",
                VectorIsa(), threads, Fig("%.1f", floor32 * 1e3).c_str(),
                Fig("%.1f", head32->weight_bytes() / floor32 / 1e9).c_str(),
                PrefetchText(floor32_pf).c_str(), Fig("%.1f", floor16 * 1e3).c_str(),
                PrefetchText(floor16_pf).c_str());
  }
  for (QuantCase& q : quants) {
    RowLoadStart();
    q.floor = ReadFloor(rbuf, static_cast<size_t>(q.head->weight_bytes()), reps, &q.floor_pf);
    RowLoadEnd();
    std::printf("read-only floor %s %s ms (%s GB/s, %s loads, %s)\n", q.name.c_str(),
                Fig("%.1f", q.floor * 1e3).c_str(),
                Fig("%.1f", q.head->weight_bytes() / q.floor / 1e9).c_str(), VectorIsa(),
                PrefetchText(q.floor_pf).c_str());
  }
  std::printf("\n");

  std::mt19937 rng(1);
  std::normal_distribution<float> dist;
  int64_t max_rows = *std::max_element(rows_list.begin(), rows_list.end());
  for (int64_t n : paths_rows) max_rows = std::max(max_rows, n);
  if (rounds > 0) max_rows = std::max<int64_t>(max_rows, 8);
  std::vector<float> x(static_cast<size_t>(max_rows * d));
  for (float& e : x) e = dist(rng);
  std::vector<float> out(static_cast<size_t>(max_rows * v));

  std::vector<double> bf16_ms(rows_list.size(), 0.0);
  std::ofstream csv_out;
  if (!csv.empty()) {
    csv_out.open(csv);
    csv_out << "rows,f32_ms,bf16_ms,openblas_ms,floor_f32_ms,floor_bf16_ms\n";
  }
  if (!quant_only) {
    std::printf("| N | vocabd F32 ms | GFLOP/s | vocabd BF16 ms | GFLOP/s | OpenBLAS sgemm ms | "
                "GFLOP/s | F32 vs OpenBLAS | BF16 speedup | F32 / floor | BF16 / floor |\n");
    std::printf("|---|---|---|---|---|---|---|---|---|---|---|\n");
    const float* w32 = static_cast<const float*>(f32->lm_head().weights());  // as vocabd's
    for (size_t i = 0; i < rows_list.size(); ++i) {
      const int64_t n = rows_list[i];
      const int r = n >= 64 ? std::max(1, reps / 2) : reps;
      RowLoadStart();
      const double t32 = MedianSeconds(r, [&] { (void)head32->Compute(x.data(), n, out.data()); });
      const double t16 = MedianSeconds(r, [&] { (void)head16->Compute(x.data(), n, out.data()); });
      bf16_ms[i] = t16 * 1e3;
      const double tb = MedianSeconds(r, [&] {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(n),
                    static_cast<int>(v), static_cast<int>(d), 1.0f, x.data(), static_cast<int>(d),
                    w32, static_cast<int>(d), 0.0f, out.data(), static_cast<int>(v));
      });
      const double flop = 2.0 * n * v * d;
      RowLoadEnd();
      std::printf("| %ld | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
                  static_cast<long>(n), Fig("%.1f", t32 * 1e3).c_str(),
                  Fig("%.1f", flop / t32 / 1e9).c_str(), Fig("%.1f", t16 * 1e3).c_str(),
                  Fig("%.1f", flop / t16 / 1e9).c_str(), Fig("%.1f", tb * 1e3).c_str(),
                  Fig("%.1f", flop / tb / 1e9).c_str(), Fig("%.2fx", tb / t32).c_str(),
                  Fig("%.2fx", t32 / t16).c_str(), Fig("%.2fx", t32 / floor32).c_str(),
                  Fig("%.2fx", t16 / floor16).c_str());
      std::fflush(stdout);
      if (csv_out) {
        csv_out << n << "," << t32 * 1e3 << "," << t16 * 1e3 << "," << tb * 1e3 << ","
                << floor32 * 1e3 << "," << floor16 * 1e3 << "\n";
      }
    }
    std::printf("load average after the F32/BF16 table: %s\n", LoadAverage().c_str());
    std::printf("\nF32 vs OpenBLAS = OpenBLAS time / vocabd F32 time (> 1: vocabd faster); "
                "BF16 speedup = F32 time / BF16 time; X / floor = time / read-only floor.\n\n");
  }

  // The compute ceilings, measured in this run: F32 FMA and the int8 dot
  // product of every quantized-kernel path this CPU has.
  RowLoadStart();
  const double fma_peak = FmaPeak();
  double int8_peak[4] = {0, 0, 0, 0};  // by QuantKernelIsa
  for (auto isa : {vocabd::QuantKernelIsa::kAvx512Vnni, vocabd::QuantKernelIsa::kAvxVnni,
                   vocabd::QuantKernelIsa::kAvx2}) {
    int8_peak[static_cast<int>(isa)] = Int8Peak(isa);
  }
  double mix_peak[kPackedMixes] = {};  // by PackedMix
  for (int mix = 0; mix < kPackedMixes; ++mix) mix_peak[mix] = Int8MixPeak(mix);
  const LoadCeilings load_ceilings = Int8LoadCeilings();
  RowLoadEnd();
  if (fma_peak > 0) {
    std::printf("F32 FMA peak %s GFLOP/s (%s vfmadd, all threads, registers only): the "
                "F32 rows' GFLOP/s as a share of it are the compute-bound ceiling for large N\n",
                Fig("%.1f", fma_peak / 1e9).c_str(), VectorIsa());
  }
  std::printf("int8 dot-product peak (u8 x s8 multiply-adds into int32, all threads, registers "
              "only):");
  for (auto isa : {vocabd::QuantKernelIsa::kAvx512Vnni, vocabd::QuantKernelIsa::kAvxVnni,
                   vocabd::QuantKernelIsa::kAvx2}) {
    const double p = int8_peak[static_cast<int>(isa)];
    if (p > 0) {
      std::printf(" %s %s GMAC/s;", vocabd::QuantKernelIsaName(isa), Fig("%.1f", p / 1e9).c_str());
    } else {
      std::printf(" %s not on this CPU;", vocabd::QuantKernelIsaName(isa));
    }
  }
  std::printf("\n  (avx512vnni: vpdpbusd zmm, avxvnni: vpdpbusd ymm, avx2: vpmaddubsw + vpmaddwd "
              "+ vpaddd ymm)\n");
  if (mix_peak[0] > 0) {
    std::printf("avx512vnni with the packed kernels' scale work on the same pipes (per 32 "
                "codes: vmulps + vfmadd, + vfmadd for a min; per 16: vpmaddwd or 2 vpmulld, + "
                "vfmadd; all threads, registers only):");
    for (int mix = 0; mix < kPackedMixes; ++mix) {
      std::printf(" %s %s GMAC/s (%s of the peak);", kPackedMixNames[mix],
                  Fig("%.1f", mix_peak[mix] / 1e9).c_str(),
                  Fig("%.0f%%", 100.0 * mix_peak[mix] / int8_peak[0 + static_cast<int>(
                                                            vocabd::QuantKernelIsa::kAvx512Vnni)])
                      .c_str());
    }
    std::printf("\n  (the ceiling of a type's packed kernel: its N = 64 / 256 rows as a share of "
                "it in the last column)\n");
  }
  if (load_ceilings.loads > 0) {
    const double p = int8_peak[static_cast<int>(vocabd::QuantKernelIsa::kAvx512Vnni)];
    std::printf("avx512vnni with vector loads (all threads, from L1): 16 vpdpbusd + 20 broadcast "
                "loads %s GMAC/s (%s of the peak; 80%% where the core issues two vector loads per "
                "cycle); the per-32 kernel's unit of 8 input rows, Q8_0 form (64 vpdpbusd with "
                "broadcast activations, 89 vector loads) %s GMAC/s (%s of the peak)\n",
                Fig("%.1f", load_ceilings.loads / 1e9).c_str(),
                Fig("%.0f%%", 100.0 * load_ceilings.loads / p).c_str(),
                Fig("%.1f", load_ceilings.unit / 1e9).c_str(),
                Fig("%.0f%%", 100.0 * load_ceilings.unit / p).c_str());
  }
  std::printf("\n");

  if (!quants.empty()) {
    std::printf("| type | N | path | ms | GFLOP/s | floor ms | time / floor | time / N=1 time | "
                "BF16 time / time | share of the path's int8 peak | share of the type's "
                "packed ceiling |\n"
                "|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (QuantCase& q : quants) {
      std::string path = q.head->implementation();
      path = path.substr(0, path.find(' '));
      double peak = 0;
      for (auto isa : {vocabd::QuantKernelIsa::kAvx512Vnni, vocabd::QuantKernelIsa::kAvxVnni,
                       vocabd::QuantKernelIsa::kAvx2}) {
        if (path.find(std::string("-") + vocabd::QuantKernelIsaName(isa)) != std::string::npos) {
          peak = int8_peak[static_cast<int>(isa)];
        }
      }
      for (size_t i = 0; i < rows_list.size(); ++i) {
        const int64_t n = rows_list[i];
        const int r = n >= 64 ? std::max(1, reps / 2) : reps;
        RowLoadStart();
        const double t = MedianSeconds(r, [&] { (void)q.head->Compute(x.data(), n, out.data()); });
        RowLoadEnd();
        q.ms.push_back(t * 1e3);
        const double flop = 2.0 * n * v * d;
        // N V d int8 multiply-adds per call (the int8 dot products alone).
        const double macs = static_cast<double>(n) * v * d;
        const std::string share =
            n >= 64 && peak > 0 ? Fig("%.0f%%", 100.0 * macs / t / peak) : std::string("-");
        const double ceiling = q.head->packed_bytes() > 0 ? mix_peak[PackedMix(q.info->type)] : 0;
        const std::string ceiling_share =
            n >= 64 && ceiling > 0 ? Fig("%.0f%%", 100.0 * macs / t / ceiling) : std::string("-");
        std::printf("| %s | %ld | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", q.name.c_str(),
                    static_cast<long>(n), path.c_str(), Fig("%.1f", t * 1e3).c_str(),
                    Fig("%.1f", flop / t / 1e9).c_str(), Fig("%.1f", q.floor * 1e3).c_str(),
                    Fig("%.2fx", t / q.floor).c_str(), Fig("%.2fx", t * 1e3 / q.ms[0]).c_str(),
                    quant_only ? "-" : Fig("%.2fx", bf16_ms[i] / (t * 1e3)).c_str(),
                    share.c_str(), ceiling_share.c_str());
        std::fflush(stdout);
      }
    }
    std::printf("load average after the quantized table: %s\n\n", LoadAverage().c_str());

    // The one-row kernel's own rate, with memory out of the way: N = 1 on a
    // head of the first rows of each type's weights, 8 MiB of them (the L3
    // cache holds them between calls; median of 51 calls), in weight bytes
    // per second beside the read-only floor's rate from memory. Where the
    // rate from L3 is not well above the floor's, the kernel's instructions,
    // not the memory, bound its N = 1 time.
    std::printf("| type | N = 1 from L3 (8 MiB of weight rows) | GB/s | floor from memory GB/s | "
                "L3 rate / floor rate |\n|---|---|---|---|---|\n");
    RowLoadStart();
    for (const QuantCase& q : quants) {
      const int64_t row_bytes = d / q.info->block_size * q.info->block_bytes;
      const int64_t rows = std::max<int64_t>(16, (int64_t{8} << 20) / row_bytes / 16 * 16);
      auto small = QuantHead(q.w.data(), q.info->type, rows, d);
      std::vector<float> o(static_cast<size_t>(rows));
      for (int i = 0; i < 5; ++i) (void)small->Compute(x.data(), 1, o.data());
      const double t = MedianSeconds(51, [&] { (void)small->Compute(x.data(), 1, o.data()); });
      const double gbs = static_cast<double>(rows * row_bytes) / t / 1e9;
      const double floor_gbs = static_cast<double>(q.head->weight_bytes()) / q.floor / 1e9;
      std::printf("| %s | %s ms | %s | %s | %s |\n", q.name.c_str(), Fig("%.3f", t * 1e3).c_str(),
                  Fig("%.0f", gbs).c_str(), Fig("%.0f", floor_gbs).c_str(),
                  Fig("%.2fx", gbs / floor_gbs).c_str());
    }
    RowLoadEnd();
    std::printf("load average after the L3 table: %s\n\n", LoadAverage().c_str());
  }

  if (quant_paths && !quants.empty()) {
    std::printf("Every quantized-kernel path of this CPU (VOCABD_LM_HEAD_KERNEL):\n\n"
                "| type | path | N | ms | time / floor |\n|---|---|---|---|---|\n");
    for (const QuantCase& q : quants) {
      for (auto isa : {vocabd::QuantKernelIsa::kAvx512Vnni, vocabd::QuantKernelIsa::kAvxVnni,
                       vocabd::QuantKernelIsa::kAvx2, vocabd::QuantKernelIsa::kScalar}) {
        if (!vocabd::QuantKernelIsaSupported(isa)) {
          std::printf("| %s | %s | - | not on this CPU | |\n", q.name.c_str(),
                      vocabd::QuantKernelIsaName(isa));
          continue;
        }
        setenv("VOCABD_LM_HEAD_KERNEL", vocabd::QuantKernelIsaName(isa), 1);
        auto head = QuantHead(q.w.data(), q.info->type, v, d);
        unsetenv("VOCABD_LM_HEAD_KERNEL");
        for (int64_t n : rows_list) {
          if (isa == vocabd::QuantKernelIsa::kScalar && n > 8) continue;  // minutes per call
          const int r = n >= 64 ? 1 : std::max(1, reps / 2);
          RowLoadStart();
          const double t = MedianSeconds(r, [&] { (void)head->Compute(x.data(), n, out.data()); });
          RowLoadEnd();
          std::printf("| %s | %s | %ld | %s | %s |\n", q.name.c_str(),
                      vocabd::QuantKernelIsaName(isa), static_cast<long>(n),
                      Fig("%.1f", t * 1e3).c_str(), Fig("%.2fx", t / q.floor).c_str());
          std::fflush(stdout);
        }
      }
    }
    std::printf("load average after the path table: %s\n\n", LoadAverage().c_str());
  }

  if (rounds > 0) {
    // The targets' ratios with both sides timed back to back in each round,
    // so that load from other processes hits both alike; medians over rounds.
    auto once = [](auto&& f) {
      const auto start = Clock::now();
      f();
      return std::chrono::duration<double>(Clock::now() - start).count();
    };
    volatile uint64_t sink = 0;
    auto stream = [&](int64_t bytes, size_t pf) {
      return once([&] { sink = sink ^ StreamRead(rbuf.data, static_cast<size_t>(bytes), pf); });
    };
    std::vector<std::pair<std::string, std::vector<double>>> ratios;
    auto add = [&](const std::string& name, double value) {
      for (auto& [n, vals] : ratios) {
        if (n == name) {
          vals.push_back(value);
          return;
        }
      }
      ratios.push_back({name, {value}});
    };
    RowLoadStart();
    for (int r = 0; r < rounds; ++r) {
      if (!quant_only) {
        const double f32f = stream(head32->weight_bytes(), floor32_pf);
        const double t1 = once([&] { (void)head32->Compute(x.data(), 1, out.data()); });
        const double t8 = once([&] { (void)head32->Compute(x.data(), 8, out.data()); });
        const double bf = stream(head16->weight_bytes(), floor16_pf);
        const double u1 = once([&] { (void)head16->Compute(x.data(), 1, out.data()); });
        const double u8 = once([&] { (void)head16->Compute(x.data(), 8, out.data()); });
        add("F32 N=1 / floor", t1 / f32f);
        add("BF16 N=1 / floor", u1 / bf);
        add("F32 N=8 / F32 N=1", t8 / t1);
        add("BF16 N=8 / BF16 N=1", u8 / u1);
        add("F32 N=1 / BF16 N=1", t1 / u1);
      }
      for (const QuantCase& q : quants) {
        const double fl = stream(q.head->weight_bytes(), q.floor_pf);
        const double t1 = once([&] { (void)q.head->Compute(x.data(), 1, out.data()); });
        const double t8 = once([&] { (void)q.head->Compute(x.data(), 8, out.data()); });
        add(q.name + " N=1 / floor", t1 / fl);
        add(q.name + " N=8 / " + q.name + " N=1", t8 / t1);
      }
    }
    auto median = [](std::vector<double> v) {
      std::sort(v.begin(), v.end());
      return v[v.size() / 2];
    };
    std::printf("\nInterleaved rounds (%d; medians; each round per type: read-only stream of its "
                "size, N=1, N=8):\n", rounds);
    std::printf("| ratio | median | min | max |\n|---|---|---|---|\n");
    RowLoadEnd();  // busy when the load was high at the start of the rounds or now
    for (auto& [name, vals] : ratios) {
      std::printf("| %s | %s | %s | %s |\n", name.c_str(), Fig("%.2fx", median(vals)).c_str(),
                  Fig("%.2fx", *std::min_element(vals.begin(), vals.end())).c_str(),
                  Fig("%.2fx", *std::max_element(vals.begin(), vals.end())).c_str());
    }
    std::printf("load average after the interleaved rounds: %s\n", LoadAverage().c_str());
  }

  if (!paths_rows.empty() && !quant_only) {
    auto onednn32 = HeadOf(*f32, 0);
    auto onednn16 = HeadOf(*bf16, 0);
    std::printf("\nSmall-M kernel vs oneDNN (crossover; kernel: %s)\n\n",
                head32->implementation().c_str());
    std::printf("| N | kernel F32 ms | oneDNN F32 ms | kernel BF16 ms | oneDNN BF16 ms | "
                "F32 kernel speedup | BF16 kernel speedup |\n|---|---|---|---|---|---|---|\n");
    std::ofstream pcsv;
    if (!paths_csv.empty()) {
      pcsv.open(paths_csv);
      pcsv << "rows,kernel_f32_ms,onednn_f32_ms,kernel_bf16_ms,onednn_bf16_ms\n";
    }
    for (int64_t n : paths_rows) {
      auto k32 = HeadOf(*f32, n);
      auto k16 = HeadOf(*bf16, n);
      const int r = n >= 64 ? std::max(1, reps / 2) : reps;
      RowLoadStart();
      const double tk32 = MedianSeconds(r, [&] { (void)k32->Compute(x.data(), n, out.data()); });
      const double to32 =
          MedianSeconds(r, [&] { (void)onednn32->Compute(x.data(), n, out.data()); });
      const double tk16 = MedianSeconds(r, [&] { (void)k16->Compute(x.data(), n, out.data()); });
      const double to16 =
          MedianSeconds(r, [&] { (void)onednn16->Compute(x.data(), n, out.data()); });
      RowLoadEnd();
      std::printf("| %ld | %s | %s | %s | %s | %s | %s |\n", static_cast<long>(n),
                  Fig("%.1f", tk32 * 1e3).c_str(), Fig("%.1f", to32 * 1e3).c_str(),
                  Fig("%.1f", tk16 * 1e3).c_str(), Fig("%.1f", to16 * 1e3).c_str(),
                  Fig("%.2fx", to32 / tk32).c_str(), Fig("%.2fx", to16 / tk16).c_str());
      std::fflush(stdout);
      if (pcsv) {
        pcsv << n << "," << tk32 * 1e3 << "," << to32 * 1e3 << "," << tk16 * 1e3 << ","
             << to16 * 1e3 << "\n";
      }
    }
  }
  std::printf("load average after: %s\n", LoadAverage().c_str());
  if (g_any_busy) {
    std::printf("BUSY: the 1-minute load average was above %.1f while figures marked BUSY(x) "
                "were measured: they are not results.\n", kBusyLoad);
    return 3;
  }
  return 0;
}
