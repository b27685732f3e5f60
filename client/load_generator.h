// vocabctl bench's engine: drives one unary vocabd RPC over N gRPC channels
// with up to C calls in flight, closed-loop (as fast as the server answers)
// or open-loop at a constant / Poisson arrival rate, and measures latency
// (LatencyHistogram), throughput, bytes and errors by status code.
//
// All calls use gRPC's callback API: no thread per call. In closed loop a
// completion callback starts the next call; in open loop the thread calling
// Run() schedules arrivals and starts calls (a call whose slot is not free
// at its arrival time waits, and its latency is measured from the arrival
// time, so a slow server cannot hide queueing: no coordinated omission).
#ifndef VOCABD_CLIENT_LOAD_GENERATOR_H_
#define VOCABD_CLIENT_LOAD_GENERATOR_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/latency_histogram.h"

namespace vocabd {

// OK when `target` can only reach this machine: "host:port" / "[v6]:port"
// / "ipv4:" / "ipv6:" / "dns:///" forms whose host is localhost or resolves
// only to 127.0.0.0/8 or ::1, and "unix:" / "unix-abstract:" sockets.
// With allow_private, addresses of the private-use ranges are accepted too
// (10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16 (RFC 1918), fc00::/7 (RFC
// 4193)): one's own fleet on a pod network or a test bridge, never a
// public address. INVALID_ARGUMENT naming the target and address otherwise.
absl::Status CheckLoopbackTarget(const std::string& target, bool allow_private = false);

// VmRSS of process `pid` in bytes, from /proc/<pid>/status.
absl::StatusOr<int64_t> ReadProcessRssBytes(int pid);

// One unary RPC with a fixed set of request payloads. Implementations are
// thread-safe: Start() is called concurrently from gRPC callback threads.
class Workload {
 public:
  // Called once per finished call, on a gRPC thread: the final status and
  // the serialized size of the response (0 on error).
  using Done = std::function<void(const grpc::Status& status, int64_t response_bytes)>;

  virtual ~Workload() = default;
  // "embed", "logits", "score", "rope".
  virtual std::string name() const = 0;
  // Creates one stub per channel; called once before any Start().
  virtual void Connect(const std::vector<std::shared_ptr<grpc::Channel>>& channels) = 0;
  virtual size_t num_payloads() const = 0;
  // Serialized request size of payload `index`.
  virtual int64_t request_bytes(size_t index) const = 0;
  // Starts payload `index` on channel `connection`. When `keep` is true the
  // response of a successful call is kept for Verify().
  virtual void Start(size_t connection, size_t index, grpc::ClientContext* context, bool keep,
                     Done done) = 0;

  struct VerifyReport {
    int64_t checked = 0;
    int64_t mismatches = 0;
    // Responses the reference cannot judge (e.g. unsupported options).
    int64_t skipped = 0;
    std::string first_mismatch;  // empty when none
  };
  // Compares every kept response with the local reference (see
  // client/bench_verify.h) and forgets them. Without a reference every kept
  // response counts as skipped.
  virtual VerifyReport Verify() = 0;
};

class LoadGenerator {
 public:
  enum class Arrival { kConstant, kPoisson };

  struct Options {
    std::string target = "127.0.0.1:50051";
    // Separate channels (and TCP connections): every channel gets distinct
    // channel args and a local subchannel pool, so gRPC does not share one.
    int connections = 1;
    // Calls in flight at most (closed loop: exactly).
    int concurrency = 1;
    // Measured calls; 0 = run for `duration` instead.
    int64_t requests = 0;
    std::chrono::nanoseconds duration = std::chrono::seconds(10);
    // Arrivals per second; 0 = closed loop (each finished call starts the next).
    double rate = 0;
    Arrival arrival = Arrival::kConstant;
    // Unmeasured run before the measurement (calls drain in between).
    std::chrono::nanoseconds warmup{0};
    // Per-call deadline; 0 = none.
    std::chrono::nanoseconds timeout = std::chrono::seconds(30);
    // Latency windows (soak: p99 drift between the first and last window).
    std::chrono::nanoseconds window = std::chrono::seconds(60);
    // Keep every Nth successful response for Workload::Verify (0 = none),
    // at most verify_max of them.
    int64_t verify_every = 0;
    int64_t verify_max = 64;
    uint64_t seed = 1;
    int max_message_bytes = 256 << 20;
    // HTTP/2 receive window per stream the client offers (grpc.http2.
    // lookahead_bytes); 0 = gRPC's default (64 KiB, grown by BDP probing).
    int stream_window_bytes = 0;
    // Loopback targets only (CheckLoopbackTarget). Tests may pass an
    // in-process target and turn this off.
    bool require_loopback = true;
    // Also private-use addresses (CheckLoopbackTarget allow_private;
    // vocabctl bench --allow-private-targets).
    bool allow_private = false;
    // Client-side load balancing ("round_robin", "pick_first"; empty =
    // gRPC's default, pick_first) of every channel.
    std::string lb_policy;
    // gRPC service config of every channel (client/vocabd_client.h
    // kDefaultServiceConfig: retries UNAVAILABLE, CANCELLED); empty = none.
    std::string service_config;

