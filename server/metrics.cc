#include "server/metrics.h"

#include <map>
#include <mutex>

#include <google/protobuf/descriptor.h>
#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/metric_family.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include "absl/strings/str_cat.h"

namespace vocabd {
namespace {

using prometheus::Counter;
using prometheus::Family;
using prometheus::Gauge;
using prometheus::Histogram;
using prometheus::Labels;
using prometheus::MetricFamily;

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

// A counter's value; 0 when the series does not exist (Has() first: Add()
// would create it).
uint64_t CounterValue(Family<Counter>& family, const Labels& labels) {
  return family.Has(labels) ? static_cast<uint64_t>(family.Add(labels).Value()) : 0;
}

// A gauge family sampled at scrape time (one series per `samples` entry,
// labelled `label`); nothing when there is no sample, like the registry's
// families without series.
void AppendGaugeFamily(const char* name, const char* help, const char* label,
                       const std::vector<std::pair<std::string, int64_t>>& samples,
                       std::vector<MetricFamily>* families) {
  if (samples.empty()) return;
  MetricFamily family;
  family.name = name;
  family.help = help;
  family.type = prometheus::MetricType::Gauge;
  for (const auto& [value_of_label, value] : samples) {
    prometheus::ClientMetric metric;
    metric.label.push_back({label, value_of_label});
    metric.gauge.value = static_cast<double>(value);
    family.metric.push_back(std::move(metric));
  }
  families->push_back(std::move(family));
}

}  // namespace

struct Metrics::Impl {
  explicit Impl(const Options& options)
      : latency_buckets(options.latency_buckets_seconds),
        requests(prometheus::BuildCounter()
                     .Name("vocabd_requests_total")
                     .Help("Finished RPCs by method and gRPC status code.")
                     .Register(registry)),
        latency(prometheus::BuildHistogram()
                    .Name("vocabd_request_duration_seconds")
                    .Help("RPC latency from call start to status sent, by method.")
                    .Register(registry)),
        in_flight(prometheus::BuildGauge()
                      .Name("vocabd_in_flight_requests")
                      .Help("RPCs started whose status is not sent yet.")
                      .Register(registry)
                      .Add({})),
        batch_size(prometheus::BuildHistogram()
                       .Name("vocabd_batch_size_rows")
                       .Help("Rows per LM-head GEMM.")
                       .Register(registry)
                       .Add({}, options.batch_size_buckets)),
        skipped(prometheus::BuildCounter()
                    .Name("vocabd_skipped_work_total")
                    .Help("Queued work dropped before compute because the call was cancelled "
                          "or expired.")
                    .Register(registry)),
        rejected(prometheus::BuildCounter()
                     .Name("vocabd_rejected_requests_total")
                     .Help("Calls refused with RESOURCE_EXHAUSTED by a configured limit.")
                     .Register(registry)),
        build_info(prometheus::BuildGauge()
                       .Name("vocabd_build_info")
                       .Help("Build of this vocabd binary (value is always 1).")
                       .Register(registry)) {
    build_info_series = &build_info.Add({});
    build_info_series->Set(1);
  }

  // The request_duration_seconds series of `method` (Family::Add would build
  // a throwaway Histogram on every call; the pointers stay valid because no
  // series is ever removed from that family).
  Histogram& Latency(const std::string& method) {
    std::lock_guard<std::mutex> lock(mu);
    auto [it, inserted] = latency_by_method.try_emplace(method, nullptr);
    if (inserted) it->second = &latency.Add({{"method", method}}, latency_buckets);
    return *it->second;
  }

  // The scrape-time gauges (queue_depth, model_resident_bytes).
  void AppendSampled(std::vector<MetricFamily>* families) {
    std::vector<std::pair<std::string, int64_t>> queues;
    std::vector<std::pair<std::string, int64_t>> resident;
    {
      std::lock_guard<std::mutex> lock(scrape_mu);
      for (const auto& [queue, source] : queue_sources) queues.emplace_back(queue, source());
      if (model_source) {
        for (const ModelSample& m : model_source()) {
          resident.emplace_back(m.name, m.resident_bytes);
          if (m.lm_head_queued_rows) {
            queues.emplace_back(absl::StrCat("lm_head:", m.name), *m.lm_head_queued_rows);
          }
        }
      }
    }
    AppendGaugeFamily("vocabd_queue_depth",
                      "Work waiting, by queue: compute tasks (compute), LM-head batcher rows "
                      "(lm_head:<model>).",
                      "queue", queues, families);
    AppendGaugeFamily("vocabd_model_resident_bytes", "Bytes of each loaded model's tensors and packed LM-head copy.",
                      "model", resident, families);
  }

