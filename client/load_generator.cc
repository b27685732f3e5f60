#include "client/load_generator.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/time.h"
#include "lib/core/happens_before.h"

namespace vocabd {
namespace {

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::string StatusCodeName(grpc::StatusCode status_code) {
  static const char* kNames[] = {
      "OK",        "CANCELLED",         "UNKNOWN",          "INVALID_ARGUMENT",
      "DEADLINE_EXCEEDED", "NOT_FOUND", "ALREADY_EXISTS",   "PERMISSION_DENIED",
      "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE",
      "UNIMPLEMENTED", "INTERNAL",      "UNAVAILABLE",      "DATA_LOSS",
      "UNAUTHENTICATED"};
  const int code = static_cast<int>(status_code);
  return code >= 0 && code <= 16 ? kNames[code] : absl::StrCat("CODE_", code);
}

std::chrono::steady_clock::time_point FromNs(int64_t ns) {
  return std::chrono::steady_clock::time_point(std::chrono::nanoseconds(ns));
}

// RFC 1918 (10/8, 172.16/12, 192.168/16); host byte order.
bool IsPrivateV4(uint32_t a) {
  return (a >> 24) == 10 || (a >> 20) == ((172u << 4) | 1) || (a >> 16) == ((192u << 8) | 168);
}

// True when every address `host` resolves to is loopback (or private-use,
// with allow_private).
absl::Status HostIsLoopback(const std::string& host, const std::string& target,
                            bool allow_private) {
  auto refuse = [&target, allow_private](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--target '", target, "': ", why,
        allow_private
            ? "; vocabctl bench --allow-private-targets only targets loopback and private-use "
              "addresses (127.0.0.0/8, ::1, 10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16, "
              "fc00::/7, unix: sockets)"
            : "; vocabctl bench only targets loopback addresses (127.0.0.0/8, ::1, localhost, "
              "unix: sockets; --allow-private-targets adds private-use ranges)"));
  };
  if (host.empty()) return refuse("no host");
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const int rc = getaddrinfo(host.c_str(), nullptr, &hints, &res);
  if (rc != 0 || res == nullptr) {
    return refuse(absl::StrCat("host '", host, "' does not resolve (", gai_strerror(rc), ")"));
  }
  absl::Status status;
  for (addrinfo* a = res; a != nullptr && status.ok(); a = a->ai_next) {
    if (a->ai_family == AF_INET) {
      const auto* sin = reinterpret_cast<const sockaddr_in*>(a->ai_addr);
      const uint32_t addr = ntohl(sin->sin_addr.s_addr);
      if ((addr >> 24) != 127 && !(allow_private && IsPrivateV4(addr))) {
        char buf[INET_ADDRSTRLEN] = {};
        inet_ntop(AF_INET, &sin->sin_addr, buf, sizeof(buf));
        status = refuse(absl::StrCat("host '", host, "' is ", buf));
      }
    } else if (a->ai_family == AF_INET6) {
      const auto* sin6 = reinterpret_cast<const sockaddr_in6*>(a->ai_addr);
      const bool v4_loopback = IN6_IS_ADDR_V4MAPPED(&sin6->sin6_addr) &&
                               sin6->sin6_addr.s6_addr[12] == 127;
      const uint8_t* b = sin6->sin6_addr.s6_addr;
      const bool v4_private =
          IN6_IS_ADDR_V4MAPPED(&sin6->sin6_addr) &&
          IsPrivateV4((uint32_t{b[12]} << 24) | (uint32_t{b[13]} << 16) | (uint32_t{b[14]} << 8) | b[15]);
      const bool ula = (b[0] & 0xfe) == 0xfc;
      if (!IN6_IS_ADDR_LOOPBACK(&sin6->sin6_addr) && !v4_loopback &&
          !(allow_private && (v4_private || ula))) {
        char buf[INET6_ADDRSTRLEN] = {};
        inet_ntop(AF_INET6, &sin6->sin6_addr, buf, sizeof(buf));
        status = refuse(absl::StrCat("host '", host, "' is ", buf));
      }
    } else {
      status = refuse(absl::StrCat("host '", host, "' has a non-IP address"));
    }
  }
  freeaddrinfo(res);
  return status;
}

