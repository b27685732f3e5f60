// CallTracker's --max-concurrent-requests slots: taken in arrival order when
// a call's interceptor is created, given back when its status is sent.
#include "server/call_tracker.h"

#include <atomic>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace vocabd {
namespace {

// The tracker only uses a context's address as a key.
const grpc::ServerContextBase* Ctx(const int& slot) {
  return reinterpret_cast<const grpc::ServerContextBase*>(&slot);
}

std::unique_ptr<CallTracker> MakeTracker(int max_concurrent_requests) {
  CallTracker::Options options;
  options.max_concurrent_requests = max_concurrent_requests;
  auto tracker = CallTracker::Create(options, nullptr);
  EXPECT_TRUE(tracker.ok()) << tracker.status();
  return tracker.ok() ? std::move(*tracker) : nullptr;
}

TEST(CallTrackerTest, SlotsGoInArrivalOrderAndOnlyHeldSlotsAreGivenBack) {
  auto tracker = MakeTracker(2);
  ASSERT_NE(tracker, nullptr);
  int a = 0, b = 0, c = 0, d = 0, e = 0;  // only their addresses are used
  tracker->CallStarted(Ctx(a));
  tracker->CallStarted(Ctx(b));
  tracker->CallStarted(Ctx(c));  // third of 2
  EXPECT_EQ(tracker->RefusedInFlight(Ctx(a)), 0);
  EXPECT_EQ(tracker->RefusedInFlight(Ctx(b)), 0);
  EXPECT_EQ(tracker->RefusedInFlight(Ctx(c)), 3);
  EXPECT_EQ(tracker->in_flight(), 3);
  tracker->CallEnded(Ctx(a));     // frees a slot
  tracker->CallStarted(Ctx(d));   // takes it, although c (refused) is still in flight
  EXPECT_EQ(tracker->RefusedInFlight(Ctx(d)), 0);
  tracker->CallEnded(Ctx(c));     // a refused call frees nothing
  tracker->CallStarted(Ctx(e));
  EXPECT_EQ(tracker->RefusedInFlight(Ctx(e)), 3);
  EXPECT_EQ(tracker->in_flight(), 3);
  for (const int* x : {&b, &d, &e}) tracker->CallEnded(Ctx(*x));
  EXPECT_EQ(tracker->in_flight(), 0);
  tracker->CallStarted(Ctx(a));
  tracker->CallStarted(Ctx(b));
  EXPECT_EQ(tracker->RefusedInFlight(Ctx(a)), 0);
  EXPECT_EQ(tracker->RefusedInFlight(Ctx(b)), 0);
}

TEST(CallTrackerTest, RacingArrivalsGetExactlyMaxSlots) {
  constexpr int kMax = 3, kCalls = 16;
  for (int round = 0; round < 20; ++round) {
    auto tracker = MakeTracker(kMax);
    ASSERT_NE(tracker, nullptr);
    std::vector<int> keys(kCalls);
    std::atomic<bool> go{false};
    std::vector<std::thread> threads;
    for (int i = 0; i < kCalls; ++i) {
      threads.emplace_back([&, i] {
        while (!go.load()) std::this_thread::yield();
        tracker->CallStarted(Ctx(keys[i]));
      });
    }
    go = true;
    for (auto& t : threads) t.join();
    int admitted = 0;
    for (const int& k : keys) admitted += tracker->RefusedInFlight(Ctx(k)) == 0 ? 1 : 0;
    EXPECT_EQ(admitted, kMax) << "round " << round;
  }
}

TEST(CallTrackerTest, NoLimitRefusesNothing) {
  auto tracker = MakeTracker(0);
  ASSERT_NE(tracker, nullptr);
  std::vector<int> keys(100);
  for (const int& k : keys) tracker->CallStarted(Ctx(k));
  for (const int& k : keys) EXPECT_EQ(tracker->RefusedInFlight(Ctx(k)), 0);
  EXPECT_EQ(tracker->in_flight(), 100);
}

}  // namespace
}  // namespace vocabd
