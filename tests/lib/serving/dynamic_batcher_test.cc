// DynamicBatcher: batched results are deterministic and equal to unbatched
// ones (up to oneDNN's M-dependent f32 summation order), the
// queue bound answers RESOURCE_EXHAUSTED, cancelled items are never computed
// and give their queue room back to the next Submit
// (counted through the on_batch hook), options are validated. Deterministic:
// the single pool worker is held by a gate task while items are queued, so
// batch composition never depends on timing.
#include "lib/serving/dynamic_batcher.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <future>
#include <memory>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace vocabd {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr int64_t kVocab = 97;
constexpr int64_t kHidden = 24;

class DynamicBatcherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::mt19937 rng(7);
    std::normal_distribution<float> dist(0.0f, 1.0f);
    weights_.resize(kVocab * kHidden);
    for (float& w : weights_) w = dist(rng);
    LmHead::Options o;
    o.weights = weights_.data();
    o.vocab_size = kVocab;
    o.hidden_size = kHidden;
    auto head = LmHead::Create(o);
    ASSERT_TRUE(head.ok()) << head.status();
    head_ = std::shared_ptr<const LmHead>(std::move(*head));
    auto pool = ComputePool::Create({1, 64});
    ASSERT_TRUE(pool.ok());
    pool_ = std::move(*pool);
  }

  // Occupies the only pool worker until Open() is called.
  void CloseGate() {
    ASSERT_TRUE(pool_->Submit([f = gate_.get_future().share()] { f.wait(); }).ok());
  }
  void OpenGate() { gate_.set_value(); }

  std::vector<float> Rows(int64_t rows, int seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
    std::vector<float> v(rows * kHidden);
    for (float& x : v) x = dist(rng);
    return v;
  }

  std::unique_ptr<DynamicBatcher> MakeBatcher(DynamicBatcher::Options o) {
    o.on_batch = [this](int64_t rows) {
      std::lock_guard<std::mutex> lock(mu_);
      batches_.push_back(rows);
    };
    auto b = DynamicBatcher::Create(o, head_, pool_.get());
    EXPECT_TRUE(b.ok()) << b.status();
    return b.ok() ? std::move(*b) : nullptr;
  }

  std::vector<int64_t> Batches() {
    std::lock_guard<std::mutex> lock(mu_);
    return batches_;
  }

  std::vector<float> weights_;
  std::shared_ptr<const LmHead> head_;
  std::unique_ptr<ComputePool> pool_;
  std::promise<void> gate_;
  std::mutex mu_;
  std::vector<int64_t> batches_;
};

struct Result {
  std::promise<absl::Status> status;
  std::vector<float> logits;
  std::atomic<int> prepared{0};
};

DynamicBatcher::Item MakeItem(const std::vector<float>* hidden, int64_t rows, Result* result,
                              absl::Status check_status = absl::OkStatus()) {
  DynamicBatcher::Item item;
  item.rows = rows;
  item.check = [check_status] { return check_status; };
  item.prepare = [hidden, result](int64_t first, int64_t n, float* dst) {
    result->prepared++;
    std::copy(hidden->begin() + first * kHidden, hidden->begin() + (first + n) * kHidden, dst);
    return absl::OkStatus();
  };
  item.finish = [rows, result](absl::Status st, int64_t first, int64_t n, float* logits) {
    if (!st.ok()) {
      result->status.set_value(st);
      return;
    }
    // Slices arrive in row order.
    EXPECT_EQ(static_cast<int64_t>(result->logits.size()), first * kVocab);
    result->logits.insert(result->logits.end(), logits, logits + n * kVocab);
    if (first + n == rows) result->status.set_value(st);
  };
  return item;
}

