// Fork-join parallelism for lib/'s own compute kernels (the small-M LM-head
// kernel, per-row scoring), on the same OpenMP runtime (libgomp) that
// Debian's oneDNN uses.
//
// Why OpenMP and not a private thread pool: after every oneDNN call libgomp's
// worker threads spin-wait for the next parallel region (GOMP_SPINCOUNT,
// milliseconds by default). A second pool of our own would compete with
// those spinning threads for the same cores (4 runnable threads on the
// 2-core machine). Running our loops as OpenMP regions from the same calling
// thread reuses oneDNN's team instead: one team, one thread per core.
//
// ParallelFor is a plain serial loop when the library is built without
// OpenMP, when called from inside a parallel region (no nesting), when there
// is one task, or when MaxThreads() is 1 (OMP_NUM_THREADS=1).
#ifndef VOCABD_LIB_CORE_PARALLEL_H_
#define VOCABD_LIB_CORE_PARALLEL_H_

#include <cstdint>
#include <functional>

namespace vocabd {

// Threads a ParallelFor may use: omp_get_max_threads() (OMP_NUM_THREADS, or
// every core), 1 without OpenMP or inside a parallel region.
int MaxThreads();

// Calls fn(task) once for every task in [0, num_tasks), in parallel over
// MaxThreads() threads with dynamic scheduling (a thread slowed by other
// load takes fewer tasks). Returns when every call has returned. `fn` must
// not throw. The assignment of tasks to threads is unspecified, so results
// must not depend on it: give each task its own output.
void ParallelFor(int64_t num_tasks, const std::function<void(int64_t task)>& fn);

// ParallelFor for loops that stream one large array in task order (the LM
// head's weight rows): the tasks are cut into one contiguous share per
// thread, and each thread runs its own share front to back, so each thread
// reads one sequential stream. A thread whose share is done then takes the
// tasks still left in the other shares from their back ends (work
// stealing), so a thread slowed by other load does not hold up the call.
//
//   tasks    [0 ............ n/2) [n/2 ............. n)
//   thread 0  -> -> -> -> ->          <- (steals when done)
//   thread 1                     -> -> -> -> -> ->
//
// Why not ParallelFor: dynamic scheduling hands out neighbouring tasks
// alternately, so each thread's reads jump by a task (1 MiB for the head)
// every few tens of microseconds. On the Zen 5 VM of docs/performance.md,
// in alternating runs a few minutes apart, one-row Q4_0 and Q8_0 heads ran
// 1.27-1.67x their read-only floor that way and 1.09-1.18x with one
// contiguous range per thread.
// Same contract as ParallelFor (every task once, `fn` must not throw,
// results must not depend on which thread runs a task).
void ParallelForStreams(int64_t num_tasks, const std::function<void(int64_t task)>& fn);

}  // namespace vocabd

#endif  // VOCABD_LIB_CORE_PARALLEL_H_
