#include "lib/serving/compute_pool.h"

#include <cstdio>
#include <exception>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"

namespace vocabd {

absl::StatusOr<std::unique_ptr<ComputePool>> ComputePool::Create(const Options& options) {
  if (options.num_threads < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("ComputePool: num_threads = ", options.num_threads, " must be >= 1"));
  }
  if (options.max_queue_size < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ComputePool: max_queue_size = ", options.max_queue_size, " must be >= 1"));
  }
  std::unique_ptr<ComputePool> pool(new ComputePool(options));
  pool->workers_.reserve(static_cast<size_t>(options.num_threads));
  try {
    for (int i = 0; i < options.num_threads; ++i) {
      pool->workers_.emplace_back([p = pool.get()] { p->WorkerLoop(); });
    }
  } catch (const std::system_error& e) {
    // The destructor of `pool` joins the workers already started.
    return absl::ResourceExhaustedError(absl::StrCat(
        "ComputePool: cannot start worker thread ", pool->workers_.size(), " of ",
        options.num_threads, ": ", e.what()));
  }
  return pool;
}

ComputePool::ComputePool(const Options& options) : options_(options) {}

ComputePool::~ComputePool() {
  Shutdown();
  for (std::thread& t : workers_) {
    if (t.joinable()) t.join();
  }
}

absl::Status ComputePool::Submit(std::function<void()> task) {
  if (!task) return absl::InvalidArgumentError("ComputePool: task is empty");
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return absl::UnavailableError("ComputePool: shutting down");
    if (queue_.size() >= options_.max_queue_size) {
      return absl::ResourceExhaustedError(
          absl::StrCat("ComputePool: queue full (", queue_.size(), " of max_queue_size ",
                       options_.max_queue_size, " tasks waiting)"));
    }
    queue_.push_back(std::move(task));
  }
  cv_.notify_one();
  return absl::OkStatus();
}

void ComputePool::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
}

size_t ComputePool::queue_depth() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queue_.size();
}

void ComputePool::WorkerLoop() {
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping and drained
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    // Tasks must not throw (lib/ does not use exceptions); a throwing task
    // is reported and dropped so that the worker and the process survive.
    try {
      task();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "vocabd ComputePool: task threw: %s\n", e.what());
    } catch (...) {
      std::fprintf(stderr, "vocabd ComputePool: task threw a non-std exception\n");
    }
  }
}

}  // namespace vocabd
