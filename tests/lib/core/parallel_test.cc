#include "lib/core/parallel.h"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace vocabd {
namespace {

// Every task runs exactly once, for task counts around the thread count.
TEST(ParallelForStreamsTest, EveryTaskOnce) {
  for (int64_t n : {0, 1, 2, 3, 7, 64, 1001}) {
    std::vector<std::atomic<int>> runs(static_cast<size_t>(n));
    ParallelForStreams(n, [&](int64_t t) { runs[static_cast<size_t>(t)].fetch_add(1); });
    for (int64_t t = 0; t < n; ++t) ASSERT_EQ(runs[static_cast<size_t>(t)].load(), 1) << n << " " << t;
  }
}

// Each thread starts on its own contiguous share and walks it front to back;
// a thread held up on its first task has the rest of its share taken from
// the back by the others. (Every thread's first task waits until all have
// claimed one, so no thread finishes its share and steals before another
// has started: the OpenMP team's threads start at different times.)
TEST(ParallelForStreamsTest, ContiguousSharesAndStealing) {
  const int team = MaxThreads();
  if (team < 2) GTEST_SKIP() << "MaxThreads() = " << team << ": no second thread";
  const int64_t n = 100 * team;
  std::mutex mu;
  std::vector<std::thread::id> ids;
  std::vector<std::vector<int64_t>> by_thread;
  std::atomic<int> started{0};
  ParallelForStreams(n, [&](int64_t t) {
    size_t i = 0;
    bool first = false;
    {
      std::lock_guard<std::mutex> lock(mu);
      while (i < ids.size() && ids[i] != std::this_thread::get_id()) ++i;
      if (i == ids.size()) {
        ids.push_back(std::this_thread::get_id());
        by_thread.emplace_back();
        first = true;
      }
      by_thread[i].push_back(t);
    }
    if (first) {
      started.fetch_add(1);
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (started.load() < team && std::chrono::steady_clock::now() < until) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    }
    if (t == 0) std::this_thread::sleep_for(std::chrono::milliseconds(200));
  });
  ASSERT_EQ(started.load(), team) << "not every thread of the team ran a task";
  std::vector<int> seen(static_cast<size_t>(n), 0);
  for (const auto& v : by_thread) {
    for (int64_t t : v) ++seen[static_cast<size_t>(t)];
  }
  for (int64_t t = 0; t < n; ++t) ASSERT_EQ(seen[static_cast<size_t>(t)], 1) << t;
  int thieves = 0;
  for (const auto& v : by_thread) {
    // The first task is the front of a share; the share runs front to back.
    ASSERT_EQ(v.front() % 100, 0) << "first task " << v.front();
    const int64_t share_end = v.front() + 100;
    size_t k = 1;
    while (k < v.size() && v[k] == v[k - 1] + 1 && v[k] < share_end) ++k;
    if (v.front() == 0) {
      // Held up 200 ms on task 0: the others took most of share 0.
      EXPECT_LT(v.size(), 50u) << "the other threads took little of the held-up thread's share";
      EXPECT_EQ(k, v.size()) << "the held-up thread ran its share's tasks out of order";
      continue;
    }
    EXPECT_EQ(k, 100u) << "thread starting at " << v.front() << " left its share at " << k;
    // Then steals: each task from the back of a share, below its last.
    if (k < v.size()) ++thieves;
    for (; k + 1 < v.size(); ++k) EXPECT_LT(v[k + 1], v[k] + 100) << k;
  }
  EXPECT_GE(thieves, 1) << "no thread took tasks of the held-up thread's share";
}

}  // namespace
}  // namespace vocabd
