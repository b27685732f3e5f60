// LM-head benchmark (README "Scoring performance"): vocabd's head (F32 and
// BF16 weights) vs OpenBLAS sgemm on the same shapes vs the bandwidth floor,
// all measured in one run, for N = 1, 8, 64, 256 rows.
//
//   head_bench --f32 /tmp/vocabd-bench/llama3-f32 --bf16 /tmp/vocabd-bench/llama3-bf16
//              [--rows 1,8,64,256] [--reps 5] [--csv out.csv]
//              [--paths 1,2,4,8,12,16,24,32,64] [--paths-csv paths.csv] [--interleaved 9]
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
// F32 read in place from the mapping, BF16 served natively. Times are the
// median of --reps runs after one warm-up. GFLOP/s = 2 N V d / time.
// Bandwidth floor = weight bytes / copy bandwidth, where copy bandwidth is
// STREAM-style (2 x bytes / time) for a memcpy of a buffer as large as the
// F32 weights, split over all OpenMP threads.
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>
#include <cblas.h>

#include "lib/head/lm_head.h"
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

// b = a, the bytes split evenly over the OpenMP threads.
void ParallelCopy(char* b, const char* a, size_t bytes) {
#pragma omp parallel
  {
    const size_t n = omp_get_num_threads(), id = omp_get_thread_num();
    const size_t chunk = (bytes + n - 1) / n;
    const size_t begin = std::min(bytes, id * chunk), end = std::min(bytes, begin + chunk);
    std::memcpy(b + begin, a + begin, end - begin);
  }
}

// STREAM-style copy bandwidth (bytes/s, read + write) for `bytes`.
double CopyBandwidth(size_t bytes, int reps) {
  std::vector<char> a(bytes), b(bytes);
#pragma omp parallel for
  for (long i = 0; i < static_cast<long>(bytes); i += 4096) {
    a[i] = 1;
    b[i] = 2;
  }
  const double s = MedianSeconds(reps, [&] { ParallelCopy(b.data(), a.data(), bytes); });
  return 2.0 * static_cast<double>(bytes) / s;
}

// The machine's F32 compute ceiling (FLOP/s) on all OpenMP threads: 16
// independent AVX-512 FMA chains per thread, registers only, best of 3. It
// bounds every F32 GEMM: N = 256 rows of the Llama-3 head are 269 GFLOP.
// 0 where the CPU has no AVX-512.
__attribute__((target("avx512f"))) double FmaPeak() {
  if (!__builtin_cpu_supports("avx512f")) return 0;
  constexpr long kIters = 20'000'000;
  constexpr int kChains = 16;
  double best = 0;
  for (int rep = 0; rep < 3; ++rep) {
    float sink = 0;
    int threads = 1;
    const auto start = Clock::now();
#pragma omp parallel reduction(+ : sink)
    {
#pragma omp single
      threads = omp_get_num_threads();
      __m512 acc[kChains];
#pragma GCC unroll 16
      for (int i = 0; i < kChains; ++i) acc[i] = _mm512_set1_ps(1e-3f * static_cast<float>(i));
      const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
      for (long it = 0; it < kIters; ++it) {
#pragma GCC unroll 16
        for (int i = 0; i < kChains; ++i) acc[i] = _mm512_fmadd_ps(acc[i], a, b);
      }
      __m512 total = acc[0];
#pragma GCC unroll 16
      for (int i = 1; i < kChains; ++i) total = _mm512_add_ps(total, acc[i]);
      alignas(64) float lanes[16];
      _mm512_store_ps(lanes, total);
      for (float l : lanes) sink += l;
    }
    const double s = std::chrono::duration<double>(Clock::now() - start).count();
    if (sink == -1.0f) std::printf(" ");  // keeps the chains alive
    best = std::max(best, 2.0 * 16 * kChains * static_cast<double>(kIters) * threads / s);
  }
  return best;
}