// "host:port", "[v6]:port", "host" -> host.
std::string HostOf(absl::string_view hostport) {
  if (absl::StartsWith(hostport, "[")) {
    const size_t close = hostport.find(']');
    return std::string(hostport.substr(1, close == absl::string_view::npos ? absl::string_view::npos
                                                                           : close - 1));
  }
  const size_t first = hostport.find(':');
  if (first == absl::string_view::npos) return std::string(hostport);
  if (hostport.find(':', first + 1) != absl::string_view::npos) {
    return std::string(hostport);  // bare IPv6 without port
  }
  return std::string(hostport.substr(0, first));
}

}  // namespace

absl::Status CheckLoopbackTarget(const std::string& target, bool allow_private) {
  absl::string_view t = target;
  if (absl::StartsWith(t, "unix:") || absl::StartsWith(t, "unix-abstract:")) {
    return absl::OkStatus();
  }
  if (absl::ConsumePrefix(&t, "ipv4:") || absl::ConsumePrefix(&t, "ipv6:")) {
    for (absl::string_view addr : absl::StrSplit(t, ',')) {
      absl::string_view a = addr;
      absl::ConsumePrefix(&a, "//");  // ipv4://host:port is accepted by gRPC too
      absl::Status s = HostIsLoopback(HostOf(a), target, allow_private);
      if (!s.ok()) return s;
    }
    return absl::OkStatus();
  }
  if (absl::ConsumePrefix(&t, "dns:")) {
    if (absl::ConsumePrefix(&t, "//")) {
      // dns://[authority]/host:port: a named DNS server is refused unless
      // it is loopback too.
      const size_t slash = t.find('/');
      if (slash == absl::string_view::npos) {
        return absl::InvalidArgumentError(absl::StrCat("--target '", target, "': malformed dns: URI"));
      }
      absl::string_view authority = t.substr(0, slash);
      if (!authority.empty()) {
        absl::Status s = HostIsLoopback(HostOf(authority), target, allow_private);
        if (!s.ok()) return s;
      }
      t = t.substr(slash + 1);
    }
    return HostIsLoopback(HostOf(t), target, allow_private);
  }
  if (t.find("://") != absl::string_view::npos || absl::StartsWith(t, "xds:")) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--target '", target,
        "': unsupported scheme; vocabctl bench only targets loopback addresses (host:port, "
        "ipv4:, ipv6:, dns:, unix:)"));
  }
  return HostIsLoopback(HostOf(t), target, allow_private);
}

absl::StatusOr<int64_t> ReadProcessRssBytes(int pid) {
  const std::string path = absl::StrCat("/proc/", pid, "/status");
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("--server-pid ", pid, ": cannot open ", path));
  std::string line;
  while (std::getline(in, line)) {
    absl::string_view v = line;
    if (!absl::ConsumePrefix(&v, "VmRSS:")) continue;
    v = absl::StripAsciiWhitespace(v);
    absl::ConsumeSuffix(&v, "kB");
    int64_t kb = 0;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(v), &kb)) break;
    return kb * 1024;
  }
  return absl::NotFoundError(absl::StrCat("--server-pid ", pid, ": no VmRSS line in ", path));
}