    // INVALID_ARGUMENT naming the option and value.
    absl::Status Validate() const;
  };

  struct Window {
    double start_s = 0;  // since the measurement started
    int64_t count = 0;
    int64_t errors = 0;
    int64_t p50_ns = 0;
    int64_t p99_ns = 0;
  };

  // Calls that finished between one MarkPhase and the next (vocabctl bench
  // --phases-from-stdin: e.g. "baseline", "replica killed", "restarted").
  // A call belongs to the phase in which it completed.
  struct NamedPhase {
    std::string name;
    double start_s = 0;  // since the measurement started (the origin of Window::start_s)
    double end_s = 0;    // the next phase's start, or the last completion
    int64_t ok = 0;
    int64_t errors = 0;
    std::map<std::string, int64_t> errors_by_code;
    std::map<std::string, std::string> first_error_message;
    LatencyHistogram latency{7};  // OK calls, nanoseconds (0.39 % bound)

    double requests_per_s() const { return end_s > start_s ? (ok + errors) / (end_s - start_s) : 0; }
  };

  struct Result {
    int concurrency = 0;
    int connections = 0;
    double rate = 0;  // requested arrival rate (0 = closed loop)
    int64_t ok = 0;
    int64_t errors = 0;
    std::map<std::string, int64_t> errors_by_code;  // "DEADLINE_EXCEEDED" -> n
    std::map<std::string, std::string> first_error_message;
    double elapsed_s = 0;  // first start to last completion
    int64_t bytes_sent = 0;      // serialized requests (all calls)
    int64_t bytes_received = 0;  // serialized responses (OK calls)
    LatencyHistogram latency{10};  // OK calls, nanoseconds
    std::vector<Window> windows;
    // Open loop: largest delay between an arrival and its call start.
    int64_t max_start_lag_ns = 0;
    Workload::VerifyReport verify;

    // Named phases of the measurement (MarkPhase), in order.
    std::vector<NamedPhase> phases;

    double requests_per_s() const { return elapsed_s > 0 ? (ok + errors) / elapsed_s : 0; }
  };

  struct Progress {
    double elapsed_s = 0;
    int64_t completed = 0;
    int64_t errors = 0;
    int64_t in_flight = 0;
    bool warmup = false;
  };
  using ProgressFn = std::function<void(const Progress&)>;

  static absl::StatusOr<std::unique_ptr<LoadGenerator>> Create(const Options& options,
                                                                std::unique_ptr<Workload> workload);
  // Uses the given channels (tests: in-process); one per connection.
  static absl::StatusOr<std::unique_ptr<LoadGenerator>> CreateWithChannels(
      const Options& options, std::unique_ptr<Workload> workload,
      std::vector<std::shared_ptr<grpc::Channel>> channels);
  ~LoadGenerator();

  // Warmup (if any), then the measured run at `concurrency` (overrides
  // options.concurrency when > 0). Blocks; `progress` (optional) is called
  // about every 200 ms from this thread.
  Result Run(int concurrency = 0, const ProgressFn& progress = nullptr);

  // Starts a named phase of the measurement running now (or, when none runs
  // yet, at the start of the next one): every call finishing from now until
  // the next MarkPhase is counted in Result::phases under `name`.
  // Thread-safe; meant to be called while Run() runs.
  void MarkPhase(const std::string& name);
  // Ends the measurement running now (or the next one) early, as if its
  // --duration had passed: no new call starts; calls in flight finish.
  // Thread-safe.
  void Stop();

  Workload& workload() { return *workload_; }
  const Options& options() const { return options_; }

 private:
  struct Phase;
  struct Call;
  LoadGenerator(const Options& options, std::unique_ptr<Workload> workload,
                std::vector<std::shared_ptr<grpc::Channel>> channels);
  void RunPhase(Phase& phase, const ProgressFn& progress);
  void StartCall(Phase& phase, int64_t scheduled_ns);
  void OnDone(Phase& phase, Call* call, const grpc::Status& status, int64_t response_bytes);

  Options options_;
  std::unique_ptr<Workload> workload_;
  std::vector<std::shared_ptr<grpc::Channel>> channels_;
  std::atomic<uint64_t> sequence_{0};  // round-robin over channels and payloads
  // The measured phase running now (MarkPhase, Stop), and what was asked
  // while none ran.
  std::mutex control_mu_;
  Phase* measuring_ = nullptr;         // guarded by control_mu_
  std::string pending_phase_;          // guarded by control_mu_
  bool has_pending_phase_ = false;     // guarded by control_mu_
  bool stop_requested_ = false;        // guarded by control_mu_
};

// Parses "10s", "500ms", "2m", "1h", "250us", "0" (plain numbers are
// seconds). INVALID_ARGUMENT naming `flag` and the text otherwise.
absl::StatusOr<std::chrono::nanoseconds> ParseDuration(const std::string& text,
                                                       const std::string& flag);

}  // namespace vocabd

#endif  // VOCABD_CLIENT_LOAD_GENERATOR_H_
