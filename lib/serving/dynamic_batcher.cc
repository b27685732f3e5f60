#include "lib/serving/dynamic_batcher.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <exception>
#include <deque>
#include <mutex>
#include <new>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lib/core/parallel.h"

namespace vocabd {

using Clock = std::chrono::steady_clock;

// An item in the queue: the rows not yet taken into a batch start at
// next_row. `failed` is set once finish got (or is about to get) an error;
// its remaining slices are then skipped. It is set under State::mu while
// the item may still be in the queue (Fail, RunBatch's checks), so that a
// Submit's ReleaseCancelled never runs the check of a call being finished.
//
// `in_flight` (guarded by State::mu) is set while a slice of the item runs
// in a batch and the item's later slices wait at the queue's front.
// `dropped` (guarded by State::mu) holds the check status of such an item
// when a Submit found its call cancelled while the slice ran: its remaining
// rows no longer count in queued_rows, and the batch loop finishes it with
// that status once the slice is done.
struct QueuedItem {
  DynamicBatcher::Item item;
  int64_t next_row = 0;
  std::atomic<bool> failed{false};
  bool in_flight = false;
  std::optional<absl::Status> dropped;
};

struct DynamicBatcher::State {
  Options options;
  std::shared_ptr<const LmHead> head;
  ComputePool* pool = nullptr;

