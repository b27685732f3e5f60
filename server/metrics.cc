#include "server/metrics.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_cat.h"

namespace vocabd {
namespace {

// Prometheus float formatting: integers without a fraction, +Inf spelled out.
std::string FormatValue(double v) {
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  // Shortest of %.15g..%.17g that reads back exactly (0.0025, not 0.0025000000000000001).
  char buf[64];
  for (int precision = 15; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof(buf), "%.*g", precision, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

std::string Braces(const std::string& labels) {
  return labels.empty() ? std::string() : absl::StrCat("{", labels, "}");
}

absl::Status ValidateBuckets(const std::vector<double>& bounds, const char* field) {
  if (bounds.empty()) return absl::InvalidArgumentError(absl::StrCat(field, " is empty"));
  for (size_t i = 0; i < bounds.size(); ++i) {
    if (!(bounds[i] > 0) || (i > 0 && !(bounds[i] > bounds[i - 1]))) {
      return absl::InvalidArgumentError(absl::StrCat(
          field, "[", i, "] = ", bounds[i], " must be > 0 and greater than the previous bound"));
    }
  }
  return absl::OkStatus();
}

void Header(const char* name, const char* type, const char* help, std::string* out) {
  absl::StrAppend(out, "# HELP ", name, " ", help, "\n# TYPE ", name, " ", type, "\n");
}

}  // namespace

std::string EscapeLabelValue(const std::string& value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

Histogram::Histogram(std::vector<double> upper_bounds)
    : upper_bounds_(std::move(upper_bounds)), counts_(upper_bounds_.size() + 1, 0) {}

void Histogram::Observe(double value) {
  size_t i = 0;
  while (i < upper_bounds_.size() && value > upper_bounds_[i]) ++i;
  ++counts_[i];
  ++count_;
  sum_ += value;
}

void Histogram::Render(const std::string& name, const std::string& labels,
                       std::string* out) const {
  const std::string prefix = labels.empty() ? std::string() : absl::StrCat(labels, ",");
  uint64_t cumulative = 0;
  for (size_t i = 0; i <= upper_bounds_.size(); ++i) {
    cumulative += counts_[i];
    const double le = i < upper_bounds_.size() ? upper_bounds_[i] : INFINITY;
    absl::StrAppend(out, name, "_bucket{", prefix, "le=\"", FormatValue(le), "\"} ", cumulative,
                    "\n");
  }
  absl::StrAppend(out, name, "_sum", Braces(labels), " ", FormatValue(sum_), "\n");
  absl::StrAppend(out, name, "_count", Braces(labels), " ", count_, "\n");
}

absl::Status Metrics::Options::Validate() const {
  if (auto s = ValidateBuckets(latency_buckets_seconds, "latency_buckets_seconds"); !s.ok()) {
    return s;
  }
  return ValidateBuckets(batch_size_buckets, "batch_size_buckets");
}

absl::StatusOr<std::unique_ptr<Metrics>> Metrics::Create(const Options& options) {
  if (auto s = options.Validate(); !s.ok()) return s;
  return std::unique_ptr<Metrics>(new Metrics(options));
}

Metrics::Metrics(const Options& options)
    : options_(options), batch_size_(options.batch_size_buckets) {}

void Metrics::RecordRequest(const std::string& method, const std::string& code, double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  ++requests_[{method, code}];
  auto it = latency_.find(method);
  if (it == latency_.end()) {
    it = latency_.emplace(method, Histogram(options_.latency_buckets_seconds)).first;
  }
  it->second.Observe(seconds);
}

void Metrics::AddInFlight(int64_t delta) {
  std::lock_guard<std::mutex> lock(mu_);
  in_flight_ += delta;
}

int64_t Metrics::in_flight() const {
  std::lock_guard<std::mutex> lock(mu_);
  return in_flight_;
}

void Metrics::ObserveBatchSize(int64_t rows) {
  std::lock_guard<std::mutex> lock(mu_);
  batch_size_.Observe(static_cast<double>(rows));
}

void Metrics::SetQueueDepthSource(const std::string& queue, std::function<int64_t()> source) {
  std::lock_guard<std::mutex> lock(mu_);
  if (source) {
    queue_sources_[queue] = std::move(source);
  } else {
    queue_sources_.erase(queue);
  }
}

void Metrics::RecordSkippedWork(const std::string& reason) {
  std::lock_guard<std::mutex> lock(mu_);
  ++skipped_[reason];
}

void Metrics::RecordRejected(const std::string& limit) {
  std::lock_guard<std::mutex> lock(mu_);
  ++rejected_[limit];
}

void Metrics::SetModelResidentBytes(const std::string& model, int64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  resident_bytes_[model] = bytes;
}

void Metrics::RemoveModel(const std::string& model) {
  std::lock_guard<std::mutex> lock(mu_);
  resident_bytes_.erase(model);
}

void Metrics::SetBuildInfo(std::vector<std::pair<std::string, std::string>> labels) {
  std::lock_guard<std::mutex> lock(mu_);
  build_info_ = std::move(labels);
}

uint64_t Metrics::requests(const std::string& method, const std::string& code) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = requests_.find({method, code});
  return it == requests_.end() ? 0 : it->second;
}

uint64_t Metrics::skipped_work(const std::string& reason) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = skipped_.find(reason);
  return it == skipped_.end() ? 0 : it->second;
}

uint64_t Metrics::rejected(const std::string& limit) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = rejected_.find(limit);
  return it == rejected_.end() ? 0 : it->second;
}

uint64_t Metrics::batch_count() const {
  std::lock_guard<std::mutex> lock(mu_);
  return batch_size_.count();
}

std::string Metrics::Render() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string out;
  Header("vocabd_build_info", "gauge", "Build of this vocabd binary (value is always 1).", &out);
  std::string build_labels;
  for (const auto& [key, value] : build_info_) {
    absl::StrAppend(&build_labels, build_labels.empty() ? "" : ",", key, "=\"",
                    EscapeLabelValue(value), "\"");
  }
  absl::StrAppend(&out, "vocabd_build_info", Braces(build_labels), " 1\n");

