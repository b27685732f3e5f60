// Process-wide Prometheus metrics for vocabd, kept in a prometheus-cpp
// Registry and rendered by prometheus::TextSerializer in the text exposition
// format 0.0.4 (server/metrics_http.cc serves it on --metrics-listen at
// /metrics). No gRPC here: gRPC status codes arrive as their canonical names
// ("OK", "INVALID_ARGUMENT", ...). prometheus-cpp stays behind this header
// (it is a private dependency of vocabd_server).
//
// Families (all names prefixed vocabd_):
//   requests_total{method,code}               counter  finished RPCs (calls refused
//                                                      by token auth included)
//   request_duration_seconds{method}          histogram  call start -> status sent
//   in_flight_requests                        gauge    RPCs started, status not yet sent
//   queue_depth{queue}                        gauge    sampled at scrape time: the
//                                                      sources registered with
//                                                      SetQueueDepthSource() plus
//                                                      "lm_head:<model>" (rows waiting
//                                                      in a model's dynamic batcher,
//                                                      from SetModelSource())
//   batch_size_rows                           histogram  rows per LM-head GEMM (the
//                                                      batcher calls ObserveBatchSize)
//   skipped_work_total{reason}                counter  queued work dropped before
//                                                      compute: "cancelled",
//                                                      "deadline_exceeded"
//   rejected_requests_total{limit}            counter  calls refused by a limit:
//                                                      "max_concurrent_requests",
//                                                      "max_tokens_per_request"
//   model_resident_bytes{model}               gauge    bytes of the model's tensors
//                                                      and packed LM-head copy,
//                                                      sampled at scrape time from
//                                                      SetModelSource()
//   build_info{version,git_sha,compiler,onednn,build_type} gauge  always 1
// A labelled family appears once it has a series (prometheus-cpp leaves
// families without series out of the exposition).
//
// Thread-safe: every method may be called from any thread.
#ifndef VOCABD_SERVER_METRICS_H_
#define VOCABD_SERVER_METRICS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace vocabd {

class Metrics {
 public:
  struct Options {
    // request_duration_seconds bucket bounds (seconds, ascending, > 0).
    std::vector<double> latency_buckets_seconds = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                                   0.05,   0.1,   0.25,   0.5,   1,    2.5,
                                                   5,      10};
    // batch_size_rows bucket bounds (rows, ascending, > 0).
    std::vector<double> batch_size_buckets = {1,  2,   4,   8,   16,   32,   64,
                                              128, 256, 512, 1024, 2048, 4096, 8192};
    // INVALID_ARGUMENT naming the field when a bucket list is empty, not
    // ascending or not positive.
    absl::Status Validate() const;
  };
  static absl::StatusOr<std::unique_ptr<Metrics>> Create(const Options& options);
  ~Metrics();
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  // One finished RPC: `method` is the full gRPC path
  // ("/vocabd.v1.EmbeddingService/Embed"), `code` the canonical status name.
  void RecordRequest(const std::string& method, const std::string& code, double seconds);
  // The `method` label RecordRequest gives a gRPC :path, which the caller
  // chose (any call, including unknown methods gRPC answers UNIMPLEMENTED
  // and calls refused before routing): the path itself when it names a
  // method of a service linked into this binary ("/vocabd.v1.EmbeddingService/Embed"),
  // else "unknown", so made-up paths cannot add label values without bound.
  static std::string MethodLabel(const std::string& path);
  void AddInFlight(int64_t delta);
  int64_t in_flight() const;
  // Hook for the batcher / compute pool: one GEMM over `rows` rows.
  void ObserveBatchSize(int64_t rows);
  // Queue-depth gauge sampled at Render() time; one source per queue name
  // (a later call replaces it, an empty function removes it). The source is
  // called with the scrape lock held: it must not call Set*Source().
  void SetQueueDepthSource(const std::string& queue, std::function<int64_t()> source);

  // A model being served, as sampled at scrape time.
  struct ModelSample {
    std::string name;
    int64_t resident_bytes = 0;
    // Rows waiting in the model's LM-head dynamic batcher; unset when the
    // model has no batcher.
    std::optional<int64_t> lm_head_queued_rows;
  };
  // The models served right now (model_resident_bytes{model} and
  // queue_depth{queue="lm_head:<model>"}), sampled at every Render() so the
  // gauges follow loads and unloads by themselves. Same locking rule as
  // SetQueueDepthSource(); an empty function removes it.
  void SetModelSource(std::function<std::vector<ModelSample>()> source);

  void RecordSkippedWork(const std::string& reason);
  void RecordRejected(const std::string& limit);
  // build_info labels, e.g. {{"version","0.1.0"},{"git_sha","abc"}}
  // (replaces the previous set).
  void SetBuildInfo(std::vector<std::pair<std::string, std::string>> labels);

  // Counters for tests and logs (0 when never recorded).
  uint64_t requests(const std::string& method, const std::string& code) const;
  uint64_t skipped_work(const std::string& reason) const;
  uint64_t rejected(const std::string& limit) const;
  uint64_t batch_count() const;

  // The whole exposition (text/plain; version=0.0.4), rendered by
  // prometheus::TextSerializer.
  std::string Render() const;

 private:
  struct Impl;
  explicit Metrics(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace vocabd

#endif  // VOCABD_SERVER_METRICS_H_