std::unique_ptr<vocabd::LmHead> HeadOf(const vocabd::Model& m, int64_t small_rows_max = -1) {
  const vocabd::WeightTensor& w = m.checkpoint().lm_head();
  vocabd::LmHead::Options o;
  o.weights = w.data;
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
  CLI::App app{"vocabd LM-head benchmark"};
  std::string f32_path = "/tmp/vocabd-bench/llama3-f32";
  std::string bf16_path = "/tmp/vocabd-bench/llama3-bf16";
  std::vector<int64_t> rows_list = {1, 8, 64, 256};
  int reps = 5;
  std::string csv;
  std::vector<int64_t> paths_rows;
  std::string paths_csv;
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
  CLI11_PARSE(app, argc, argv);

  auto f32 = vocabd::Model::Create({"f32", f32_path});
  if (!f32.ok()) {
    std::fprintf(stderr, "%s\n", f32.status().ToString().c_str());
    return 1;
  }
  auto bf16 = vocabd::Model::Create({"bf16", bf16_path});
  if (!bf16.ok()) {
    std::fprintf(stderr, "%s\n", bf16.status().ToString().c_str());
    return 1;
  }
  auto head32 = HeadOf(**f32);
  auto head16 = HeadOf(**bf16);
  const int64_t v = head32->vocab_size(), d = head32->hidden_size();
  const float* w32 = static_cast<const float*>((*f32)->checkpoint().lm_head().data);
  const int threads = omp_get_max_threads();
  openblas_set_num_threads(threads);
  std::printf("shape V=%ld d=%ld, %d threads; F32 kernel %s, BF16 kernel %s (%s)\n",
              static_cast<long>(v), static_cast<long>(d), threads,
              head32->implementation().c_str(), head16->implementation().c_str(),
              std::string(vocabd::DTypeName(head16->weights_dtype())).c_str());
  const double bw = CopyBandwidth(static_cast<size_t>(head32->weight_bytes()), 3);
  const double floor32 = head32->weight_bytes() / bw;
  const double floor16 = head16->weight_bytes() / bw;
  std::printf("load average at start: %s\n", LoadAverage().c_str());
  std::printf("copy bandwidth %.2f GB/s (STREAM copy of %.2f GB); floor F32 %.1f ms, BF16 %.1f ms\n\n",
              bw / 1e9, head32->weight_bytes() / 1e9, floor32 * 1e3, floor16 * 1e3);

  std::mt19937 rng(1);
  std::normal_distribution<float> dist;
  int64_t max_rows = *std::max_element(rows_list.begin(), rows_list.end());
  for (int64_t n : paths_rows) max_rows = std::max(max_rows, n);
  if (rounds > 0) max_rows = std::max<int64_t>(max_rows, 8);
  std::vector<float> x(static_cast<size_t>(max_rows * d));
  for (float& e : x) e = dist(rng);
  std::vector<float> out(static_cast<size_t>(max_rows * v));

  std::printf("| N | vocabd F32 ms | GFLOP/s | vocabd BF16 ms | GFLOP/s | OpenBLAS sgemm ms | GFLOP/s "
              "| F32 vs OpenBLAS | BF16 speedup | F32 / floor | BF16 / floor |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|\n");
  std::ofstream csv_out;
  if (!csv.empty()) {
    csv_out.open(csv);
    csv_out << "rows,f32_ms,bf16_ms,openblas_ms,floor_f32_ms,floor_bf16_ms\n";
  }
  for (int64_t n : rows_list) {
    const int r = n >= 64 ? std::max(1, reps / 2) : reps;
    const double t32 = MedianSeconds(r, [&] { (void)head32->Compute(x.data(), n, out.data()); });
    const double t16 = MedianSeconds(r, [&] { (void)head16->Compute(x.data(), n, out.data()); });
    const double tb = MedianSeconds(r, [&] {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(n),
                  static_cast<int>(v), static_cast<int>(d), 1.0f, x.data(), static_cast<int>(d),
                  w32, static_cast<int>(d), 0.0f, out.data(), static_cast<int>(v));
    });
    const double flop = 2.0 * n * v * d;
    std::printf("| %ld | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | %.2fx | %.2fx | %.2fx | %.2fx |\n",
                static_cast<long>(n), t32 * 1e3, flop / t32 / 1e9, t16 * 1e3, flop / t16 / 1e9,
                tb * 1e3, flop / tb / 1e9, tb / t32, t32 / t16, t32 / floor32, t16 / floor16);
    std::fflush(stdout);
    if (csv_out) {
      csv_out << n << "," << t32 * 1e3 << "," << t16 * 1e3 << "," << tb * 1e3 << ","
              << floor32 * 1e3 << "," << floor16 * 1e3 << "\n";
    }
  }
  std::printf("load average after the main table: %s\n", LoadAverage().c_str());
  if (const double peak = FmaPeak(); peak > 0) {
    std::printf("F32 FMA peak %.1f GFLOP/s (AVX-512, all threads, registers only): the rows' "
                "GFLOP/s as a share of it are the compute-bound ceiling for large N\n",
                peak / 1e9);
  }
  std::printf("\nF32 vs OpenBLAS = OpenBLAS time / vocabd F32 time (> 1: vocabd faster); "
              "BF16 speedup = F32 time / BF16 time; X / floor = time / bandwidth floor.\n");

  if (rounds > 0) {
    // The targets' ratios with both sides timed back to back in each round,
    // so that load from other processes hits both alike; medians over rounds.
    std::vector<char> a(static_cast<size_t>(head32->weight_bytes()), 1);
    std::vector<char> b(a.size(), 2);
    auto copy = [&] { ParallelCopy(b.data(), a.data(), a.size()); };
    auto once = [](auto&& f) {
      const auto start = Clock::now();
      f();
      return std::chrono::duration<double>(Clock::now() - start).count();
    };
    std::vector<double> f32_floor, bf16_floor, f32_8, bf16_8, speed1;
    copy();
    for (int r = 0; r < rounds; ++r) {
      const double tc = once(copy);  // floor F32 = tc / 2 (bytes = F32 weights)
      const double t1 = once([&] { (void)head32->Compute(x.data(), 1, out.data()); });
      const double t8 = once([&] { (void)head32->Compute(x.data(), 8, out.data()); });
      const double u1 = once([&] { (void)head16->Compute(x.data(), 1, out.data()); });
      const double u8 = once([&] { (void)head16->Compute(x.data(), 8, out.data()); });
      f32_floor.push_back(t1 / (tc / 2));
      bf16_floor.push_back(u1 / (tc / 4));
      f32_8.push_back(t8 / t1);
      bf16_8.push_back(u8 / u1);
      speed1.push_back(t1 / u1);
    }
    auto median = [](std::vector<double> v) {
      std::sort(v.begin(), v.end());
      return v[v.size() / 2];
    };
    std::printf("\nInterleaved rounds (%d; medians; each round: copy, F32 N=1, F32 N=8, BF16 N=1, "
                "BF16 N=8):\n", rounds);
    std::printf("| ratio | median | min | max |\n|---|---|---|---|\n");
    for (auto& [name, v] : std::vector<std::pair<const char*, std::vector<double>*>>{
             {"F32 N=1 / floor", &f32_floor}, {"BF16 N=1 / floor", &bf16_floor},
             {"F32 N=8 / F32 N=1", &f32_8}, {"BF16 N=8 / BF16 N=1", &bf16_8},
             {"F32 N=1 / BF16 N=1", &speed1}}) {
      std::printf("| %s | %.2fx | %.2fx | %.2fx |\n", name, median(*v),
                  *std::min_element(v->begin(), v->end()), *std::max_element(v->begin(), v->end()));
    }
    std::printf("load average after the interleaved rounds: %s\n", LoadAverage().c_str());
  }

  if (!paths_rows.empty()) {
    auto onednn32 = HeadOf(**f32, 0);
    auto onednn16 = HeadOf(**bf16, 0);
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
      auto k32 = HeadOf(**f32, n);
      auto k16 = HeadOf(**bf16, n);
      const int r = n >= 64 ? std::max(1, reps / 2) : reps;
      const double tk32 = MedianSeconds(r, [&] { (void)k32->Compute(x.data(), n, out.data()); });
      const double to32 =
          MedianSeconds(r, [&] { (void)onednn32->Compute(x.data(), n, out.data()); });
      const double tk16 = MedianSeconds(r, [&] { (void)k16->Compute(x.data(), n, out.data()); });
      const double to16 =
          MedianSeconds(r, [&] { (void)onednn16->Compute(x.data(), n, out.data()); });
      std::printf("| %ld | %.1f | %.1f | %.1f | %.1f | %.2fx | %.2fx |\n", static_cast<long>(n),
                  tk32 * 1e3, to32 * 1e3, tk16 * 1e3, to16 * 1e3, to32 / tk32, to16 / tk16);
      std::fflush(stdout);
      if (pcsv) {
        pcsv << n << "," << tk32 * 1e3 << "," << to32 * 1e3 << "," << tk16 * 1e3 << ","
             << to16 * 1e3 << "\n";
      }
    }
    std::printf("load average at the end: %s\n", LoadAverage().c_str());
  }
  return 0;
}