  Header("vocabd_requests_total", "counter", "Finished RPCs by method and gRPC status code.",
         &out);
  for (const auto& [key, n] : requests_) {
    absl::StrAppend(&out, "vocabd_requests_total{method=\"", EscapeLabelValue(key.first),
                    "\",code=\"", EscapeLabelValue(key.second), "\"} ", n, "\n");
  }
  Header("vocabd_request_duration_seconds", "histogram",
         "RPC latency from call start to status sent, by method.", &out);
  for (const auto& [method, histogram] : latency_) {
    histogram.Render("vocabd_request_duration_seconds",
                     absl::StrCat("method=\"", EscapeLabelValue(method), "\""), &out);
  }
  Header("vocabd_in_flight_requests", "gauge", "RPCs started whose status is not sent yet.",
         &out);
  absl::StrAppend(&out, "vocabd_in_flight_requests ", in_flight_, "\n");
  Header("vocabd_queue_depth", "gauge", "Work items waiting for a compute worker, by queue.",
         &out);
  for (const auto& [queue, source] : queue_sources_) {
    absl::StrAppend(&out, "vocabd_queue_depth{queue=\"", EscapeLabelValue(queue), "\"} ",
                    source(), "\n");
  }
  Header("vocabd_batch_size_rows", "histogram", "Rows per LM-head GEMM.", &out);
  batch_size_.Render("vocabd_batch_size_rows", "", &out);
  Header("vocabd_skipped_work_total", "counter",
         "Queued work dropped before compute because the call was cancelled or expired.", &out);
  for (const auto& [reason, n] : skipped_) {
    absl::StrAppend(&out, "vocabd_skipped_work_total{reason=\"", EscapeLabelValue(reason),
                    "\"} ", n, "\n");
  }
  Header("vocabd_rejected_requests_total", "counter",
         "Calls refused with RESOURCE_EXHAUSTED by a configured limit.", &out);
  for (const auto& [limit, n] : rejected_) {
    absl::StrAppend(&out, "vocabd_rejected_requests_total{limit=\"", EscapeLabelValue(limit),
                    "\"} ", n, "\n");
  }
  Header("vocabd_model_resident_bytes", "gauge", "Bytes of each loaded model's tensors.", &out);
  for (const auto& [model, bytes] : resident_bytes_) {
    absl::StrAppend(&out, "vocabd_model_resident_bytes{model=\"", EscapeLabelValue(model),
                    "\"} ", bytes, "\n");
  }
  return out;
}

}  // namespace vocabd