  struct Entry {
    std::shared_ptr<QueuedItem> item;
    Clock::time_point enqueued;
  };
  mutable std::mutex mu;
  std::condition_variable cv;
  std::deque<Entry> queue;
  int64_t queued_rows = 0;
  bool scheduled = false;  // a batch loop is queued on or running in the pool
  bool stopping = false;
};

namespace {

// One slice of an item in a batch: rows [first_row, first_row + rows).
struct Slice {
  std::shared_ptr<QueuedItem> item;
  int64_t first_row = 0;
  int64_t rows = 0;
};

// `failed` is set under s.mu: a Submit's ReleaseCancelled (which holds it)
// then either sees it and leaves the item alone, or has finished calling
// the item's check before finish ends the call (and frees what check reads).
void Fail(DynamicBatcher::State& s, Slice& slice, const absl::Status& status) {
  {
    std::lock_guard<std::mutex> lock(s.mu);
    slice.item->failed.store(true);
  }
  slice.item->item.finish(status, slice.first_row, 0, nullptr);
}

// An item taken out of the queue by ReleaseCancelled, finished with `status`
// outside the lock.
struct Released {
  std::shared_ptr<QueuedItem> item;
  absl::Status status;
};

void FinishReleased(std::vector<Released>& released) {
  for (Released& r : released) {
    r.item->failed.store(true);
    r.item->item.finish(r.status, r.item->next_row, 0, nullptr);
  }
  released.clear();
}

// Called under s.mu by a Submit that would overflow the queue: every queued
// item whose check fails (its call was cancelled or its deadline passed
// while it waited) stops counting in queued_rows. Items with no slice in a
// running batch leave the queue and are appended to `released`; the front
// item whose slice is running is marked `dropped` for the batch loop. So
// abandoned calls never hold the queue's room until the loop reaches them.
void ReleaseCancelled(DynamicBatcher::State& s, std::vector<Released>& released) {
  for (auto it = s.queue.begin(); it != s.queue.end();) {
    QueuedItem& q = *it->item;
    // Dropped already, or failed (finished by a failed slice; the loop pops
    // it), or nothing to check.
    if (q.dropped.has_value() || q.failed.load() || !q.item.check) {
      ++it;
      continue;
    }
    absl::Status st = q.item.check();
    if (st.ok()) {
      ++it;
      continue;
    }
    s.queued_rows -= q.item.rows - q.next_row;
    if (q.in_flight) {
      q.dropped = std::move(st);
      ++it;
      continue;
    }
    released.push_back({it->item, std::move(st)});
    it = s.queue.erase(it);
  }
}

void FailAll(DynamicBatcher::State& s, std::vector<Slice*>& slices, const absl::Status& status) {
  for (Slice* slice : slices) Fail(s, *slice, status);
  slices.clear();
}

// Computes one batch outside the lock. Every slice's finish is called once.
void RunBatch(DynamicBatcher::State& s, std::vector<Slice>& batch) {
  // The checks run under s.mu, as ReleaseCancelled's do, so one call's
  // check never runs on two threads and a failed one is counted once.
  std::vector<Slice*> live;
  std::vector<std::pair<Slice*, absl::Status>> dropped;  // finished outside the lock
  live.reserve(batch.size());
  {
    std::lock_guard<std::mutex> lock(s.mu);
    for (Slice& slice : batch) {
      QueuedItem& q = *slice.item;
      // Finished already (an earlier slice failed), or dropped by a Submit
      // after this slice was taken (the batch loop finishes it).
      if (q.failed.load() || q.dropped.has_value()) continue;
      if (q.item.check) {
        absl::Status st = q.item.check();
        if (!st.ok()) {
          q.failed.store(true);
          dropped.emplace_back(&slice, std::move(st));  // never computed
          continue;
        }
      }
      live.push_back(&slice);
    }
  }
  for (auto& [slice, st] : dropped) slice->item->item.finish(st, slice->first_row, 0, nullptr);
  if (live.empty()) return;
  const int64_t hidden = s.head->hidden_size();
  const int64_t vocab = s.head->vocab_size();
  int64_t total = 0;
  for (Slice* slice : live) total += slice->rows;
  // Uninitialised: prepare writes every input row and Compute every logit
  // (zero-filling them cost a 33 MB memset per 64-row batch of a
  // 128,256-token head).
  std::unique_ptr<float[]> input(new (std::nothrow) float[static_cast<size_t>(total * hidden)]);
  std::unique_ptr<float[]> logits;
  if (input == nullptr) {
    FailAll(s, live, absl::ResourceExhaustedError(absl::StrCat(
                      "dynamic batcher: out of memory for ", total, " rows x hidden_size ",
                      hidden, " x 4 bytes of GEMM input")));
    return;
  }
  // Prepare each slice's rows; a slice whose prepare fails is finished now
  // and its place closed up.
  std::vector<Slice*> ready;
  int64_t offset = 0;
  for (Slice* slice : live) {
    absl::Status st =
        slice->item->item.prepare(slice->first_row, slice->rows, input.get() + offset * hidden);
    if (!st.ok()) {
      Fail(s, *slice, st);
      continue;
    }
    offset += slice->rows;
    ready.push_back(slice);
  }
  if (ready.empty()) return;
  logits.reset(new (std::nothrow) float[static_cast<size_t>(offset * vocab)]);
  if (logits == nullptr) {
    FailAll(s, ready, absl::ResourceExhaustedError(absl::StrCat(
                       "dynamic batcher: out of memory for ", offset, " rows x vocab_size ",
                       vocab, " x 4 bytes of logits")));
    return;
  }
  if (s.options.on_batch) s.options.on_batch(offset);
  absl::Status st = s.head->Compute(input.get(), offset, logits.get());
  if (!st.ok()) {
    FailAll(s, ready, st);
    return;
  }
  std::vector<int64_t> first_row(ready.size());
  int64_t row = 0;
  for (size_t i = 0; i < ready.size(); ++i) {
    first_row[i] = row;
    row += ready[i]->rows;
  }
  // Post-processing (scores, top-k, output encoding) is per item: items run
  // in parallel over the OpenMP threads, one parallel region for the whole
  // batch (a lone item parallelises inside, over its rows or vocab chunks).
  ParallelFor(static_cast<int64_t>(ready.size()), [&](int64_t i) {
    try {
      ready[i]->item->item.finish(absl::OkStatus(), ready[i]->first_row, ready[i]->rows,
                                  logits.get() + first_row[i] * vocab);
    } catch (const std::exception& e) {
      // finish must not throw; never let it escape a parallel region.
      std::fprintf(stderr, "vocabd DynamicBatcher: finish threw: %s\n", e.what());
    }
  });
}

// The batch loop: runs on a pool worker. Holds `s` so it may outlive the
// DynamicBatcher.
void BatchLoop(std::shared_ptr<DynamicBatcher::State> s) {
  std::unique_lock<std::mutex> lock(s->mu);
  while (true) {
    // Items whose earlier slice failed leave the queue without computing;
    // an item dropped by a Submit while its slice ran (its rows already
    // uncounted) leaves and is finished with its check status.
    while (!s->queue.empty()) {
      QueuedItem& q = *s->queue.front().item;
      if (q.failed.load()) {
        if (!q.dropped.has_value()) s->queued_rows -= q.item.rows - q.next_row;
        s->queue.pop_front();
        continue;
      }
      if (!q.dropped.has_value()) break;
      std::vector<Released> released{{s->queue.front().item, *q.dropped}};
      s->queue.pop_front();
      lock.unlock();
      FinishReleased(released);
      lock.lock();
    }
    if (s->queue.empty()) {
      s->scheduled = false;
      return;
    }
    // An item whose first slices have run does not wait for company: its
    // call is being served, and waiting would only delay its last slice.
    const bool started = s->queue.front().item->next_row > 0;
    const Clock::time_point deadline =
        s->queue.front().enqueued + std::chrono::microseconds(s->options.max_queue_delay_us);
    while (!started && !s->stopping && s->queued_rows < s->options.max_batch_rows &&
           Clock::now() < deadline) {
      s->cv.wait_until(lock, deadline);
    }
    std::vector<Slice> batch;
    int64_t rows = 0;
    const int64_t max_rows = s->options.max_batch_rows;
    while (!s->queue.empty()) {
      DynamicBatcher::State::Entry& e = s->queue.front();
      QueuedItem& q = *e.item;
      const int64_t remaining = q.item.rows - q.next_row;
      if (q.failed.load()) {
        s->queued_rows -= remaining;
        s->queue.pop_front();
        continue;
      }
      if (rows + remaining <= max_rows) {
        batch.push_back({e.item, q.next_row, remaining});
        rows += remaining;
        s->queued_rows -= remaining;
        s->queue.pop_front();
        continue;
      }
      if (batch.empty()) {
        // Larger than one batch: one slice of max_batch_rows; the rest stays
        // at the front for the next batches.
        batch.push_back({e.item, q.next_row, max_rows});
        q.next_row += max_rows;
        q.in_flight = true;
        s->queued_rows -= max_rows;
      }
      break;
    }
    lock.unlock();
    RunBatch(*s, batch);
    lock.lock();
    for (Slice& slice : batch) slice.item->in_flight = false;
    lock.unlock();
    batch.clear();  // release the items' captures outside the lock
    lock.lock();
    if (!s->queue.empty() && !s->stopping) {
      // Yield the worker so other models' batch loops get a turn; loop
      // inline if the pool cannot take the task.
      absl::Status resubmitted = s->pool->Submit([s] { BatchLoop(s); });
      if (resubmitted.ok()) return;  // still scheduled
    }
  }
}

}  // namespace

DynamicBatcher::DynamicBatcher(std::shared_ptr<State> state) : state_(std::move(state)) {}

DynamicBatcher::~DynamicBatcher() {
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->stopping = true;
  state_->cv.notify_all();
}

absl::StatusOr<std::unique_ptr<DynamicBatcher>> DynamicBatcher::Create(
    const Options& options, std::shared_ptr<const LmHead> head, ComputePool* pool) {
  if (options.max_batch_rows < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_batch_rows = ", options.max_batch_rows, " must be >= 1"));
  }
  if (options.max_queue_delay_us < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_queue_delay_us = ", options.max_queue_delay_us, " must be >= 0"));
  }
  if (options.max_queue_rows < options.max_batch_rows) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_queue_rows = ", options.max_queue_rows,
                     " must be >= max_batch_rows = ", options.max_batch_rows));
  }
  if (head == nullptr) return absl::InvalidArgumentError("dynamic batcher: head is null");
  if (pool == nullptr) return absl::InvalidArgumentError("dynamic batcher: pool is null");
  auto state = std::make_shared<State>();
  state->options = options;
  state->head = std::move(head);
  state->pool = pool;
  return std::unique_ptr<DynamicBatcher>(new DynamicBatcher(std::move(state)));
}

