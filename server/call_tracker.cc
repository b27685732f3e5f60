#include "server/call_tracker.h"

#include <algorithm>
#include <chrono>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/stubs/logging.h>
#include <spdlog/spdlog.h>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "lib/core/happens_before.h"
#include "server/grpc_status.h"
#include "server/logging.h"
#include "server/request_info.h"

namespace vocabd {
namespace {

using grpc::experimental::InterceptionHookPoints;

constexpr std::string_view kVocabdPrefix = "/vocabd.v1.";

// Protobuf reports a string field with invalid UTF-8 only through its log
// ("String field 'vocabd.v1.TokenizeRequest.texts' contains invalid UTF-8
// data when parsing a protocol buffer. ...") and then fails the parse, which
// gRPC answers UNIMPLEMENTED with an empty message. The log handler keeps
// the field's name for the thread that parsed (the interceptor's
// POST_RECV_MESSAGE hook runs right after the parse, on the same thread)
// instead of printing a client-caused line to stderr; other protobuf log
// lines go to the previous handler.
thread_local std::string utf8_error_field;
google::protobuf::LogHandler* previous_log_handler = nullptr;

void CaptureProtobufLog(google::protobuf::LogLevel level, const char* filename, int line,
                        const std::string& message) {
  static const std::string kPrefix = "String field '";
  static const std::string kInvalid = "' contains invalid UTF-8 data when parsing";
  if (message.compare(0, kPrefix.size(), kPrefix) == 0) {
    const size_t end = message.find(kInvalid);
    if (end != std::string::npos) {
      utf8_error_field = message.substr(kPrefix.size(), end - kPrefix.size());
      return;
    }
  }
  if (previous_log_handler != nullptr) previous_log_handler(level, filename, line, message);
}

void InstallProtobufLogCapture() {
  static std::once_flag once;
  std::call_once(once, [] {
    previous_log_handler = google::protobuf::SetLogHandler(&CaptureProtobufLog);
  });
}

// "vocabd.v1.TokenizeRequest" for "/vocabd.v1.TokenizerService/Tokenize"
// (the method's name when the descriptor pool does not know it).
std::string RequestTypeName(const std::string& method) {
  std::string full = method.empty() ? method : method.substr(1);
  const size_t slash = full.find('/');
  if (slash != std::string::npos) full[slash] = '.';
  const google::protobuf::MethodDescriptor* m =
      google::protobuf::DescriptorPool::generated_pool()->FindMethodByName(full);
  return m != nullptr ? m->input_type()->full_name() : "the request of " + full;
}

class CallInterceptor final : public grpc::experimental::Interceptor {
 public:
  CallInterceptor(CallTracker* tracker, grpc::experimental::ServerRpcInfo* info)
      : tracker_(tracker),
        info_(info),
        method_(info->method() != nullptr ? info->method() : ""),
        counted_(std::string_view(method_).substr(0, kVocabdPrefix.size()) == kVocabdPrefix),
        start_(std::chrono::steady_clock::now()) {
    if (counted_) tracker_->CallStarted(info->server_context());
    HappensBefore(this);
  }
  // gRPC runs one call's hooks one after another (on whichever threads) and
  // destroys the interceptor after the last one.
  ~CallInterceptor() override {
    HappensAfter(this);
    if (!ended_) {
      if (counted_) tracker_->CallEnded(info_->server_context());
      tracker_->TakeRequestInfo(info_->server_context());
    }
  }

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    HappensAfter(this);
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_MESSAGE)) {
      // The request was just deserialized on this thread; a streaming
      // reactor's OnReadDone may read it on another and says so with
      // HappensAfter(message) (unary handlers run on this thread).
      if (void* message = methods->GetRecvMessage()) {
        HappensBefore(message);
        utf8_error_field.clear();
      } else {
        // No message: the parse failed (a unary call's only request), or a
        // stream ended (a stream's parse failure names its field).
        std::string field = std::move(utf8_error_field);
        utf8_error_field.clear();
        const bool unary = info_->type() == grpc::experimental::ServerRpcInfo::Type::UNARY ||
                           info_->type() == grpc::experimental::ServerRpcInfo::Type::SERVER_STREAMING;
        if (!field.empty()) {
          parse_error_ = absl::StrCat("request field ", field,
                                      " is not valid UTF-8: protobuf string fields must hold "
                                      "UTF-8 text (the request was not parsed)");
        } else if (unary && counted_) {
          parse_error_ = absl::StrCat("the request is not a valid ", RequestTypeName(method_),
                                      " message (protobuf parse failed)");
          // Or the call ended while its request was still arriving (the
          // client's deadline, a cancel): gRPC gives no message either way,
          // and the context does not say which yet. POST_RECV_CLOSE does.
          no_message_ = true;
        }
      }
    }
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS)) {
      grpc::Status status = methods->GetSendStatus();
      if (!parse_error_.empty() && !ended_ &&
          (status.error_code() == grpc::StatusCode::UNIMPLEMENTED || status.ok())) {
        // gRPC answers a request it cannot parse UNIMPLEMENTED with no
        // message (a stream's reactor sees the end of its reads).
        status = grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, parse_error_);
        methods->ModifySendStatus(status);
      }
      if (no_message_ && !ended_) {
        deferred_status_ = status;  // recorded at POST_RECV_CLOSE
      } else {
        Finished(status);
      }
    }
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_CLOSE) &&
        no_message_ && !ended_) {
      // The call is over: IsCancelled() now says whether the status could be
      // sent. If not, the client went away (its deadline or a cancel) before
      // its request had arrived: not a parse failure.
      grpc::Status status = deferred_status_;
      grpc::ServerContextBase* context = info_->server_context();
      if (context != nullptr && context->IsCancelled()) {
        status = context->deadline() < std::chrono::system_clock::now()
                     ? grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                                    "deadline exceeded while the request was arriving")
                     : grpc::Status(grpc::StatusCode::CANCELLED,
                                    "call ended by the client while the request was arriving");
      }
      Finished(status);
    }
    HappensBefore(this);  // Proceed() may run the next hook on another thread
    methods->Proceed();
  }

 private:
  void Finished(const grpc::Status& status) {
    if (ended_) return;
    ended_ = true;
    if (counted_) tracker_->CallEnded(info_->server_context());
    grpc::ServerContextBase* context = info_->server_context();
    // Saved by Admit() (handlers of the other RPCs do not call it).
    const RequestInfo request = tracker_->TakeRequestInfo(context);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    const std::string code = StatusCodeName(status.error_code());
    if (Metrics* metrics = tracker_->metrics()) metrics->RecordRequest(method_, code, seconds);
    if (!spdlog::should_log(spdlog::level::debug)) return;
    std::string id = request.request_id;
    if (id.empty() && context != nullptr) {
      const auto& metadata = context->client_metadata();
      if (auto it = metadata.find("x-request-id"); it != metadata.end()) {
        id.assign(it->second.data(), it->second.size());
      }
    }
    if (id.empty()) id = tracker_->NextRequestId();
    std::string peer = context != nullptr ? context->peer() : "";
    if (context != nullptr && (peer == "unknown" || absl::StartsWith(peer, "inproc"))) {
      // Calls of the HTTP/JSON gateway (server/http_gateway.h), the only
      // in-process client (gRPC names no peer for it); it names the HTTP client.
      const auto& metadata = context->client_metadata();
      if (auto it = metadata.find("x-vocabd-http-peer"); it != metadata.end()) {
        peer = "http:" + std::string(it->second.data(), it->second.size());
      }
    }
    const std::string rpc =
        method_.empty() ? std::string("unknown") : method_.substr(1);  // drop leading '/'
    // Client text (id, model, error) goes into fields, never into the
    // message: it cannot forge another field or line (server/logging.h).
    std::vector<LogField> fields = {
        {"id", id},
        {"rpc", rpc},
        {"model", request.model.empty() ? std::string("(default)") : request.model},
        {"rows", absl::StrCat(request.tokens)},
        {"status", code},
        {"latency_ms", absl::StrFormat("%.3f", seconds * 1e3)},
        {"peer", peer}};
    if (!status.ok()) fields.emplace_back("error", status.error_message());
    LogEvent(spdlog::level::debug, "request", fields);
  }

  CallTracker* tracker_;
  grpc::experimental::ServerRpcInfo* info_;
  const std::string method_;
  const bool counted_;
  const std::chrono::steady_clock::time_point start_;
  bool ended_ = false;
  std::string parse_error_;  // the request could not be parsed (see above)
  bool no_message_ = false;   // a unary call got no request message
  grpc::Status deferred_status_;  // its sent status, recorded at POST_RECV_CLOSE
};