  const Histogram::BucketBoundaries latency_buckets;
  prometheus::Registry registry;  // before the families registered in it
  Family<Counter>& requests;
  Family<Histogram>& latency;
  Gauge& in_flight;
  Histogram& batch_size;
  Family<Counter>& skipped;
  Family<Counter>& rejected;
  Family<Gauge>& build_info;

  std::mutex mu;  // guards the two members below
  std::map<std::string, Histogram*> latency_by_method;
  Gauge* build_info_series = nullptr;

  std::mutex scrape_mu;  // guards the sources; held while they are sampled
  std::map<std::string, std::function<int64_t()>> queue_sources;
  std::function<std::vector<ModelSample>()> model_source;
};

absl::Status Metrics::Options::Validate() const {
  if (auto s = ValidateBuckets(latency_buckets_seconds, "latency_buckets_seconds"); !s.ok()) {
    return s;
  }
  return ValidateBuckets(batch_size_buckets, "batch_size_buckets");
}

absl::StatusOr<std::unique_ptr<Metrics>> Metrics::Create(const Options& options) {
  if (auto s = options.Validate(); !s.ok()) return s;
  return std::unique_ptr<Metrics>(new Metrics(std::make_unique<Impl>(options)));
}

Metrics::Metrics(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Metrics::~Metrics() = default;

void Metrics::RecordRequest(const std::string& method, const std::string& code, double seconds) {
  const std::string label = MethodLabel(method);
  impl_->requests.Add({{"method", label}, {"code", code}}).Increment();
  impl_->Latency(label).Observe(seconds);
}

std::string Metrics::MethodLabel(const std::string& path) {
  // "/<package>.<Service>/<Method>"
  const size_t slash = path.size() > 1 && path[0] == '/' ? path.find('/', 1) : std::string::npos;
  if (slash == std::string::npos) return "unknown";
  const google::protobuf::ServiceDescriptor* service =
      google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(
          path.substr(1, slash - 1));
  if (service == nullptr || service->FindMethodByName(path.substr(slash + 1)) == nullptr) {
    return "unknown";
  }
  return path;
}

void Metrics::AddInFlight(int64_t delta) {
  impl_->in_flight.Increment(static_cast<double>(delta));
}

int64_t Metrics::in_flight() const { return static_cast<int64_t>(impl_->in_flight.Value()); }

void Metrics::ObserveBatchSize(int64_t rows) {
  impl_->batch_size.Observe(static_cast<double>(rows));
}

void Metrics::SetQueueDepthSource(const std::string& queue, std::function<int64_t()> source) {
  std::lock_guard<std::mutex> lock(impl_->scrape_mu);
  if (source) {
    impl_->queue_sources[queue] = std::move(source);
  } else {
    impl_->queue_sources.erase(queue);
  }
}

void Metrics::SetModelSource(std::function<std::vector<ModelSample>()> source) {
  std::lock_guard<std::mutex> lock(impl_->scrape_mu);
  impl_->model_source = std::move(source);
}

void Metrics::RecordSkippedWork(const std::string& reason) {
  impl_->skipped.Add({{"reason", reason}}).Increment();
}

void Metrics::RecordRejected(const std::string& limit) {
  impl_->rejected.Add({{"limit", limit}}).Increment();
}

void Metrics::SetBuildInfo(std::vector<std::pair<std::string, std::string>> labels) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->build_info.Remove(impl_->build_info_series);
  impl_->build_info_series = &impl_->build_info.Add(Labels(labels.begin(), labels.end()));
  impl_->build_info_series->Set(1);
}

uint64_t Metrics::requests(const std::string& method, const std::string& code) const {
  return CounterValue(impl_->requests, {{"method", method}, {"code", code}});
}

uint64_t Metrics::skipped_work(const std::string& reason) const {
  return CounterValue(impl_->skipped, {{"reason", reason}});
}

uint64_t Metrics::rejected(const std::string& limit) const {
  return CounterValue(impl_->rejected, {{"limit", limit}});
}

uint64_t Metrics::batch_count() const {
  return impl_->batch_size.Collect().histogram.sample_count;
}

std::string Metrics::Render() const {
  std::vector<MetricFamily> families = impl_->registry.Collect();
  impl_->AppendSampled(&families);
  return prometheus::TextSerializer().Serialize(families);
}

}  // namespace vocabd
