// What every RPC handler shares: the models, the compute pool, limits.
#ifndef VOCABD_SERVER_SERVICE_CONTEXT_H_
#define VOCABD_SERVER_SERVICE_CONTEXT_H_

#include <cstdint>

#include "lib/serving/compute_pool.h"
#include "server/metrics.h"
#include "lib/serving/model_registry.h"
#include "lib/serving/model_repository.h"
#include "lib/serving/request_memory.h"
#include "lib/tokenizer/tokenizer_ops.h"

namespace vocabd {

class CallTracker;

struct ServiceContext {
  ModelRegistry* registry = nullptr;
  // Loads/unloads models by name off the reactor threads (always set by
  // VocabdServer; its root may be empty = no --model-repository).
  ModelRepository* repository = nullptr;
  // Runs LM-head work and large position computations (PositionService,
  // see server/position_service.h) off the reactor threads.
  ComputePool* compute_pool = nullptr;
  // Runs large Tokenize / Detokenize calls (server/tokenizer_service.h):
  // a pool of its own (--tokenize-threads), so text work never queues ahead
  // of LM-head work. Null: they use compute_pool.
  ComputePool* tokenize_pool = nullptr;
  // Prometheus metrics (server/metrics.h): the batcher reports batch sizes with
  // metrics->ObserveBatchSize(rows), dropped work with RecordSkippedWork().
  // Null in tests that build a service without a server.
  Metrics* metrics = nullptr;
  // Limits + per-call accounting; handlers call
  // RejectIfNotAdmitted(tracker, ...) (server/call_tracker.h) first.
  CallTracker* tracker = nullptr;
  // --max-send-message-bytes: handlers refuse (RESOURCE_EXHAUSTED) a
  // response above it, or above protobuf's 2 GiB limit, before gRPC sees it
  // (server/response_size.h). 0 = only the 2 GiB limit.
  int64_t max_send_message_bytes = 0;
  // --max-request-memory-bytes: each RPC computes the bytes its work needs
  // from the request before allocating and refuses above this
  // (RESOURCE_EXHAUSTED, lib/serving/request_memory.h). <= 0 = no bound.
  int64_t max_request_memory_bytes = kDefaultMaxRequestMemoryBytes;
  // --max-text-bytes (TokenizerService/Tokenize).
  TokenizeLimits tokenize_limits;
};

}  // namespace vocabd

#endif  // VOCABD_SERVER_SERVICE_CONTEXT_H_
