#include "lib/core/parallel.h"

#include <atomic>
#include <memory>

#if defined(_OPENMP)
#include <omp.h>
#endif

namespace vocabd {

int MaxThreads() {
#if defined(_OPENMP)
  if (omp_in_parallel()) return 1;
  const int n = omp_get_max_threads();
  return n < 1 ? 1 : n;
#else
  return 1;
#endif
}

void ParallelFor(int64_t num_tasks, const std::function<void(int64_t task)>& fn) {
  if (num_tasks <= 0) return;
  const int threads = num_tasks == 1 ? 1 : MaxThreads();
  if (threads == 1) {
    for (int64_t t = 0; t < num_tasks; ++t) fn(t);
    return;
  }
#if defined(_OPENMP)
  const int team = num_tasks < threads ? static_cast<int>(num_tasks) : threads;
#pragma omp parallel for schedule(dynamic, 1) num_threads(team)
  for (int64_t t = 0; t < num_tasks; ++t) fn(t);
#endif
}

namespace {

// One thread's share of ParallelForStreams' tasks: [front, back) still to
// run, in one word so that the owner (taking from the front) and thieves
// (taking from the back) claim each task exactly once.
struct alignas(64) Share {
  std::atomic<uint64_t> range{0};  // front << 32 | back
};

int64_t TakeFront(Share& s) {
  uint64_t cur = s.range.load(std::memory_order_relaxed);
  while (true) {
    const uint64_t front = cur >> 32, back = cur & 0xFFFFFFFFu;
    if (front >= back) return -1;
    if (s.range.compare_exchange_weak(cur, (front + 1) << 32 | back, std::memory_order_relaxed)) {
      return static_cast<int64_t>(front);
    }
  }
}

int64_t TakeBack(Share& s) {
  uint64_t cur = s.range.load(std::memory_order_relaxed);
  while (true) {
    const uint64_t front = cur >> 32, back = cur & 0xFFFFFFFFu;
    if (front >= back) return -1;
    if (s.range.compare_exchange_weak(cur, front << 32 | (back - 1), std::memory_order_relaxed)) {
      return static_cast<int64_t>(back - 1);
    }
  }
}

}  // namespace

void ParallelForStreams(int64_t num_tasks, const std::function<void(int64_t task)>& fn) {
  if (num_tasks <= 0) return;
  const int threads = num_tasks == 1 ? 1 : MaxThreads();
  if (threads == 1) {
    for (int64_t t = 0; t < num_tasks; ++t) fn(t);
    return;
  }
  if (num_tasks > int64_t{0x7FFFFFFF}) {  // the shares hold 32-bit task numbers
    ParallelFor(num_tasks, fn);
    return;
  }
#if defined(_OPENMP)
  const int team = num_tasks < threads ? static_cast<int>(num_tasks) : threads;
  std::unique_ptr<Share[]> shares(new Share[team]);
  for (int i = 0; i < team; ++i) {
    const uint64_t begin = static_cast<uint64_t>(num_tasks * i / team);
    const uint64_t end = static_cast<uint64_t>(num_tasks * (i + 1) / team);
    shares[i].range.store(begin << 32 | end, std::memory_order_relaxed);
  }
  // Every share is drained by someone: a thread runs its own, then takes
  // what is left of the others (also the shares of team members OpenMP did
  // not start). The region's end is the barrier that publishes fn's writes.
#pragma omp parallel num_threads(team)
  {
    const int me = omp_get_thread_num();
    for (int k = 0; k < team; ++k) {
      Share& s = shares[(me + k) % team];
      for (int64_t t = k == 0 ? TakeFront(s) : TakeBack(s); t >= 0;
           t = k == 0 ? TakeFront(s) : TakeBack(s)) {
        fn(t);
      }
    }
  }
#endif
}

}  // namespace vocabd