TEST_F(DynamicBatcherTest, ConcatenatesRowsDeterministicallyAndMatchesUnbatched) {
  auto batcher = MakeBatcher({/*max_batch_rows=*/8, /*max_queue_delay_us=*/0,
                              /*max_queue_rows=*/64, nullptr});
  ASSERT_NE(batcher, nullptr);
  const std::vector<int64_t> sizes = {1, 3, 2, 2, 5};
  std::vector<std::vector<float>> hidden;
  for (size_t i = 0; i < sizes.size(); ++i) hidden.push_back(Rows(sizes[i], 100 + i));
  std::vector<Result> results(sizes.size());
  CloseGate();
  for (size_t i = 0; i < sizes.size(); ++i) {
    ASSERT_TRUE(batcher->Submit(MakeItem(&hidden[i], sizes[i], &results[i])).ok());
  }
  EXPECT_EQ(batcher->queued_rows(), 13);
  OpenGate();
  std::vector<float> first_batch;  // what one 8-row GEMM of the same rows gives
  for (size_t i = 0; i < 4; ++i) {
    first_batch.insert(first_batch.end(), hidden[i].begin(), hidden[i].end());
  }
  std::vector<float> direct(8 * kVocab);
  ASSERT_TRUE(head_->Compute(first_batch.data(), 8, direct.data()).ok());
  int64_t row = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    ASSERT_TRUE(results[i].status.get_future().get().ok());
    // Deterministic: bit-identical to the same GEMM run directly.
    if (i < 4) {
      EXPECT_TRUE(std::equal(results[i].logits.begin(), results[i].logits.end(),
                             direct.begin() + row * kVocab))
          << "item " << i;
      row += sizes[i];
    }
    // Equal to the unbatched GEMM up to oneDNN's M-dependent summation order
    // (its f32 kernels differ for M = 1, 2..15, >= 16): normwise <= 1e-6.
    std::vector<float> alone(sizes[i] * kVocab);
    ASSERT_TRUE(head_->Compute(hidden[i].data(), sizes[i], alone.data()).ok());
    ASSERT_EQ(results[i].logits.size(), alone.size());
    for (int64_t r = 0; r < sizes[i]; ++r) {
      double err = 0, scale = 0;
      for (int64_t j = 0; j < kVocab; ++j) {
        err = std::max<double>(err, std::abs(results[i].logits[r * kVocab + j] -
                                             alone[r * kVocab + j]));
        scale = std::max<double>(scale, std::abs(alone[r * kVocab + j]));
      }
      EXPECT_LE(err, 1e-6 * scale) << "item " << i << " row " << r;
    }
  }
  // FIFO, at most 8 rows per GEMM: {1,3,2,2} then {5}.
  EXPECT_THAT(Batches(), ElementsAre(8, 5));
}

TEST_F(DynamicBatcherTest, ItemLargerThanMaxBatchRowsIsSplitIntoSlices) {
  auto batcher = MakeBatcher({4, 0, 64, nullptr});
  const std::vector<float> small = Rows(2, 1), big = Rows(9, 2), after = Rows(1, 3);
  Result a, b, c;
  CloseGate();
  ASSERT_TRUE(batcher->Submit(MakeItem(&small, 2, &a)).ok());
  ASSERT_TRUE(batcher->Submit(MakeItem(&big, 9, &b)).ok());
  ASSERT_TRUE(batcher->Submit(MakeItem(&after, 1, &c)).ok());
  OpenGate();
  EXPECT_TRUE(a.status.get_future().get().ok());
  EXPECT_TRUE(b.status.get_future().get().ok());
  EXPECT_TRUE(c.status.get_future().get().ok());
  // No GEMM above max_batch_rows: the 9 rows run as slices 4, 4 (alone) and
  // 1, which fits beside the next item (1 + 1).
  EXPECT_THAT(Batches(), ElementsAre(2, 4, 4, 2));
  EXPECT_EQ(b.prepared, 3);
  // Slices give the rows the whole item would (row-wise GEMM; same M-class
  // tolerance as ConcatenatesRows...).
  std::vector<float> alone(9 * kVocab);
  ASSERT_TRUE(head_->Compute(big.data(), 9, alone.data()).ok());
  ASSERT_EQ(b.logits.size(), alone.size());
  for (size_t j = 0; j < alone.size(); ++j) {
    ASSERT_NEAR(b.logits[j], alone[j], 1e-5 * (1 + std::abs(alone[j]))) << j;
  }
}

