// Dynamic batching in front of the LM head (in the style of Triton's
// dynamic_batching and TEI's max-batch-tokens): concurrent requests' rows are
// concatenated into one [sum rows, hidden_size] matrix, one LmHead::Compute
// runs on it, and each request gets back its own slice of the logits.
//
// Per-request work stays per request: each Item's `prepare` writes its own
// GEMM input rows (final norm or not, its own hidden rows) and its `finish`
// post-processes its own logits rows (temperature, vocab mask, log-softmax,
// targets, top-k, output dtype). Batching therefore never changes a result:
// oneDNN's f32/bf16 matmul computes each output row from that row of src
// only (tests/lib/serving/dynamic_batcher_test.cc checks bit-identity).
//
// Scheduling: Submit never blocks. The first item queued while no batch
// loop is scheduled schedules one on the ComputePool; that loop waits until
// max_batch_rows rows are queued or the oldest item has waited
// max_queue_delay_us (not at all when the oldest item is a large one whose
// first slices have run: its last, shorter slice goes at once), takes items
// in FIFO order while their rows fit in max_batch_rows, drops items whose `check` fails (their `finish` gets that
// status and their rows are never computed), runs one GEMM, calls every
// `finish`, and repeats while items are queued. At most one batch per
// batcher runs at a time.
//
// Large items are split: an item with more rows than max_batch_rows is
// computed in slices of max_batch_rows rows (the last one shorter), one
// slice per GEMM, in row order, each slice alone in its batch. So no batch
// ever holds more than max_batch_rows rows of GEMM input and logits, however
// many rows one request has:
//
//   item rows [0 ............................................ R)
//   slices    [0, M) [M, 2M) [2M, 3M) ...               [kM, R)   M = max_batch_rows
//   GEMMs       #1     #2      #3                          #k+1
//
// Queue bound: an item is accepted when queued rows + its rows stay within
// max_queue_rows, or when nothing is queued (an item larger than
// max_queue_rows enters an empty queue and its slices are then the only
// rows waiting until they drain below the bound; this keeps one request
// larger than the queue servable while the bound still limits what waits).
//
// Cancelled calls do not hold the queue: when an item would push queued
// rows over max_queue_rows, Submit first runs the `check` of every queued
// item; those that fail (call cancelled, deadline passed while waiting) stop
// counting at once and are finished with their check status -- on the
// submitting thread, after the batcher's lock is released, or, for the
// item whose slice is running in a batch, by the batch loop when that slice
// is done. Only then is the new item refused if it still does not fit.
//
// Errors: Submit returns RESOURCE_EXHAUSTED (naming max_queue_rows and the
// queued rows) when the item would push queued rows over max_queue_rows on a
// non-empty queue, or when the pool refuses the batch loop; UNAVAILABLE
// after Shutdown(). When Submit returns an error, `finish` is NOT called.
#ifndef VOCABD_LIB_SERVING_DYNAMIC_BATCHER_H_
#define VOCABD_LIB_SERVING_DYNAMIC_BATCHER_H_

#include <cstdint>
#include <functional>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "lib/serving/compute_pool.h"
#include "lib/head/lm_head.h"

namespace vocabd {

class DynamicBatcher {
 public:
  struct Options {
    // Most rows concatenated into one GEMM (>= 1).
    int64_t max_batch_rows = 256;
    // How long the first queued item may wait for more rows, microseconds
    // (>= 0; 0 = run with whatever is queued, as Triton's default).
    int64_t max_queue_delay_us = 0;
    // Most rows waiting (not yet in a running batch) before Submit answers
    // RESOURCE_EXHAUSTED (>= max_batch_rows).
    int64_t max_queue_rows = 4096;
    // Called with the row count of every GEMM the batcher runs (after
    // dropping cancelled items), before it runs. For metrics and tests.
    std::function<void(int64_t rows)> on_batch;
  };

  struct Item {
    // Rows this item adds to the GEMM (>= 1).
    int64_t rows = 0;
    // Returns non-OK to drop the item before compute (cancelled call,
    // expired deadline); that status is passed to `finish`. Optional.
    std::function<absl::Status()> check;
    // Writes GEMM input rows [first_row, first_row + rows) of the item,
    // [rows, hidden_size] F32, to `dst` (one slice; the whole item when it
    // fits in max_batch_rows). Runs on a compute thread. Required.
    std::function<absl::Status(int64_t first_row, int64_t rows, float* dst)> prepare;
    // Called on a compute thread once per slice, in row order, with OK and
    // the slice's logits rows [rows, vocab_size] F32 (writable, valid only
    // during the call); the item is complete when first_row + rows equals
    // the item's rows. On an error (check, prepare, allocation, GEMM) it is
    // called once with that status, rows 0 and nullptr, and never again
    // (the item's remaining slices are dropped); for an item whose check
    // failed in another item's Submit, that call runs on the submitting
    // thread (see "Cancelled calls" above). Must not block or throw.
    // Required. The OK calls of one batch's items run concurrently on the
    // OpenMP threads (lib/core/parallel.h), so `finish` of different items
    // must not share unsynchronised state (slices of one item never run
    // concurrently).
    std::function<void(absl::Status status, int64_t first_row, int64_t rows, float* logits)>
        finish;
  };

  // INVALID_ARGUMENT naming the option for max_batch_rows < 1,
  // max_queue_delay_us < 0 or max_queue_rows < max_batch_rows, or a null
  // head/pool. `head` and `pool` are shared/not owned: the pool must stay
  // alive while batches may be scheduled (the server shuts the pool down,
  // which runs queued batch loops, before destroying it).
  static absl::StatusOr<std::unique_ptr<DynamicBatcher>> Create(
      const Options& options, std::shared_ptr<const LmHead> head, ComputePool* pool);
  // Stops accepting; queued items are still computed by the batch loop.
  ~DynamicBatcher();
  DynamicBatcher(const DynamicBatcher&) = delete;
  DynamicBatcher& operator=(const DynamicBatcher&) = delete;

  // Queues `item`; never blocks. INVALID_ARGUMENT for rows < 1 or missing
  // prepare/finish. See the header comment for the other errors.
  absl::Status Submit(Item item);
  // Rows waiting for a batch (for metrics).
  int64_t queued_rows() const;
  const Options& options() const;

  // Implementation detail (the queue shared with scheduled batch loops).
  struct State;

 private:
  explicit DynamicBatcher(std::shared_ptr<State> state);
  // Shared with scheduled batch loops so they may outlive the batcher.
  std::shared_ptr<State> state_;
};

}  // namespace vocabd

#endif  // VOCABD_LIB_SERVING_DYNAMIC_BATCHER_H_