class CallInterceptorFactory final
    : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit CallInterceptorFactory(CallTracker* tracker) : tracker_(tracker) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    return new CallInterceptor(tracker_, info);
  }

 private:
  CallTracker* tracker_;
};

}  // namespace

absl::Status CallTracker::Options::Validate() const {
  if (max_tokens_per_request < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--max-tokens-per-request = ", max_tokens_per_request, " must be >= 0 (0 = no limit)"));
  }
  if (max_concurrent_requests < 0) {
    return absl::InvalidArgumentError(absl::StrCat("--max-concurrent-requests = ",
                                                   max_concurrent_requests,
                                                   " must be >= 0 (0 = no limit)"));
  }
  if (drain_quiet_period.count() < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--drain-quiet-ms = ", drain_quiet_period.count(), " must be >= 0 (0 = no wait)"));
  }
  return absl::OkStatus();
}

namespace {
int64_t SteadyNowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
}  // namespace

absl::StatusOr<std::unique_ptr<CallTracker>> CallTracker::Create(const Options& options,
                                                                 Metrics* metrics) {
  if (absl::Status s = options.Validate(); !s.ok()) return s;
  InstallProtobufLogCapture();
  return std::unique_ptr<CallTracker>(new CallTracker(options, metrics));
}

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>
CallTracker::MakeInterceptorFactory() {
  return std::make_unique<CallInterceptorFactory>(this);
}