TEST_F(DynamicBatcherTest, ItemLargerThanTheQueueEntersAnEmptyQueueOnly) {
  auto batcher = MakeBatcher({4, 0, /*max_queue_rows=*/6, nullptr});
  const std::vector<float> h = Rows(20, 7);
  Result small, big, refused, big_alone;
  CloseGate();
  ASSERT_TRUE(batcher->Submit(MakeItem(&h, 1, &small)).ok());
  // 20 rows > max_queue_rows on a non-empty queue: refused, naming the flag.
  absl::Status full = batcher->Submit(MakeItem(&h, 20, &refused));
  EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(full.message(), HasSubstr("max_queue_rows = 6 (--max-queue-rows)"));
  OpenGate();
  EXPECT_TRUE(small.status.get_future().get().ok());
  // Empty queue: accepted and computed in slices of 4.
  std::promise<void> gate2;
  ASSERT_TRUE(pool_->Submit([f = gate2.get_future().share()] { f.wait(); }).ok());
  ASSERT_TRUE(batcher->Submit(MakeItem(&h, 20, &big_alone)).ok());
  // While its rows wait, the bound holds for everyone else.
  EXPECT_EQ(batcher->Submit(MakeItem(&h, 1, &refused)).code(),
            absl::StatusCode::kResourceExhausted);
  gate2.set_value();
  EXPECT_TRUE(big_alone.status.get_future().get().ok());
  EXPECT_EQ(big_alone.logits.size(), 20u * kVocab);
  EXPECT_THAT(Batches(), ElementsAre(1, 4, 4, 4, 4, 4));
}

TEST_F(DynamicBatcherTest, FailedSliceDropsTheRestOfItsItem) {
  auto batcher = MakeBatcher({4, 0, 64, nullptr});
  const std::vector<float> h = Rows(10, 8);
  Result r, next;
  std::atomic<int> checks{0};
  DynamicBatcher::Item item = MakeItem(&h, 10, &r);
  // The second slice's check fails (a call cancelled mid-way).
  item.check = [&checks] {
    return ++checks == 2 ? absl::CancelledError("cancelled") : absl::OkStatus();
  };
  CloseGate();
  ASSERT_TRUE(batcher->Submit(std::move(item)).ok());
  ASSERT_TRUE(batcher->Submit(MakeItem(&h, 2, &next)).ok());
  OpenGate();
  EXPECT_EQ(r.status.get_future().get().code(), absl::StatusCode::kCancelled);
  EXPECT_TRUE(next.status.get_future().get().ok());
  EXPECT_EQ(r.prepared, 1);
  EXPECT_EQ(batcher->queued_rows(), 0);
  EXPECT_THAT(Batches(), ElementsAre(4, 2));
}

TEST_F(DynamicBatcherTest, FullQueueIsResourceExhaustedAndOthersStillServed) {
  auto batcher = MakeBatcher({4, 0, /*max_queue_rows=*/6, nullptr});
  const std::vector<float> h = Rows(4, 3);
  Result a, b, c;
  CloseGate();
  ASSERT_TRUE(batcher->Submit(MakeItem(&h, 4, &a)).ok());
  ASSERT_TRUE(batcher->Submit(MakeItem(&h, 2, &b)).ok());
  absl::Status full = batcher->Submit(MakeItem(&h, 1, &c));
  EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(full.message(), HasSubstr("max_queue_rows = 6"));
  EXPECT_THAT(full.message(), HasSubstr("6 rows queued"));
  EXPECT_EQ(c.prepared, 0);
  OpenGate();
  EXPECT_TRUE(a.status.get_future().get().ok());
  EXPECT_TRUE(b.status.get_future().get().ok());
  // Room again once the queue drained.
  Result d;
  ASSERT_TRUE(batcher->Submit(MakeItem(&h, 3, &d)).ok());
  EXPECT_TRUE(d.status.get_future().get().ok());
  EXPECT_THAT(Batches(), ElementsAre(4, 2, 3));
}

