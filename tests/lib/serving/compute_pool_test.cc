#include "lib/serving/compute_pool.h"

#include <atomic>
#include <chrono>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace vocabd {
namespace {

std::unique_ptr<ComputePool> MakePool(int threads, size_t queue) {
  auto pool = ComputePool::Create({threads, queue});
  EXPECT_TRUE(pool.ok()) << pool.status();
  return pool.ok() ? std::move(pool).value() : nullptr;
}

// A task that signals when it starts and blocks until released.
struct Blocker {
  std::promise<void> started;
  std::promise<void> release;
  std::shared_future<void> release_future = release.get_future().share();
  std::function<void()> Task() {
    return [this] {
      started.set_value();
      release_future.wait();
    };
  }
};

TEST(ComputePoolTest, RunsAllTasks) {
  std::atomic<int> count{0};
  {
    auto pool = MakePool(2, 1024);
    ASSERT_NE(pool, nullptr);
    for (int i = 0; i < 200; ++i) {
      ASSERT_TRUE(pool->Submit([&count] { count.fetch_add(1); }).ok());
    }
  }
  EXPECT_EQ(count.load(), 200);
}

TEST(ComputePoolTest, FullQueueIsResourceExhausted) {
  auto pool = MakePool(1, 2);
  ASSERT_NE(pool, nullptr);
  Blocker blocker;
  ASSERT_TRUE(pool->Submit(blocker.Task()).ok());
  blocker.started.get_future().wait();  // the only worker is busy; queue empty
  EXPECT_EQ(pool->queue_depth(), 0u);
  std::atomic<int> ran{0};
  ASSERT_TRUE(pool->Submit([&ran] { ran.fetch_add(1); }).ok());
  ASSERT_TRUE(pool->Submit([&ran] { ran.fetch_add(1); }).ok());
  EXPECT_EQ(pool->queue_depth(), 2u);
  const absl::Status full = pool->Submit([&ran] { ran.fetch_add(100); });
  EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted) << full;
  EXPECT_NE(full.message().find("max_queue_size 2"), std::string::npos) << full;
  EXPECT_EQ(pool->queue_depth(), 2u);
  blocker.release.set_value();
  pool.reset();  // drains
  EXPECT_EQ(ran.load(), 2);
}

TEST(ComputePoolTest, ShutdownRejectsButRunsQueued) {
  auto pool = MakePool(1, 8);
  ASSERT_NE(pool, nullptr);
  Blocker blocker;
  ASSERT_TRUE(pool->Submit(blocker.Task()).ok());
  blocker.started.get_future().wait();
  std::mutex mu;
  std::vector<int> order;
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(pool->Submit([&, i] {
                  std::lock_guard<std::mutex> lock(mu);
                  order.push_back(i);
                }).ok());
  }
  pool->Shutdown();
  pool->Shutdown();  // idempotent
  const absl::Status after = pool->Submit([] {});
  EXPECT_EQ(after.code(), absl::StatusCode::kUnavailable) << after;
  EXPECT_EQ(pool->queue_depth(), 3u);
  blocker.release.set_value();
  pool.reset();
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2}));  // FIFO, all ran
}

TEST(ComputePoolTest, DestructorRunsQueuedTasks) {
  auto pool = MakePool(1, 16);
  ASSERT_NE(pool, nullptr);
  Blocker blocker;
  ASSERT_TRUE(pool->Submit(blocker.Task()).ok());
  blocker.started.get_future().wait();
  std::atomic<int> ran{0};
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(pool->Submit([&ran] { ran.fetch_add(1); }).ok());
  ASSERT_EQ(pool->queue_depth(), 10u);
  // Destroy while the worker is still blocked with 10 tasks queued.
  std::thread destroyer([&pool] { pool.reset(); });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(ran.load(), 0);
  blocker.release.set_value();
  destroyer.join();
  EXPECT_EQ(ran.load(), 10);
}

TEST(ComputePoolTest, WorkersRunConcurrently) {
  auto pool = MakePool(2, 4);
  ASSERT_NE(pool, nullptr);
  Blocker a, b;
  ASSERT_TRUE(pool->Submit(a.Task()).ok());
  ASSERT_TRUE(pool->Submit(b.Task()).ok());
  // Both start before either is released: two workers.
  EXPECT_EQ(a.started.get_future().wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_EQ(b.started.get_future().wait_for(std::chrono::seconds(10)), std::future_status::ready);
  a.release.set_value();
  b.release.set_value();
  // Join the workers while a and b (declared after the pool, destroyed
  // before it) are alive: their tasks still read `release_future` after
  // waking up (TSan: data race with ~Blocker).
  pool.reset();
}

TEST(ComputePoolTest, InvalidOptionsAndTask) {
  auto no_threads = ComputePool::Create({0, 4});
  EXPECT_EQ(no_threads.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(no_threads.status().message().find("num_threads = 0"), std::string::npos);
  auto no_queue = ComputePool::Create({1, 0});
  EXPECT_EQ(no_queue.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(no_queue.status().message().find("max_queue_size = 0"), std::string::npos);
  auto pool = MakePool(1, 1);
  ASSERT_NE(pool, nullptr);
  EXPECT_EQ(pool->Submit(nullptr).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace vocabd