absl::StatusOr<std::chrono::nanoseconds> ParseDuration(const std::string& text,
                                                       const std::string& flag) {
  double seconds = 0;
  if (absl::SimpleAtod(text, &seconds)) {
    if (seconds < 0 || !std::isfinite(seconds)) {
      return absl::InvalidArgumentError(absl::StrCat(flag, " '", text, "' must be >= 0"));
    }
    return std::chrono::nanoseconds(static_cast<int64_t>(seconds * 1e9));
  }
  absl::Duration d;
  if (!absl::ParseDuration(text, &d) || d < absl::ZeroDuration() || d == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        flag, " '", text, "' is not a duration (e.g. 500ms, 10s, 2m, 1h; a plain number is seconds)"));
  }
  return absl::ToChronoNanoseconds(d);
}

absl::Status LoadGenerator::Options::Validate() const {
  auto bad = [](const std::string& flag, const auto& value, const std::string& rule) {
    return absl::InvalidArgumentError(absl::StrCat(flag, " = ", value, ": ", rule));
  };
  if (connections < 1 || connections > 1024) return bad("--connections", connections, "must be in [1, 1024]");
  if (concurrency < 1 || concurrency > 100000) return bad("--concurrency", concurrency, "must be in [1, 100000]");
  if (requests < 0) return bad("--requests", requests, "must be >= 0");
  if (requests == 0 && duration.count() <= 0) {
    return bad("--duration", absl::StrCat(duration.count(), "ns"), "must be > 0 when --requests is 0");
  }
  if (!(rate >= 0) || !std::isfinite(rate)) return bad("--rate", rate, "must be a finite number >= 0");
  if (warmup.count() < 0) return bad("--warmup", warmup.count(), "must be >= 0");
  if (timeout.count() < 0) return bad("--timeout", timeout.count(), "must be >= 0");
  if (window.count() <= 0) return bad("--window", absl::StrCat(window.count(), "ns"), "must be > 0");
  if (verify_every < 0) return bad("--verify-every", verify_every, "must be >= 0");
  if (verify_max < 0) return bad("--verify-max", verify_max, "must be >= 0");
  if (require_loopback) return CheckLoopbackTarget(target, allow_private);
  return absl::OkStatus();
}

// One run (warmup or measurement). Counters shared by the callbacks.
struct LoadGenerator::Phase {
  bool measured = false;
  bool open_loop = false;
  int concurrency = 1;
  int64_t limit = 0;        // calls to start; 0 = until `stop`
  int64_t start_ns = 0;
  std::atomic<int64_t> issued{0};
  // Calls actually started, in start order: the index --verify-every uses.
  std::atomic<int64_t> started{0};
  std::atomic<bool> stop{false};
  std::atomic<int64_t> completed{0};
  std::atomic<int64_t> failed{0};
  std::atomic<int64_t> kept{0};
  std::atomic<int64_t> bytes_sent{0};

  std::mutex mu;
  std::condition_variable cv;
  int64_t in_flight = 0;  // guarded by mu
  int64_t last_done_ns = 0;
  Result* result = nullptr;
  std::vector<LatencyHistogram> window_latency;
  std::vector<int64_t> window_errors;
  int64_t window_ns = 1;
};

struct LoadGenerator::Call {
  grpc::ClientContext context;
  int64_t scheduled_ns = 0;
};

LoadGenerator::LoadGenerator(const Options& options, std::unique_ptr<Workload> workload,
                             std::vector<std::shared_ptr<grpc::Channel>> channels)
    : options_(options), workload_(std::move(workload)), channels_(std::move(channels)) {
  workload_->Connect(channels_);
}

LoadGenerator::~LoadGenerator() = default;

