// Process-wide Prometheus metrics for vocabd, rendered in the Prometheus text
// exposition format 0.0.4 (server/metrics_http.cc serves it on
// --metrics-listen at /metrics). No gRPC here: gRPC status codes arrive as
// their canonical names ("OK", "INVALID_ARGUMENT", ...).
//
// Families (all names prefixed vocabd_):
//   requests_total{method,code}               counter  finished RPCs
//   request_duration_seconds{method}          histogram  call start -> status sent
//   in_flight_requests                        gauge    RPCs started, status not yet sent
//   queue_depth{queue}                        gauge    sampled at scrape time from the
//                                                      sources registered with
//                                                      SetQueueDepthSource()
//   batch_size_rows                           histogram  rows per LM-head GEMM (the
//                                                      batcher calls ObserveBatchSize)
//   skipped_work_total{reason}                counter  queued work dropped before
//                                                      compute: "cancelled",
//                                                      "deadline_exceeded"
//   rejected_requests_total{limit}            counter  calls refused by a limit:
//                                                      "max_concurrent_requests",
//                                                      "max_tokens_per_request"
//   model_resident_bytes{model}               gauge    bytes of the model's tensors
//   build_info{version,git_sha,compiler,onednn} gauge  always 1
//
// Thread-safe: every method may be called from any thread.
#ifndef VOCABD_SERVER_METRICS_H_
#define VOCABD_SERVER_METRICS_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace vocabd {

// Cumulative histogram with fixed upper bounds (Prometheus `le` buckets).
// Not thread-safe by itself (Metrics holds the lock).
class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);
  void Observe(double value);
  // Appends `name`_bucket/_sum/_count lines; `labels` is either empty or
  // `key="value",...` without braces.
  void Render(const std::string& name, const std::string& labels, std::string* out) const;
  uint64_t count() const { return count_; }
  double sum() const { return sum_; }

 private:
  std::vector<double> upper_bounds_;  // ascending, +Inf implied
  std::vector<uint64_t> counts_;      // per bucket (not cumulative), size bounds+1
  uint64_t count_ = 0;
  double sum_ = 0;
};

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

  // One finished RPC: `method` is the full gRPC path
  // ("/vocabd.v1.EmbeddingService/Embed"), `code` the canonical status name.
  void RecordRequest(const std::string& method, const std::string& code, double seconds);
  void AddInFlight(int64_t delta);
  int64_t in_flight() const;
  // Hook for the batcher / compute pool: one GEMM over `rows` rows.
  void ObserveBatchSize(int64_t rows);
  // Queue-depth gauge sampled at Render() time; one source per queue name
  // (a later call replaces it, an empty function removes it). The source is
  // called with the Metrics lock held: it must not call back into Metrics.
  void SetQueueDepthSource(const std::string& queue, std::function<int64_t()> source);
  void RecordSkippedWork(const std::string& reason);
  void RecordRejected(const std::string& limit);
  void SetModelResidentBytes(const std::string& model, int64_t bytes);
  void RemoveModel(const std::string& model);
  // build_info labels, e.g. {{"version","0.1.0"},{"git_sha","abc"}}.
  void SetBuildInfo(std::vector<std::pair<std::string, std::string>> labels);

  // Counters for tests and logs (0 when never recorded).
  uint64_t requests(const std::string& method, const std::string& code) const;
  uint64_t skipped_work(const std::string& reason) const;
  uint64_t rejected(const std::string& limit) const;
  uint64_t batch_count() const;

  // The whole exposition (text/plain; version=0.0.4).
  std::string Render() const;

 private:
  explicit Metrics(const Options& options);

  Options options_;
  mutable std::mutex mu_;
  std::map<std::pair<std::string, std::string>, uint64_t> requests_;  // (method, code)
  std::map<std::string, Histogram> latency_;                         // method
  int64_t in_flight_ = 0;
  Histogram batch_size_;
  std::map<std::string, std::function<int64_t()>> queue_sources_;
  std::map<std::string, uint64_t> skipped_;
  std::map<std::string, uint64_t> rejected_;
  std::map<std::string, int64_t> resident_bytes_;
  std::vector<std::pair<std::string, std::string>> build_info_;
};

// Escapes a Prometheus label value (backslash, double quote, newline).
std::string EscapeLabelValue(const std::string& value);

}  // namespace vocabd

#endif  // VOCABD_SERVER_METRICS_H_