void CallTracker::CallStarted(const grpc::ServerContextBase* context) {
  const int64_t in_flight = in_flight_.fetch_add(1, std::memory_order_relaxed) + 1;
  last_call_started_ns_.store(SteadyNowNs(), std::memory_order_relaxed);
  if (metrics_ != nullptr) metrics_->AddInFlight(1);
  const int64_t max = options_.max_concurrent_requests;
  if (max <= 0) return;
  int64_t used = slots_in_use_.load(std::memory_order_relaxed);
  while (used < max) {
    if (slots_in_use_.compare_exchange_weak(used, used + 1, std::memory_order_relaxed)) return;
  }
  std::lock_guard<std::mutex> lock(mu_);
  refused_[context] = std::max(in_flight, max + 1);
}

void CallTracker::CallEnded(const grpc::ServerContextBase* context) {
  in_flight_.fetch_sub(1, std::memory_order_relaxed);
  if (metrics_ != nullptr) metrics_->AddInFlight(-1);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (admitted_.erase(context) > 0 && admitted_.empty()) admitted_cv_.notify_all();
  }
  if (options_.max_concurrent_requests <= 0) return;
  bool held_slot = true;
  {
    std::lock_guard<std::mutex> lock(mu_);
    held_slot = refused_.erase(context) == 0;
  }
  if (held_slot) slots_in_use_.fetch_sub(1, std::memory_order_relaxed);
}

void CallTracker::SaveRequestInfo(const grpc::ServerContextBase* context, RequestInfo info) {
  std::lock_guard<std::mutex> lock(mu_);
  requests_[context] = std::move(info);
}

RequestInfo CallTracker::TakeRequestInfo(const grpc::ServerContextBase* context) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = requests_.find(context);
  if (it == requests_.end()) return RequestInfo();
  RequestInfo info = std::move(it->second);
  requests_.erase(it);
  return info;
}

absl::Status CheckCallWanted(grpc::CallbackServerContext* context, Metrics* metrics,
                             const char* when) {
  if (context->deadline() < std::chrono::system_clock::now()) {
    if (metrics != nullptr) metrics->RecordSkippedWork("deadline_exceeded");
    return absl::DeadlineExceededError(absl::StrCat("deadline exceeded ", when));
  }
  if (context->IsCancelled()) {
    if (metrics != nullptr) metrics->RecordSkippedWork("cancelled");
    return absl::CancelledError(absl::StrCat("call cancelled ", when));
  }
  return absl::OkStatus();
}

std::string CallTracker::NextRequestId() {
  return absl::StrCat("srv-", next_id_.fetch_add(1, std::memory_order_relaxed));
}

int64_t CallTracker::RefusedInFlight(const grpc::ServerContextBase* context) {
  if (options_.max_concurrent_requests <= 0) return 0;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = refused_.find(context);
  return it == refused_.end() ? 0 : it->second;
}