absl::StatusOr<std::unique_ptr<LoadGenerator>> LoadGenerator::Create(
    const Options& options, std::unique_ptr<Workload> workload) {
  if (absl::Status s = options.Validate(); !s.ok()) return s;
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  for (int i = 0; i < options.connections; ++i) {
    grpc::ChannelArguments args;
    // Distinct args + a local subchannel pool: one TCP connection each.
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    args.SetInt("vocabd.bench.connection_index", i);
    args.SetMaxReceiveMessageSize(options.max_message_bytes);
    if (options.stream_window_bytes > 0) {
      args.SetInt(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, options.stream_window_bytes);
    }
    args.SetMaxSendMessageSize(options.max_message_bytes);
    if (!options.lb_policy.empty()) args.SetLoadBalancingPolicyName(options.lb_policy);
    if (!options.service_config.empty()) args.SetServiceConfigJSON(options.service_config);
    auto channel = grpc::CreateCustomChannel(options.target, grpc::InsecureChannelCredentials(), args);
    if (!channel->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(10))) {
      return absl::UnavailableError(absl::StrCat("--target ", options.target, ": connection ", i,
                                                 " not ready within 10 s"));
    }
    channels.push_back(std::move(channel));
  }
  return CreateWithChannels(options, std::move(workload), std::move(channels));
}

absl::StatusOr<std::unique_ptr<LoadGenerator>> LoadGenerator::CreateWithChannels(
    const Options& options, std::unique_ptr<Workload> workload,
    std::vector<std::shared_ptr<grpc::Channel>> channels) {
  if (absl::Status s = options.Validate(); !s.ok()) return s;
  if (workload == nullptr || workload->num_payloads() == 0) {
    return absl::InvalidArgumentError("workload has no payloads");
  }
  if (channels.empty()) return absl::InvalidArgumentError("no channels");
  return std::unique_ptr<LoadGenerator>(
      new LoadGenerator(options, std::move(workload), std::move(channels)));
}

void LoadGenerator::StartCall(Phase& phase, int64_t scheduled_ns) {
  // This call's own start index (not the racy `issued` reservation count), so
  // exactly every verify_every-th started call is kept.
  const int64_t n = phase.started.fetch_add(1, std::memory_order_relaxed);
  auto* call = new Call;
  call->scheduled_ns = scheduled_ns;
  const uint64_t seq = sequence_.fetch_add(1, std::memory_order_relaxed);
  const size_t connection = seq % channels_.size();
  const size_t payload = seq % workload_->num_payloads();
  if (options_.timeout.count() > 0) {
    call->context.set_deadline(std::chrono::system_clock::now() + options_.timeout);
  }
  bool keep = false;
  if (phase.measured && options_.verify_every > 0 && n % options_.verify_every == 0) {
    keep = phase.kept.fetch_add(1) < options_.verify_max;
  }
  phase.bytes_sent.fetch_add(workload_->request_bytes(payload), std::memory_order_relaxed);
  HappensBefore(call);  // OnDone runs on a gRPC thread
  workload_->Start(connection, payload, &call->context, keep,
                   [this, &phase, call](const grpc::Status& status, int64_t response_bytes) {
                     OnDone(phase, call, status, response_bytes);
                   });
}

void LoadGenerator::OnDone(Phase& phase, Call* call, const grpc::Status& status,
                           int64_t response_bytes) {
  HappensAfter(call);
  const int64_t now = NowNs();
  const int64_t latency = now - call->scheduled_ns;
  delete call;
  // Closed loop: reserve the next call before giving up this slot, so the
  // waiting thread never sees a transient in_flight of 0.
  phase.completed.fetch_add(1, std::memory_order_relaxed);
  if (!status.ok()) phase.failed.fetch_add(1, std::memory_order_relaxed);
  bool start_next = false;
  if (!phase.open_loop && !phase.stop.load()) {
    const int64_t n = phase.issued.fetch_add(1);
    start_next = phase.limit == 0 || n < phase.limit;
  }
  {
    std::lock_guard<std::mutex> lock(phase.mu);
    phase.last_done_ns = std::max(phase.last_done_ns, now);
    if (phase.measured) {
      Result& r = *phase.result;
      const size_t w = static_cast<size_t>(std::max<int64_t>(0, now - phase.start_ns) / phase.window_ns);
      if (phase.window_latency.size() <= w) {
        phase.window_latency.resize(w + 1, LatencyHistogram(7));
        phase.window_errors.resize(w + 1, 0);
      }
      NamedPhase* named = r.phases.empty() ? nullptr : &r.phases.back();
      if (status.ok()) {
        ++r.ok;
        r.bytes_received += response_bytes;
        r.latency.Record(latency);
        phase.window_latency[w].Record(latency);
        if (named != nullptr) {
          ++named->ok;
          named->latency.Record(latency);
        }
      } else {
        ++r.errors;
        ++phase.window_errors[w];
        const std::string name = StatusCodeName(status.error_code());
        ++r.errors_by_code[name];
        r.first_error_message.emplace(name, status.error_message());
        if (named != nullptr) {
          ++named->errors;
          ++named->errors_by_code[name];
          named->first_error_message.emplace(name, status.error_message());
        }
      }
    }
    if (!start_next) {
      --phase.in_flight;
      phase.cv.notify_all();
    }
  }
  // `phase` may be gone here unless this call started the next one.
  if (start_next) StartCall(phase, NowNs());
}

