// A bounded pool of worker threads for work that must not run on gRPC
// reactor threads (the LM-head GEMM). Submit never blocks: a full queue is
// RESOURCE_EXHAUSTED. The dynamic batcher (dynamic_batcher.h) sits in front
// of it for the LM head.
//
// The queue holds tasks waiting for a worker (running tasks are not counted).
// Tasks run in FIFO order; with num_threads > 1 they may run concurrently.
// Tasks must not throw (a throwing task is logged to stderr and dropped).
// The pool must not be destroyed from one of its own tasks.
#ifndef VOCABD_LIB_SERVING_COMPUTE_POOL_H_
#define VOCABD_LIB_SERVING_COMPUTE_POOL_H_

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace vocabd {

class ComputePool {
 public:
  struct Options {
    int num_threads = 1;         // >= 1
    size_t max_queue_size = 1024;  // >= 1
  };
  // INVALID_ARGUMENT for num_threads < 1 or max_queue_size < 1.
  static absl::StatusOr<std::unique_ptr<ComputePool>> Create(const Options& options);
  // Runs every queued task, then joins the workers.
  ~ComputePool();

  // Queues `task`; never blocks. RESOURCE_EXHAUSTED when the queue holds
  // max_queue_size tasks, UNAVAILABLE after Shutdown(), INVALID_ARGUMENT for
  // an empty std::function. Thread-safe.
  absl::Status Submit(std::function<void()> task);
  // Stops accepting; queued tasks still run. Idempotent.
  void Shutdown();
  // Tasks waiting for a worker (for metrics).
  size_t queue_depth() const;

 private:
  explicit ComputePool(const Options& options);
  void WorkerLoop();

  Options options_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace vocabd

#endif  // VOCABD_LIB_SERVING_COMPUTE_POOL_H_
