// The LM head GEMM: logits = hidden x W^T with oneDNN matmul.
//
//   hidden  [M, hidden_size]          F32, row-major (M = rows, runtime)
//   W       [vocab_size, hidden_size] F32, row-major (embedding layout;
//           viewed by oneDNN as weights [K=hidden_size, N=vocab_size] with
//           strides {1, hidden_size}, i.e. format "ba", no copy)
//   logits  [M, vocab_size]           F32, row-major
//
// The primitive is built once with M = DNNL_RUNTIME_DIM_VAL and
// scratchpad_mode::user, so any thread may call Compute concurrently: each
// call creates its own memory objects for the actual M, its own stream, and
// uses a per-thread scratchpad buffer.
//
// Threading: Debian's libdnnl is built on OpenMP (libgomp). Each Compute call
// runs an OpenMP parallel region of omp_get_max_threads() threads (all cores
// unless OMP_NUM_THREADS says otherwise; 2 on the 2-core CI box). Concurrent
// Compute calls each start their own OpenMP team, which oversubscribes the
// cores; that is why the server funnels LM-head work through the dynamic
// batcher / ComputePool (few large GEMMs instead of many small concurrent
// ones). Results do not depend on which thread runs a call.
#ifndef VOCABD_LIB_LM_HEAD_H_
#define VOCABD_LIB_LM_HEAD_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace vocabd {

class LmHead {
 public:
  struct Options {
    // [vocab_size, hidden_size] row-major F32; not owned, never written, must
    // outlive the LmHead (for a tied head this is the embedding table itself,
    // so the model holds one copy). Read on every Compute, so changes to the
    // table are seen by later calls.
    const float* weights = nullptr;
    int64_t vocab_size = 0;
    int64_t hidden_size = 0;
  };
  // INVALID_ARGUMENT for null weights or non-positive sizes; INTERNAL when
  // oneDNN cannot create the primitive (its message included).
  static absl::StatusOr<std::unique_ptr<LmHead>> Create(const Options& options);
  ~LmHead();
  LmHead(const LmHead&) = delete;
  LmHead& operator=(const LmHead&) = delete;

  // logits[M, vocab_size] = hidden[M, hidden_size] x W^T, M = rows.
  // Thread-safe. INVALID_ARGUMENT for rows < 0 or null pointers with
  // rows > 0; rows == 0 is a no-op. oneDNN errors are returned as INTERNAL,
  // allocation failure as RESOURCE_EXHAUSTED; nothing is thrown.
  absl::Status Compute(const float* hidden, int64_t rows, float* logits) const;

  int64_t vocab_size() const;
  int64_t hidden_size() const;
  // oneDNN's implementation name for the primitive (e.g. "gemm:jit"), for
  // logs and diagnostics.
  std::string implementation() const;

 private:
  struct Impl;
  explicit LmHead(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace vocabd

#endif  // VOCABD_LIB_LM_HEAD_H_