void LoadGenerator::RunPhase(Phase& phase, const ProgressFn& progress) {
  using std::chrono::milliseconds;
  const int64_t duration_ns = phase.measured ? options_.duration.count() : options_.warmup.count();
  {
    std::lock_guard<std::mutex> lock(phase.mu);  // MarkPhase reads it
    phase.start_ns = NowNs();
    phase.last_done_ns = phase.start_ns;
  }
  const int64_t end_ns = phase.limit == 0 ? phase.start_ns + duration_ns : INT64_MAX;
  int64_t next_progress = phase.start_ns;
  auto report = [&](int64_t now) {
    if (!progress || now < next_progress) return;
    next_progress = now + 200'000'000;
    Progress p;
    p.elapsed_s = (now - phase.start_ns) * 1e-9;
    p.completed = phase.completed.load();
    p.errors = phase.failed.load();
    {
      std::lock_guard<std::mutex> lock(phase.mu);
      p.in_flight = phase.in_flight;
    }
    p.warmup = !phase.measured;
    progress(p);
  };

  if (!phase.open_loop) {
    for (int i = 0; i < phase.concurrency; ++i) {
      const int64_t n = phase.issued.fetch_add(1);
      if (phase.limit != 0 && n >= phase.limit) break;
      {
        std::lock_guard<std::mutex> lock(phase.mu);
        ++phase.in_flight;
      }
      StartCall(phase, NowNs());
    }
    std::unique_lock<std::mutex> lock(phase.mu);
    while (phase.in_flight > 0) {
      const int64_t now = NowNs();
      if (now >= end_ns) phase.stop.store(true);
      lock.unlock();
      report(now);
      lock.lock();
      const int64_t wake = phase.stop.load() ? now + 50'000'000 : std::min(end_ns, now + 50'000'000);
      phase.cv.wait_until(lock, FromNs(wake));
    }
    phase.stop.store(true);
    return;
  }

  // Open loop: this thread schedules arrivals.
  std::mt19937_64 rng(options_.seed + (phase.measured ? 1 : 0));
  std::exponential_distribution<double> gap_s(options_.rate);
  const double constant_gap_ns = 1e9 / options_.rate;
  double arrival = static_cast<double>(phase.start_ns);
  for (int64_t i = 0;; ++i) {
    if (phase.limit != 0 && i >= phase.limit) break;
    const int64_t at = static_cast<int64_t>(arrival);
    if (at >= end_ns || phase.stop.load()) break;
    for (;;) {  // sleep until the arrival, reporting progress meanwhile
      const int64_t now = NowNs();
      if (now >= at || phase.stop.load()) break;
      report(now);
      std::this_thread::sleep_until(FromNs(std::min(at, now + 50'000'000)));
    }
    if (phase.stop.load()) break;
    {
      std::unique_lock<std::mutex> lock(phase.mu);
      while (phase.in_flight >= phase.concurrency) {
        lock.unlock();
        report(NowNs());
        lock.lock();
        phase.cv.wait_for(lock, milliseconds(50));
      }
      ++phase.in_flight;
    }
    phase.issued.fetch_add(1);
    const int64_t lag = NowNs() - at;
    if (phase.measured) {
      std::lock_guard<std::mutex> lock(phase.mu);
      phase.result->max_start_lag_ns = std::max(phase.result->max_start_lag_ns, lag);
    }
    StartCall(phase, at);
    arrival += options_.arrival == Arrival::kPoisson ? gap_s(rng) * 1e9 : constant_gap_ns;
  }
  phase.stop.store(true);
  std::unique_lock<std::mutex> lock(phase.mu);
  while (phase.in_flight > 0) {
    lock.unlock();
    report(NowNs());
    lock.lock();
    phase.cv.wait_for(lock, milliseconds(50));
  }
}