namespace {

// Submit's work under the lock; items it releases are finished by the caller
// after the lock is released.
absl::Status SubmitLocked(const std::shared_ptr<DynamicBatcher::State>& state,
                          DynamicBatcher::Item item, std::vector<Released>& released) {
  DynamicBatcher::State& s = *state;
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.stopping) return absl::UnavailableError("dynamic batcher is shutting down");
  // An item larger than the queue may enter an empty one (see the header).
  const auto overflows = [&s, &item] {
    return s.queued_rows > 0 && s.queued_rows + item.rows > s.options.max_queue_rows;
  };
  if (overflows()) ReleaseCancelled(s, released);
  if (overflows()) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "LM-head queue is full: ", s.queued_rows, " rows queued + ", item.rows,
        " requested > max_queue_rows = ", s.options.max_queue_rows, " (--max-queue-rows)"));
  }
  if (!s.scheduled) {
    std::shared_ptr<DynamicBatcher::State> shared = state;
    absl::Status submitted = s.pool->Submit([shared] { BatchLoop(shared); });
    if (!submitted.ok()) return submitted;
    s.scheduled = true;
  }
  s.queued_rows += item.rows;
  auto queued = std::make_shared<QueuedItem>();
  queued->item = std::move(item);
  s.queue.push_back({std::move(queued), Clock::now()});
  if (s.queued_rows >= s.options.max_batch_rows) s.cv.notify_all();
  return absl::OkStatus();
}

}  // namespace

absl::Status DynamicBatcher::Submit(Item item) {
  if (item.rows < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("dynamic batcher: item rows = ", item.rows, " must be >= 1"));
  }
  if (!item.prepare || !item.finish) {
    return absl::InvalidArgumentError("dynamic batcher: item needs prepare and finish");
  }
  std::vector<Released> released;  // finished after the lock is released
  absl::Status status = SubmitLocked(state_, std::move(item), released);
  FinishReleased(released);
  return status;
}

int64_t DynamicBatcher::queued_rows() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->queued_rows;
}

const DynamicBatcher::Options& DynamicBatcher::options() const { return state_->options; }

}  // namespace vocabd