TEST_F(DynamicBatcherTest, CancelledItemsAreDroppedBeforeCompute) {
  auto batcher = MakeBatcher({16, 0, 64, nullptr});
  const std::vector<float> h = Rows(3, 4);
  Result a, cancelled, expired, d;
  CloseGate();
  ASSERT_TRUE(batcher->Submit(MakeItem(&h, 2, &a)).ok());
  ASSERT_TRUE(
      batcher->Submit(MakeItem(&h, 3, &cancelled, absl::CancelledError("call cancelled"))).ok());
  ASSERT_TRUE(
      batcher->Submit(MakeItem(&h, 1, &expired, absl::DeadlineExceededError("expired"))).ok());
  ASSERT_TRUE(batcher->Submit(MakeItem(&h, 3, &d)).ok());
  OpenGate();
  EXPECT_TRUE(a.status.get_future().get().ok());
  EXPECT_EQ(cancelled.status.get_future().get().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(expired.status.get_future().get().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(d.status.get_future().get().ok());
  EXPECT_EQ(cancelled.prepared, 0);
  EXPECT_EQ(expired.prepared, 0);
  // Only the 2 + 3 live rows reached the GEMM.
  EXPECT_THAT(Batches(), ElementsAre(5));
  // d's rows are rows 2..4 of that 5-row GEMM ([a's 2 rows; d's 3 rows]),
  // bit for bit. (The head's kernel may depend on the number of rows, so
  // the reference is the same 5-row call, not d's 3 rows alone.)
  std::vector<float> batch(h.begin(), h.begin() + 2 * kHidden);
  batch.insert(batch.end(), h.begin(), h.begin() + 3 * kHidden);
  std::vector<float> five(5 * kVocab);
  ASSERT_TRUE(head_->Compute(batch.data(), 5, five.data()).ok());
  EXPECT_EQ(d.logits, std::vector<float>(five.begin() + 2 * kVocab, five.end()));
}

TEST_F(DynamicBatcherTest, CancelledItemsDoNotHoldTheQueue) {
  auto batcher = MakeBatcher({4, 0, /*max_queue_rows=*/6, nullptr});
  const std::vector<float> h = Rows(4, 9);
  Result a, b, c;
  std::atomic<bool> a_cancelled{false};
  DynamicBatcher::Item item = MakeItem(&h, 4, &a);
  item.check = [&a_cancelled] {
    return a_cancelled ? absl::CancelledError("call cancelled") : absl::OkStatus();
  };
  CloseGate();
  ASSERT_TRUE(batcher->Submit(std::move(item)).ok());
  ASSERT_TRUE(batcher->Submit(MakeItem(&h, 2, &b)).ok());
  // Full while a's call is live.
  EXPECT_EQ(batcher->Submit(MakeItem(&h, 1, &c)).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(c.prepared, 0);
  // a's caller goes away: the next Submit finds it, finishes it (before any
  // batch runs: the only worker is still held) and takes its room.
  a_cancelled = true;
  Result c2;
  ASSERT_TRUE(batcher->Submit(MakeItem(&h, 1, &c2)).ok());
  auto fa = a.status.get_future();
  ASSERT_EQ(fa.wait_for(std::chrono::seconds(0)), std::future_status::ready);
  EXPECT_EQ(fa.get().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(batcher->queued_rows(), 3);
  OpenGate();
  EXPECT_TRUE(b.status.get_future().get().ok());
  EXPECT_TRUE(c2.status.get_future().get().ok());
  EXPECT_EQ(a.prepared, 0);
  EXPECT_THAT(Batches(), ElementsAre(3));
}

TEST_F(DynamicBatcherTest, ItemCancelledWhileItsSliceRunsIsFinishedAfterTheSlice) {
  auto batcher = MakeBatcher({4, 0, /*max_queue_rows=*/8, nullptr});
  const std::vector<float> h = Rows(10, 10);
  Result r, d;
  std::atomic<bool> cancelled{false};
  std::promise<void> slice_started, slice_may_go;
  auto may_go = slice_may_go.get_future().share();
  DynamicBatcher::Item item = MakeItem(&h, 10, &r);
  auto prepare = item.prepare;
  item.prepare = [&, prepare, may_go](int64_t first, int64_t n, float* dst) {
    if (first == 0) {
      slice_started.set_value();
      may_go.wait();
    }
    return prepare(first, n, dst);
  };
  item.check = [&cancelled] {
    return cancelled ? absl::CancelledError("call cancelled") : absl::OkStatus();
  };
  ASSERT_TRUE(batcher->Submit(std::move(item)).ok());
  slice_started.get_future().wait();  // rows [0, 4) are in a running batch
  EXPECT_EQ(batcher->queued_rows(), 6);
  // 6 waiting + 4 > 8, but the 6 belong to a cancelled call: they stop
  // counting, and the item is finished only once its running slice is done.
  cancelled = true;
  ASSERT_TRUE(batcher->Submit(MakeItem(&h, 4, &d)).ok());
  EXPECT_EQ(batcher->queued_rows(), 4);
  auto fr = r.status.get_future();
  EXPECT_EQ(fr.wait_for(std::chrono::seconds(0)), std::future_status::timeout);
  slice_may_go.set_value();
  EXPECT_EQ(fr.get().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(r.logits.size(), 4u * kVocab);  // the running slice's rows arrived first
  EXPECT_TRUE(d.status.get_future().get().ok());
  EXPECT_EQ(r.prepared, 1);
  EXPECT_EQ(batcher->queued_rows(), 0);
  EXPECT_THAT(Batches(), ElementsAre(4, 4));
}

// Callers on 4 threads submit items of 1-9 rows to a small queue while
// their calls are cancelled at random moments (before, while and after
// their slices run): every accepted item is finished exactly once (all its
// slices in row order, or one error), refused ones never, and the queue's
// count returns to 0. Run under TSan by the threads suite.
TEST_F(DynamicBatcherTest, ConcurrentCancellationsFinishEveryItemOnce) {
  auto batcher = MakeBatcher({4, 0, /*max_queue_rows=*/12, nullptr});
  const std::vector<float> h = Rows(9, 11);
  constexpr int kThreads = 4, kPerThread = 150;
  struct Call {
    int64_t rows = 0;
    std::atomic<bool> cancelled{false};
    std::atomic<int> ok_rows{0}, errors{0}, finishes{0};
    std::atomic<bool> accepted{false};
  };
  std::vector<std::unique_ptr<Call>> calls;
  for (int i = 0; i < kThreads * kPerThread; ++i) calls.push_back(std::make_unique<Call>());
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(100 + t);
      for (int i = 0; i < kPerThread; ++i) {
        Call& c = *calls[t * kPerThread + i];
        c.rows = 1 + static_cast<int64_t>(rng() % 9);
        auto make_item = [&c, &h] {
          DynamicBatcher::Item item;
          item.rows = c.rows;
          item.check = [&c] {
            return c.cancelled ? absl::CancelledError("call cancelled") : absl::OkStatus();
          };
          item.prepare = [&h](int64_t first, int64_t n, float* dst) {
            std::copy(h.begin() + first * kHidden, h.begin() + (first + n) * kHidden, dst);
            return absl::OkStatus();
          };
          item.finish = [&c](absl::Status st, int64_t first, int64_t n, float*) {
            if (!st.ok()) {
              c.errors++;
              c.finishes++;
              return;
            }
            EXPECT_EQ(first, c.ok_rows.load());  // slices in row order
            c.ok_rows += static_cast<int>(n);
            if (first + n == c.rows) c.finishes++;
          };
          return item;
        };
        // A refused caller retries a few times, as clients do.
        for (int attempt = 0; attempt < 20 && !c.accepted; ++attempt) {
          if (attempt > 0) std::this_thread::sleep_for(std::chrono::microseconds(100));
          c.accepted = batcher->Submit(make_item()).ok();
        }
        // Cancel some calls right away, some a little later, most never.
        const unsigned r = rng() % 8;
        if (r == 0) c.cancelled = true;
        if (r == 1) {
          std::this_thread::yield();
          c.cancelled = true;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int spin = 0; spin < 10000; ++spin) {
    bool done = true;
    for (auto& c : calls) done = done && (!c->accepted || c->finishes.load() > 0);
    if (done) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  int accepted = 0, refused = 0, failed = 0;
  for (auto& c : calls) {
    if (!c->accepted) {
      ++refused;
      EXPECT_EQ(c->finishes, 0);
      continue;
    }
    ++accepted;
    EXPECT_EQ(c->finishes, 1);
    EXPECT_LE(c->errors, 1);
    if (c->errors == 0) {
      EXPECT_EQ(c->ok_rows, c->rows);
    }
    failed += c->errors;
  }
  EXPECT_EQ(accepted + refused, kThreads * kPerThread);
  EXPECT_GT(accepted, 0);
  EXPECT_EQ(batcher->queued_rows(), 0);
  std::printf("accepted %d (of which cancelled %d), refused %d\n", accepted, failed, refused);
}

// The delay is for gathering rows: once a large item's slices have started,
// its last, shorter slice does not wait for more (it used to wait out the
// whole delay: a 10-row item with max_batch_rows 4 took max_queue_delay_us).
TEST_F(DynamicBatcherTest, LastSliceOfAStartedItemDoesNotWaitForTheDelay) {
  auto batcher = MakeBatcher({4, /*max_queue_delay_us=*/60'000'000, 64, nullptr});
  const std::vector<float> h = Rows(10, 12);
  Result r;
  ASSERT_TRUE(batcher->Submit(MakeItem(&h, 10, &r)).ok());
  auto fr = r.status.get_future();
  ASSERT_EQ(fr.wait_for(std::chrono::seconds(30)), std::future_status::ready);
  EXPECT_TRUE(fr.get().ok());
  EXPECT_EQ(r.logits.size(), 10u * kVocab);
  EXPECT_THAT(Batches(), ElementsAre(4, 4, 2));
}

TEST_F(DynamicBatcherTest, QueueDelayWaitsForMoreRows) {
  // A long delay: the first item waits until max_batch_rows rows are queued.
  auto batcher = MakeBatcher({3, /*max_queue_delay_us=*/60'000'000, 64, nullptr});
  const std::vector<float> h = Rows(2, 5);
  Result a, b;
  ASSERT_TRUE(batcher->Submit(MakeItem(&h, 1, &a)).ok());
  auto fa = a.status.get_future();
  EXPECT_EQ(fa.wait_for(std::chrono::milliseconds(50)), std::future_status::timeout);
  ASSERT_TRUE(batcher->Submit(MakeItem(&h, 2, &b)).ok());
  EXPECT_TRUE(fa.get().ok());
  EXPECT_TRUE(b.status.get_future().get().ok());
  EXPECT_THAT(Batches(), ElementsAre(3));
}

TEST_F(DynamicBatcherTest, RejectsBadOptionsAndItems) {
  auto bad = [this](DynamicBatcher::Options o) {
    return DynamicBatcher::Create(o, head_, pool_.get()).status();
  };
  EXPECT_THAT(bad({0, 0, 8, nullptr}).message(), HasSubstr("max_batch_rows = 0"));
  EXPECT_THAT(bad({8, -1, 8, nullptr}).message(), HasSubstr("max_queue_delay_us = -1"));
  EXPECT_THAT(bad({8, 0, 4, nullptr}).message(),
              HasSubstr("max_queue_rows = 4 must be >= max_batch_rows = 8"));
  EXPECT_EQ(bad({0, 0, 8, nullptr}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(DynamicBatcher::Create({}, nullptr, pool_.get()).status().code(),
            absl::StatusCode::kInvalidArgument);
  auto batcher = MakeBatcher({});
  const std::vector<float> h = Rows(1, 6);
  Result r;
  EXPECT_THAT(batcher->Submit(MakeItem(&h, 0, &r)).message(), HasSubstr("rows = 0"));
  DynamicBatcher::Item no_finish = MakeItem(&h, 1, &r);
  no_finish.finish = nullptr;
  EXPECT_EQ(batcher->Submit(std::move(no_finish)).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace vocabd