void LoadGenerator::MarkPhase(const std::string& name) {
  std::lock_guard<std::mutex> control(control_mu_);
  if (measuring_ == nullptr) {
    pending_phase_ = name;
    has_pending_phase_ = true;
    return;
  }
  Phase& phase = *measuring_;
  std::lock_guard<std::mutex> lock(phase.mu);
  NamedPhase next;
  next.name = name;
  next.start_s = phase.start_ns == 0 ? 0.0 : std::max<int64_t>(0, NowNs() - phase.start_ns) * 1e-9;
  if (!phase.result->phases.empty()) phase.result->phases.back().end_s = next.start_s;
  phase.result->phases.push_back(std::move(next));
}

void LoadGenerator::Stop() {
  std::lock_guard<std::mutex> control(control_mu_);
  if (measuring_ == nullptr) {
    stop_requested_ = true;
    return;
  }
  measuring_->stop.store(true);
  measuring_->cv.notify_all();
}

LoadGenerator::Result LoadGenerator::Run(int concurrency, const ProgressFn& progress) {
  Result result;
  result.concurrency = concurrency > 0 ? concurrency : options_.concurrency;
  result.connections = static_cast<int>(channels_.size());
  result.rate = options_.rate;
  if (options_.warmup.count() > 0) {
    Result scratch;
    Phase warm;
    warm.measured = false;
    warm.open_loop = options_.rate > 0;
    warm.concurrency = result.concurrency;
    warm.result = &scratch;
    RunPhase(warm, progress);
  }
  Phase phase;
  phase.measured = true;
  phase.open_loop = options_.rate > 0;
  phase.concurrency = result.concurrency;
  phase.limit = options_.requests;
  phase.result = &result;
  phase.window_ns = options_.window.count();
  {
    std::lock_guard<std::mutex> control(control_mu_);
    measuring_ = &phase;
    if (has_pending_phase_) {
      result.phases.emplace_back();
      result.phases.back().name = pending_phase_;
    }
    has_pending_phase_ = false;
    if (stop_requested_) phase.stop.store(true);
    stop_requested_ = false;
  }
  RunPhase(phase, progress);
  {
    std::lock_guard<std::mutex> control(control_mu_);
    measuring_ = nullptr;
  }
  result.elapsed_s = (phase.last_done_ns - phase.start_ns) * 1e-9;
  if (!result.phases.empty()) result.phases.back().end_s = result.elapsed_s;
  result.bytes_sent = phase.bytes_sent.load();
  for (size_t w = 0; w < phase.window_latency.size(); ++w) {
    Window win;
    win.start_s = static_cast<double>(w) * phase.window_ns * 1e-9;
    win.count = phase.window_latency[w].count();
    win.errors = phase.window_errors[w];
    win.p50_ns = phase.window_latency[w].ValueAtPercentile(50);
    win.p99_ns = phase.window_latency[w].ValueAtPercentile(99);
    result.windows.push_back(win);
  }
  result.verify = workload_->Verify();
  return result;
}

}  // namespace vocabd
