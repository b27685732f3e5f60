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

namespace {

// Runs every task on this thread when there is no team to share them with
// (returns true); otherwise sets `threads` (> 1) and returns false.
bool RanInline(int64_t num_tasks, const std::function<void(int64_t task)>& fn, int& threads) {
  if (num_tasks <= 0) return true;
  threads = num_tasks == 1 ? 1 : MaxThreads();
  if (threads > 1) return false;
  for (int64_t t = 0; t < num_tasks; ++t) fn(t);
  return true;
}

}  // namespace

void ParallelFor(int64_t num_tasks, const std::function<void(int64_t task)>& fn) {
  int threads = 1;
  if (RanInline(num_tasks, fn, threads)) return;
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

// Claims the front task (the owner) or the back one (a thief); -1 when the
// share is empty.
int64_t Take(Share& s, bool front_end) {
  uint64_t cur = s.range.load(std::memory_order_relaxed);
  while (true) {
    const uint64_t front = cur >> 32, back = cur & 0xFFFFFFFFu;
    if (front >= back) return -1;
    const uint64_t next = front_end ? (front + 1) << 32 | back : front << 32 | (back - 1);
    if (s.range.compare_exchange_weak(cur, next, std::memory_order_relaxed)) {
      return static_cast<int64_t>(front_end ? front : back - 1);
    }
  }
}

}  // namespace

void ParallelForStreams(int64_t num_tasks, const std::function<void(int64_t task)>& fn) {
  int threads = 1;
  if (RanInline(num_tasks, fn, threads)) return;
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
      for (int64_t t = Take(s, k == 0); t >= 0; t = Take(s, k == 0)) fn(t);
    }
  }
#endif
}

}  // namespace vocabd