grpc::Status CallTracker::Admit(grpc::CallbackServerContext* context,
                                const google::protobuf::Message& request) {
  if (absl::Status wanted = CheckCallWanted(context, metrics_, "before the call started");
      !wanted.ok()) {
    SaveRequestInfo(context, GetRequestInfo(request));
    return ToGrpcStatus(wanted);
  }
  RequestInfo info = GetRequestInfo(request);
  {
    int64_t metadata_bytes = 0, largest = 0;
    std::string largest_name;
    for (const auto& [name, value] : context->client_metadata()) {
      const int64_t entry = static_cast<int64_t>(name.size() + value.size()) + 32;
      metadata_bytes += entry;
      if (entry > largest) {
        largest = entry;
        largest_name.assign(name.data(), std::min<size_t>(name.size(), 64));
      }
    }
    if (metadata_bytes > kMaxMetadataBytes) {
      info.request_id.clear();
      SaveRequestInfo(context, info);
      if (metrics_ != nullptr) metrics_->RecordRejected("metadata");
      return grpc::Status(
          grpc::StatusCode::RESOURCE_EXHAUSTED,
          absl::StrCat("request metadata is ", metadata_bytes,
                       " bytes (name + value + 32 per entry); at most ", kMaxMetadataBytes,
                       " bytes are accepted (the largest entry, '", largest_name, "', is ",
                       largest, " bytes)"));
    }
  }
  // Request ids are bounded (server/request_info.h): a refused id is neither
  // logged nor echoed.
  absl::Status id_ok = CheckRequestId(info.request_id, "request_id");
  if (id_ok.ok()) {
    const auto& metadata = context->client_metadata();
    if (auto it = metadata.find("x-request-id"); it != metadata.end()) {
      id_ok = CheckRequestId(std::string_view(it->second.data(), it->second.size()),
                             "x-request-id metadata");
    }
  }
  if (!id_ok.ok()) {
    info.request_id.clear();
    info.request_id.shrink_to_fit();
    SaveRequestInfo(context, info);
    if (metrics_ != nullptr) metrics_->RecordRejected("request_id");
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, std::string(id_ok.message()));
  }
  SaveRequestInfo(context, info);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (draining_ && admitted_.count(context) == 0) {
      if (metrics_ != nullptr) metrics_->RecordRejected("draining");
      return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                          "vocabd is draining (shutting down): it takes no new calls; retry on "
                          "another replica");
    }
  }
  // Whether this call found a slot was decided when it arrived (CallStarted).
  if (const int64_t in_flight = RefusedInFlight(context); in_flight > 0) {
    if (metrics_ != nullptr) metrics_->RecordRejected("max_concurrent_requests");
    return grpc::Status(
        grpc::StatusCode::RESOURCE_EXHAUSTED,
        absl::StrCat("too many concurrent requests: ", in_flight,
                     " in flight exceeds --max-concurrent-requests = ",
                     options_.max_concurrent_requests, "; retry with backoff"));
  }
  if (options_.max_tokens_per_request > 0) {
    if (info.tokens > options_.max_tokens_per_request) {
      if (metrics_ != nullptr) metrics_->RecordRejected("max_tokens_per_request");
      return grpc::Status(
          grpc::StatusCode::RESOURCE_EXHAUSTED,
          absl::StrCat("request has ", info.tokens, " tokens (", info.tokens_field,
                       ") > --max-tokens-per-request = ", options_.max_tokens_per_request,
                       "; split it into smaller requests"));
    }
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    admitted_.insert(context);
  }
  return grpc::Status::OK;
}

void CallTracker::StartDraining() {
  drain_started_ns_.store(SteadyNowNs(), std::memory_order_relaxed);
  std::lock_guard<std::mutex> lock(mu_);
  draining_ = true;
}

bool CallTracker::WaitUntilDrained(std::chrono::system_clock::time_point deadline) {
  {
    std::unique_lock<std::mutex> lock(mu_);
    if (!admitted_cv_.wait_until(lock, deadline, [this] { return admitted_.empty(); })) {
      return false;
    }
  }
  // Calls arriving from now on are refused (draining_): give the ones in
  // transit the quiet period to arrive and be answered.
  const int64_t quiet_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(options_.drain_quiet_period).count();
  for (;;) {
    const int64_t last = std::max(last_call_started_ns_.load(std::memory_order_relaxed),
                                  drain_started_ns_.load(std::memory_order_relaxed));
    const int64_t since_ns = SteadyNowNs() - last;
    const bool idle = in_flight() == 0;
    if (idle && since_ns >= quiet_ns) return true;
    const auto now = std::chrono::system_clock::now();
    if (now >= deadline) return idle;
    const std::chrono::nanoseconds wait(idle ? quiet_ns - since_ns : 5'000'000);  // 5 ms polls
    std::this_thread::sleep_for(
        std::min(wait, std::chrono::duration_cast<std::chrono::nanoseconds>(deadline - now)));
  }
}

bool RejectIfNotAdmitted(CallTracker* tracker, grpc::CallbackServerContext* context,
                         const google::protobuf::Message& request,
                         grpc::ServerUnaryReactor* reactor) {
  if (tracker == nullptr) return false;
  grpc::Status status = tracker->Admit(context, request);
  if (status.ok()) return false;
  reactor->Finish(status);
  return true;
}

}  // namespace vocabd
