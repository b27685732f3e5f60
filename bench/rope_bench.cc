// RoPE kernel throughput vs a plain memcpy of the same bytes, same run.
//
//   q [1, 32, 4096, 128] + k [1, 8, 4096, 128] F32 (80 MiB), BHSD, positions
//   0..4095, theta 500000, both pair layouts. ApplyRope rotates in place:
//   it reads and writes every byte once, like memcpy(dst, src, 80 MiB).
//   Rate = 80 MiB / time (GiB/s); ratio = rope rate / copy rate.
// Usage: rope_bench [--iters N] (default 20; prints the median).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "lib/positions/rope.h"
#include "lib/positions/rope_kernel.h"

namespace {

using Clock = std::chrono::steady_clock;

template <typename F>
double MedianSeconds(int iters, F&& f) {
  std::vector<double> t;
  for (int i = 0; i < iters; ++i) {
    const auto a = Clock::now();
    f();
    t.push_back(std::chrono::duration<double>(Clock::now() - a).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int iters = 20;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::string(argv[i]) == "--iters") iters = std::max(3, std::atoi(argv[i + 1]));
  }
  const int64_t b = 1, hq = 32, hk = 8, s = 4096, d = 128;
  std::vector<float> q(b * hq * s * d), k(b * hk * s * d);
  for (size_t i = 0; i < q.size(); ++i) q[i] = static_cast<float>(i % 1000) * 1e-3f;
  for (size_t i = 0; i < k.size(); ++i) k[i] = static_cast<float>(i % 777) * 1e-3f;
  const double bytes = static_cast<double>((q.size() + k.size()) * sizeof(float));
  std::vector<float> src(q.size() + k.size(), 1.0f), dst(q.size() + k.size(), 0.0f);
  std::vector<int64_t> positions(s);
  for (int64_t i = 0; i < s; ++i) positions[i] = i;
  const unsigned hw = std::thread::hardware_concurrency();
  std::printf("q [1,32,4096,128] + k [1,8,4096,128] F32 = %.0f MiB, %u hardware threads, "
              "best ISA %s, median of %d\n",
              bytes / (1 << 20), hw, vocabd::RopeIsaName(vocabd::DetectRopeIsa()), iters);

  const double t_copy = MedianSeconds(iters, [&] {
    std::memcpy(dst.data(), src.data(), src.size() * sizeof(float));
  });
  // The same copy split over all hardware threads (the RoPE auto setting).
  const double t_copy_mt = MedianSeconds(iters, [&] {
    std::vector<std::thread> th;
    const size_t n = src.size();
    for (unsigned w = 0; w < hw; ++w) {
      th.emplace_back([&, w] {
        const size_t a = n * w / hw, e = n * (w + 1) / hw;
        std::memcpy(dst.data() + a, src.data() + a, (e - a) * sizeof(float));
      });
    }
    for (auto& t : th) t.join();
  });
  auto gibs = [&](double t) { return bytes / t / (1 << 30); };
  std::printf("%-44s %8.2f ms %7.2f GiB/s\n", "memcpy 1 thread", t_copy * 1e3, gibs(t_copy));
  std::printf("%-44s %8.2f ms %7.2f GiB/s\n", "memcpy all threads", t_copy_mt * 1e3,
              gibs(t_copy_mt));

  for (auto layout : {vocabd::RopePairLayout::kHalfSplit, vocabd::RopePairLayout::kInterleaved}) {
    vocabd::RopeParams p;
    p.theta = 500000.0;
    p.head_dim = p.rotary_dim = static_cast<int>(d);
    p.pair_layout = layout;
    p.max_position_embeddings = 8192;
    const char* lname = layout == vocabd::RopePairLayout::kHalfSplit ? "half_split" : "interleaved";
    for (auto isa : {vocabd::RopeIsa::kScalar, vocabd::RopeIsa::kAvx2, vocabd::RopeIsa::kAvx512}) {
      for (int threads : {1, 0}) {
        vocabd::ApplyRopeOptions o;
        o.isa = isa;
        o.num_threads = threads;
        auto run = [&] {
          vocabd::QkTensor tq{q.data(), b, hq, s, d}, tk{k.data(), b, hk, s, d};
          if (!vocabd::ApplyRope(p, o, positions, tq, tk).ok()) std::abort();
        };
        run();  // warm: builds the cos/sin table once
        const double t = MedianSeconds(iters, run);
        const double base = threads == 1 ? t_copy : t_copy_mt;
        char name[96];
        std::snprintf(name, sizeof(name), "rope %s %s %s", lname, vocabd::RopeIsaName(isa),
                      threads == 1 ? "1 thread" : "auto threads");
        std::printf("%-44s %8.2f ms %7.2f GiB/s  %5.0f%% of memcpy (%s)\n", name, t * 1e3,
                    gibs(t), 100.0 * base / t, threads == 1 ? "1 thread" : "all threads");
      }
    }
  }
  // Cold: a fresh cache, so the first call also builds the 4096-position table.
  {
    vocabd::RopeParams p;
    p.theta = 123456.0;  // a config not seen above
    p.head_dim = p.rotary_dim = static_cast<int>(d);
    vocabd::ApplyRopeOptions o;
    const auto a = Clock::now();
    vocabd::QkTensor tq{q.data(), b, hq, s, d}, tk{k.data(), b, hk, s, d};
    if (!vocabd::ApplyRope(p, o, positions, tq, tk).ok()) return 1;
    std::printf("%-44s %8.2f ms (includes building the cos/sin table)\n", "rope half_split cold",
                std::chrono::duration<double>(Clock::now() - a).count() * 1e3);
  }
  return 0;
}
