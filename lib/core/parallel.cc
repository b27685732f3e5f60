#include "lib/core/parallel.h"

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

}  // namespace vocabd
