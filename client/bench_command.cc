// `vocabctl bench`: options, run and report of the load-generator
// subcommand (see client/README.md). The engine is client/load_generator.h,
// payloads client/bench_workloads.h, --verify client/bench_verify.h.
#include "client/bench_command.h"

#include <poll.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <thread>

#include <nlohmann/json.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "client/bench_workloads.h"
#include "client/cli/output.h"
#include "client/load_generator.h"
#include "lib/core/data_path.h"
#include "lib/core/status_macros.h"

namespace vocabd {

absl::StatusOr<std::vector<int>> ParseConcurrencyList(const std::string& text) {
  std::vector<int> out;
  for (absl::string_view item : absl::StrSplit(text, ',')) {
    int v = 0;
    if (!absl::SimpleAtoi(item, &v) || v < 1 || v > 100000) {
      return absl::InvalidArgumentError(absl::StrCat("--concurrency '", text, "': '", item,
                                                     "' is not an integer in [1, 100000]"));
    }
    out.push_back(v);
  }
  return out;
}

namespace cli {
namespace {

struct BenchOptions {
  BenchPayloadOptions payload;
  // Comma-separated levels; more than one runs a sweep.
  std::string concurrency = "1";
  int connections = 1;
  int64_t stream_window = 0;
  int64_t requests = 0;
  std::string duration = "10s";
  double rate = 0;
  std::string arrival = "constant";
  std::string warmup = "0s";
  std::string window = "60s";
  bool verify = false;
  std::string verify_checkpoint;
  int64_t verify_every = 10;
  int64_t verify_max = 64;
  std::string csv_path;
  std::string label;
  int server_pid = 0;
  std::string server_pid_file;
  std::string save_payload;
  bool no_progress = false;
  bool allow_errors = false;
  bool allow_private_targets = false;
  bool no_retry = false;
  bool phases_from_stdin = false;
};

double Ms(int64_t ns) { return static_cast<double>(ns) * 1e-6; }

std::string Rate(double bytes_per_s) {
  const char* units[] = {"B/s", "KiB/s", "MiB/s", "GiB/s"};
  int u = 0;
  while (bytes_per_s >= 1024 && u < 3) {
    bytes_per_s /= 1024;
    ++u;
  }
  return absl::StrFormat("%.1f %s", bytes_per_s, units[u]);
}

constexpr double kPercentiles[] = {50, 90, 95, 99, 99.9};
constexpr const char* kPercentileNames[] = {"p50", "p90", "p95", "p99", "p99.9"};

json LevelJson(const LoadGenerator::Result& r, const std::string& arrival) {
  json lat = {{"min", Ms(r.latency.min())}, {"mean", r.latency.mean() * 1e-6}};
  for (size_t i = 0; i < std::size(kPercentiles); ++i) {
    lat[kPercentileNames[i]] = Ms(r.latency.ValueAtPercentile(kPercentiles[i]));
  }
  lat["max"] = Ms(r.latency.max());
  json windows = json::array();
  for (const auto& w : r.windows) {
    windows.push_back({{"start_s", w.start_s}, {"ok", w.count}, {"errors", w.errors},
                       {"p50_ms", Ms(w.p50_ns)}, {"p99_ms", Ms(w.p99_ns)}});
  }
  json out = {{"concurrency", r.concurrency},
              {"connections", r.connections},
              {"rate", r.rate},
              {"arrival", r.rate > 0 ? arrival : "closed-loop"},
              {"requests", r.ok + r.errors},
              {"ok", r.ok},
              {"errors", r.errors},
              {"errors_by_code", r.errors_by_code},
              {"error_messages", r.first_error_message},
              {"elapsed_s", r.elapsed_s},
              {"requests_per_s", r.requests_per_s()},
              {"bytes_sent", r.bytes_sent},
              {"bytes_received", r.bytes_received},
              {"send_bytes_per_s", r.elapsed_s > 0 ? r.bytes_sent / r.elapsed_s : 0.0},
              {"receive_bytes_per_s", r.elapsed_s > 0 ? r.bytes_received / r.elapsed_s : 0.0},
              {"latency_ms", lat},
              {"histogram_relative_error", r.latency.relative_error()},
              {"max_start_lag_ms", Ms(r.max_start_lag_ns)},
              {"windows", windows}};
  if (r.windows.size() >= 2) {
    const auto& first = r.windows.front();
    const auto& last = r.windows.back();
    out["p99_drift"] = {{"first_ms", Ms(first.p99_ns)},
                        {"last_ms", Ms(last.p99_ns)},
                        {"ratio", first.p99_ns > 0 ? static_cast<double>(last.p99_ns) / first.p99_ns : 0.0}};
  }
  if (!r.phases.empty()) {
    json phases = json::array();
    for (const auto& ph : r.phases) {
      json plat = {{"mean", ph.latency.mean() * 1e-6}};
      for (size_t i = 0; i < std::size(kPercentiles); ++i) {
        plat[kPercentileNames[i]] = Ms(ph.latency.ValueAtPercentile(kPercentiles[i]));
      }
      plat["max"] = Ms(ph.latency.max());
      phases.push_back({{"name", ph.name},
                        {"start_s", ph.start_s},
                        {"end_s", ph.end_s},
                        {"requests", ph.ok + ph.errors},
                        {"ok", ph.ok},
                        {"errors", ph.errors},
                        {"errors_by_code", ph.errors_by_code},
                        {"error_messages", ph.first_error_message},
                        {"requests_per_s", ph.requests_per_s()},
                        {"latency_ms", plat}});
    }
    out["phases"] = phases;
  }
  out["verify"] = {{"checked", r.verify.checked},
                   {"mismatches", r.verify.mismatches},
                   {"skipped", r.verify.skipped},
                   {"first_mismatch", r.verify.first_mismatch}};
  return out;
}

void PrintLevel(const LoadGenerator::Result& r, bool verify) {
  std::string mode = r.rate > 0 ? absl::StrFormat("rate %.6g/s", r.rate) : "closed loop";
  std::cout << absl::StrFormat(
      "concurrency %d (%d connection%s, %s): %d requests in %.3f s = %.1f req/s, sent %s, "
      "received %s\n",
      r.concurrency, r.connections, r.connections == 1 ? "" : "s", mode, r.ok + r.errors,
      r.elapsed_s, r.requests_per_s(), Rate(r.elapsed_s > 0 ? r.bytes_sent / r.elapsed_s : 0),
      Rate(r.elapsed_s > 0 ? r.bytes_received / r.elapsed_s : 0));
  std::string lat = absl::StrFormat("  latency ms: min %.3f  mean %.3f", Ms(r.latency.min()),
                                    r.latency.mean() * 1e-6);
  for (size_t i = 0; i < std::size(kPercentiles); ++i) {
    lat += absl::StrFormat("  %s %.3f", kPercentileNames[i], Ms(r.latency.ValueAtPercentile(kPercentiles[i])));
  }
  lat += absl::StrFormat("  max %.3f", Ms(r.latency.max()));
  std::cout << lat << "\n";
  if (r.errors == 0) {
    std::cout << "  errors: 0\n";
  } else {
    std::cout << "  errors: " << r.errors << "\n";
    for (const auto& [code, n] : r.errors_by_code) {
      std::cout << "    " << code << ": " << n << " (e.g. \"" << r.first_error_message.at(code) << "\")\n";
    }
  }
  if (r.rate > 0 && r.max_start_lag_ns > 1'000'000) {
    std::cout << absl::StrFormat("  note: calls started up to %.3f ms after their arrival time "
                                 "(concurrency limit reached or client saturated); latency counts it\n",
                                 Ms(r.max_start_lag_ns));
  }
  if (r.windows.size() >= 2) {
    const auto& first = r.windows.front();
    const auto& last = r.windows.back();
    std::cout << absl::StrFormat("  p99 per window: first %.3f ms, last %.3f ms (x%.2f) over %d windows\n",
                                 Ms(first.p99_ns), Ms(last.p99_ns),
                                 first.p99_ns > 0 ? static_cast<double>(last.p99_ns) / first.p99_ns : 0.0,
                                 r.windows.size());
  }
  if (!r.phases.empty()) {
    std::cout << absl::StrFormat("  %-24s %9s %9s %9s %9s %10s %10s %10s\n", "phase", "start s", "end s",
                                 "calls", "errors", "p50 ms", "p99 ms", "max ms");
    for (const auto& ph : r.phases) {
      std::cout << absl::StrFormat("  %-24s %9.3f %9.3f %9d %9d %10.3f %10.3f %10.3f\n", ph.name, ph.start_s,
                                   ph.end_s, ph.ok + ph.errors, ph.errors, Ms(ph.latency.ValueAtPercentile(50)),
                                   Ms(ph.latency.ValueAtPercentile(99)), Ms(ph.latency.max()));
      for (const auto& [code, n] : ph.errors_by_code) {
        std::cout << "    " << code << ": " << n << " (e.g. \"" << ph.first_error_message.at(code) << "\")\n";
      }
    }
  }
  if (verify) {
    std::cout << absl::StrFormat("  verify: %d checked, %d mismatches, %d skipped%s\n", r.verify.checked,
                                 r.verify.mismatches, r.verify.skipped,
                                 r.verify.first_mismatch.empty() ? "" : " (" + r.verify.first_mismatch + ")");
  }
}

std::string CsvHeader() {
  return "label,rpc,concurrency,connections,rate,arrival,requests,ok,errors,elapsed_s,requests_per_s,"
         "send_bytes_per_s,receive_bytes_per_s,lat_min_ms,lat_mean_ms,lat_p50_ms,lat_p90_ms,"
         "lat_p95_ms,lat_p99_ms,lat_p999_ms,lat_max_ms,verify_checked,verify_mismatches,"
         "server_rss_start_bytes,server_rss_end_bytes";
}

std::string CsvRow(const std::string& label, const std::string& rpc, const std::string& arrival,
                   const LoadGenerator::Result& r, int64_t rss_start, int64_t rss_end) {
  std::string row = absl::StrFormat(
      "%s,%s,%d,%d,%.6g,%s,%d,%d,%d,%.6f,%.3f,%.1f,%.1f,%.6f,%.6f", label, rpc, r.concurrency,
      r.connections, r.rate, r.rate > 0 ? arrival : "closed-loop", r.ok + r.errors, r.ok, r.errors,
      r.elapsed_s, r.requests_per_s(), r.elapsed_s > 0 ? r.bytes_sent / r.elapsed_s : 0.0,
      r.elapsed_s > 0 ? r.bytes_received / r.elapsed_s : 0.0, Ms(r.latency.min()), r.latency.mean() * 1e-6);
  for (double p : kPercentiles) row += absl::StrFormat(",%.6f", Ms(r.latency.ValueAtPercentile(p)));
  row += absl::StrFormat(",%.6f,%d,%d,%d,%d", Ms(r.latency.max()), r.verify.checked, r.verify.mismatches,
                         rss_start, rss_end);
  return row;
}

// The checkpoint file the server loaded (same machine: loopback only).
std::string ServerCheckpointPath(const v1::ModelInfo& m) {
  for (const auto& f : m.source_files()) {
    if (f.format() == "llama2c" || f.format() == "safetensors" || f.format() == "safetensors.index.json" ||
        f.format() == "gguf") {
      return f.path();
    }
  }
  return "";
}

// --phases-from-stdin: each line read from stdin starts a named phase of
// the measurement (LoadGenerator::MarkPhase); end of input ends it
// (LoadGenerator::Stop). Returns when `done` is set or stdin ends.
void ReadPhasesFromStdin(LoadGenerator& gen, const std::atomic<bool>& done) {
  std::string pending;
  char buf[4096];
  while (!done.load()) {
    pollfd fd{STDIN_FILENO, POLLIN, 0};
    const int ready = poll(&fd, 1, 100);
    if (ready < 0 && errno != EINTR) break;
    if (ready <= 0) continue;
    const ssize_t n = read(STDIN_FILENO, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {  // end of input (or an unreadable stdin)
      if (!pending.empty()) gen.MarkPhase(pending);
      gen.Stop();
      return;
    }
    pending.append(buf, static_cast<size_t>(n));
    size_t newline;
    while ((newline = pending.find('\n')) != std::string::npos) {
      std::string line(absl::StripAsciiWhitespace(pending.substr(0, newline)));
      pending.erase(0, newline + 1);
      if (!line.empty()) gen.MarkPhase(line);
    }
  }
}

// Runs `bench` with the global --target, --timeout, --json and --model.
absl::StatusOr<int> RunBench(VocabdClient& client, const GlobalOptions& global,
                             const BenchOptions& options) {
  const std::string& target = global.target;
  const bool json_output = global.json;
  BenchOptions o = options;
  RETURN_IF_ERROR(CheckLoopbackTarget(target, o.allow_private_targets));
  if (!o.server_pid_file.empty()) {
    std::ifstream in(o.server_pid_file);
    std::string text;
    std::getline(in, text);
    if (!absl::SimpleAtoi(text, &o.server_pid) || o.server_pid <= 0) {
      return absl::InvalidArgumentError(absl::StrCat("--server-pid-file ", o.server_pid_file,
                                                     ": first line '", text,
                                                     "' is not a process id"));
    }
  }
  ASSIGN_OR_RETURN(std::vector<int> levels, ParseConcurrencyList(o.concurrency));
  if (o.phases_from_stdin && levels.size() > 1) {
    return absl::InvalidArgumentError(absl::StrCat("--phases-from-stdin needs one --concurrency level, not '",
                                                   o.concurrency, "'"));
  }
  ASSIGN_OR_RETURN(v1::ModelInfo info, client.GetModel(global.model));
  o.payload.model = global.model;
  if (!o.save_payload.empty()) {
    RETURN_IF_ERROR(SaveBenchPayload(o.payload, info, o.save_payload));
    std::cerr << "wrote " << o.save_payload << "\n";
    return 0;
  }
  std::shared_ptr<const BenchReference> reference;
  if (o.verify) {
    std::string path = o.verify_checkpoint.empty() ? ServerCheckpointPath(info) : o.verify_checkpoint;
    if (path.empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "--verify: model '", info.name(), "' reports no checkpoint file; pass --verify-checkpoint"));
    }
    // A relative path (a server started with one, or --verify-checkpoint):
    // the working directory, then beside vocabctl (lib/core/data_path.h).
    ASSIGN_OR_RETURN(path, ResolveDataPath(path, absl::StrCat("--verify checkpoint of model '",
                                                              info.name(), "'")));
    ASSIGN_OR_RETURN(std::unique_ptr<BenchReference> ref, BenchReference::Load(path));
    if (ref->checkpoint().config().vocab_size != info.vocab_size() ||
        ref->checkpoint().config().hidden_size != info.hidden_size()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "--verify-checkpoint '", path, "' has vocab ", ref->checkpoint().config().vocab_size, " x hidden ",
          ref->checkpoint().config().hidden_size, " but model '", info.name(), "' has ", info.vocab_size(),
          " x ", info.hidden_size()));
    }
    // Read the tables in the types the server serves them in.
    RETURN_IF_ERROR(ref->ServeAs(info));
    reference = std::move(ref);
  }
  ASSIGN_OR_RETURN(std::unique_ptr<Workload> workload, MakeBenchWorkload(o.payload, info, reference));

  LoadGenerator::Options g;
  g.target = target;
  g.connections = o.connections;
  g.stream_window_bytes = static_cast<int>(o.stream_window);
  g.concurrency = levels.front();
  g.requests = o.requests;
  ASSIGN_OR_RETURN(g.duration, ParseDuration(o.duration, "--duration"));
  ASSIGN_OR_RETURN(g.warmup, ParseDuration(o.warmup, "--warmup"));
  ASSIGN_OR_RETURN(g.window, ParseDuration(o.window, "--window"));
  g.rate = o.rate;
  g.arrival = o.arrival == "poisson" ? LoadGenerator::Arrival::kPoisson : LoadGenerator::Arrival::kConstant;
  g.timeout = std::chrono::milliseconds(global.timeout_ms);
  g.verify_every = o.verify ? o.verify_every : 0;
  g.verify_max = o.verify_max;
  g.seed = o.payload.seed;
  g.allow_private = o.allow_private_targets;
  g.lb_policy = global.lb_policy;
  g.service_config = o.no_retry ? "" : kDefaultServiceConfig;
  ASSIGN_OR_RETURN(std::unique_ptr<LoadGenerator> gen, LoadGenerator::Create(g, std::move(workload)));

  int64_t rss_start = 0, rss_end = 0;
  if (o.server_pid > 0) {
    ASSIGN_OR_RETURN(rss_start, ReadProcessRssBytes(o.server_pid));
  }
  const bool progress_line = !o.no_progress && isatty(STDERR_FILENO);
  int64_t request_bytes = 0;
  for (size_t i = 0; i < gen->workload().num_payloads(); ++i) request_bytes += gen->workload().request_bytes(i);
  request_bytes /= static_cast<int64_t>(gen->workload().num_payloads());
  if (!json_output) {
    std::cout << absl::StrFormat("bench %s -> %s, model %s (vocab %d, hidden %d), request %d bytes, %s\n",
                                 o.payload.rpc, target, info.name(), info.vocab_size(), info.hidden_size(),
                                 request_bytes,
                                 o.payload.payload_files.empty()
                                     ? absl::StrFormat("%d generated payloads", o.payload.payloads)
                                     : absl::StrFormat("%d payload files", o.payload.payload_files.size()));
  }
  std::vector<LoadGenerator::Result> results;
  std::atomic<bool> phases_done{false};
  std::thread phase_reader;
  if (o.phases_from_stdin) {
    phase_reader = std::thread([&gen, &phases_done] { ReadPhasesFromStdin(*gen, phases_done); });
  }
  for (int level : levels) {
    auto progress = [&](const LoadGenerator::Progress& p) {
      if (!progress_line) return;
      std::fprintf(stderr, "\r\033[K[c=%d%s] %.1f s  %lld done  %lld errors  %lld in flight  %.0f req/s", level,
                   p.warmup ? " warmup" : "", p.elapsed_s, static_cast<long long>(p.completed),
                   static_cast<long long>(p.errors), static_cast<long long>(p.in_flight),
                   p.elapsed_s > 0 ? p.completed / p.elapsed_s : 0.0);
      std::fflush(stderr);
    };
    results.push_back(gen->Run(level, progress));
    if (progress_line) std::fprintf(stderr, "\r\033[K");
    if (!json_output) PrintLevel(results.back(), o.verify);
  }
  phases_done.store(true);
  if (phase_reader.joinable()) phase_reader.join();
  if (o.server_pid > 0) {
    ASSIGN_OR_RETURN(rss_end, ReadProcessRssBytes(o.server_pid));
    if (!json_output) {
      std::cout << absl::StrFormat("server pid %d VmRSS: start %.1f MiB, end %.1f MiB (%+.1f MiB)\n", o.server_pid,
                                   rss_start / 1048576.0, rss_end / 1048576.0, (rss_end - rss_start) / 1048576.0);
    }
  }
  if (!json_output && levels.size() > 1) {
    std::cout << "\n" << absl::StrFormat("%11s %12s %10s %10s %10s %10s %8s\n", "concurrency", "req/s", "p50 ms",
                                         "p99 ms", "p99.9 ms", "max ms", "errors");
    for (const auto& r : results) {
      std::cout << absl::StrFormat("%11d %12.1f %10.3f %10.3f %10.3f %10.3f %8d\n", r.concurrency,
                                   r.requests_per_s(), Ms(r.latency.ValueAtPercentile(50)),
                                   Ms(r.latency.ValueAtPercentile(99)), Ms(r.latency.ValueAtPercentile(99.9)),
                                   Ms(r.latency.max()), r.errors);
    }
  }
  if (json_output) {
    json levels_json = json::array();
    for (const auto& r : results) levels_json.push_back(LevelJson(r, o.arrival));
    json doc = {{"label", o.label},
                {"rpc", o.payload.rpc},
                {"target", target},
                {"model", info.name()},
                {"payload",
                 {{"tokens", o.payload.tokens},
                  {"rows", o.payload.rows},
                  {"hidden", o.payload.hidden > 0 ? o.payload.hidden : info.hidden_size()},
                  {"dtype", o.payload.dtype},
                  {"input_dtype", o.payload.input_dtype},
                  {"files", o.payload.payload_files},
                  {"request_bytes", request_bytes}}},
                {"timeout_ms", global.timeout_ms},
                {"levels", levels_json}};
    if (o.server_pid > 0) {
      doc["server"] = {{"pid", o.server_pid},
                       {"rss_start_bytes", rss_start},
                       {"rss_end_bytes", rss_end},
                       {"rss_growth_bytes", rss_end - rss_start}};
    }
    PrintJson(doc);
  }
  if (!o.csv_path.empty()) {
    const bool to_stdout = o.csv_path == "-";
    bool need_header = to_stdout;
    if (!to_stdout) {
      std::ifstream existing(o.csv_path);
      need_header = !existing.good() || existing.peek() == std::ifstream::traits_type::eof();
    }
    std::ofstream file;
    if (!to_stdout) {
      file.open(o.csv_path, std::ios::app);
      if (!file) return absl::PermissionDeniedError(absl::StrCat("--csv '", o.csv_path, "': cannot write"));
    }
    std::ostream& out = to_stdout ? std::cout : file;
    if (need_header) out << CsvHeader() << "\n";
    for (const auto& r : results) {
      out << CsvRow(o.label, o.payload.rpc, o.arrival, r, rss_start, rss_end) << "\n";
    }
  }
  int64_t errors = 0, mismatches = 0;
  for (const auto& r : results) {
    errors += r.errors;
    mismatches += r.verify.mismatches;
  }
  if (mismatches > 0) {
    std::cerr << "error: --verify found " << mismatches << " wrong responses\n";
    return 1;
  }
  if (errors > 0 && !o.allow_errors) {
    std::cerr << "error: " << errors << " calls failed (--allow-errors to exit 0)\n";
    return 1;
  }
  return 0;
}

}  // namespace

void RegisterBenchCommand(CLI::App& app, CommandContext& context) {
  auto [cmd, o] = context.AddCommand(
      app, "bench", "load-test one RPC (loopback targets only): throughput, latency percentiles, errors",
      RunBench);
  cmd->add_option("rpc", o->payload.rpc, "RPC to drive")
      ->required()
      ->check(CLI::IsMember({"embed", "logits", "score", "rope"}));
  CLI::App* shape = cmd->add_option_group("payload", "request payloads");
  shape->add_option("--tokens", o->payload.tokens, "embed: tokens per sequence; rope: positions per sequence")
      ->capture_default_str();
  shape->add_option("--rows", o->payload.rows, "embed: sequences; logits/score: hidden rows; rope: batch")
      ->capture_default_str();
  shape->add_option("--hidden", o->payload.hidden, "logits/score: hidden width sent (0 = the model's)")
      ->capture_default_str();
  shape->add_option("--dtype", o->payload.dtype, "embed/logits output dtype")
      ->check(CLI::IsMember({"f32", "f16", "bf16"}))
      ->capture_default_str();
  shape->add_option("--input-dtype", o->payload.input_dtype, "logits/score/rope: dtype of hidden/q/k sent")
      ->check(CLI::IsMember({"f32", "f16", "bf16"}))
      ->capture_default_str();
  shape->add_option("--top-k", o->payload.top_k, "score: top-k per row")->check(CLI::Range(0, 1024))->capture_default_str();
  shape->add_flag("!--no-targets", o->payload.targets, "score: send no target ids");
  shape->add_option("--payloads", o->payload.payloads, "distinct generated payloads (round-robin)")
      ->capture_default_str();
  shape->add_option("--seed", o->payload.seed, "seed of generated payloads and Poisson arrivals")
      ->capture_default_str();
  shape->add_option("--payload-file", o->payload.payload_files,
                    "request read from a file (.json, .txtpb or binary); repeatable, used round-robin")
      ->check(CLI::ExistingFile)
      ->allow_extra_args(false);
  shape->add_option("--save-payload", o->save_payload,
                    "write the first generated request to FILE (.json, .txtpb or binary) and exit");
  CLI::App* load = cmd->add_option_group("load", "load shape");
  load->add_option("--concurrency,-c", o->concurrency, "calls in flight; a list (1,4,16,64) runs a sweep")
      ->capture_default_str();
  load->add_option("--connections", o->connections, "separate gRPC channels / TCP connections")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  load->add_option("--stream-window", o->stream_window,
                   "HTTP/2 per-stream receive window in bytes (0 = gRPC default with BDP probing)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 30))
      ->capture_default_str();
  load->add_option("--requests,-n", o->requests, "measured calls per level (0 = use --duration)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  load->add_option("--duration,-d", o->duration, "measured time per level (500ms, 10s, 10m)")->capture_default_str();
  load->add_option("--rate", o->rate, "arrivals per second (0 = closed loop, as fast as answered)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  load->add_option("--arrival", o->arrival, "arrival process at --rate")
      ->check(CLI::IsMember({"constant", "poisson"}))
      ->capture_default_str();
  load->add_flag("--allow-private-targets", o->allow_private_targets,
                 "also target private-use addresses (10/8, 172.16/12, 192.168/16, fc00::/7): "
                 "your own fleet");
  load->add_flag("--no-retry", o->no_retry,
                 "send every call once (default: the client retry policy, vocabd_client.h "
                 "kDefaultServiceConfig, retries UNAVAILABLE and CANCELLED)");
  load->add_flag("--phases-from-stdin", o->phases_from_stdin,
                 "each line on stdin starts a named phase of the run (calls, errors and latency "
                 "reported per phase, by completion time); end of stdin ends the run early");
  load->add_option("--warmup", o->warmup, "unmeasured run before each level (duration)")->capture_default_str();
  load->add_option("--window", o->window, "latency window for p99 drift (soak)")->capture_default_str();
  CLI::App* check = cmd->add_option_group("checks", "verification and reporting");
  check->add_flag("--verify", o->verify, "compare a sample of responses with a local reference");
  check->add_option("--verify-checkpoint", o->verify_checkpoint,
                    "checkpoint for --verify (default: the file the server reports loading)");
  check->add_option("--verify-every", o->verify_every, "keep every Nth response for --verify")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  check->add_option("--verify-max", o->verify_max, "responses verified per level at most")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  check->add_option("--csv", o->csv_path, "append one CSV row per level to FILE ('-' = stdout)");
  check->add_option("--label", o->label, "label column of --csv / --json (e.g. the server under test)");
  // One pid; `$(pidof vocabd)` with two servers running gives "123 456",
  // which is refused with a pointer to the pid file instead.
  check->add_option("--server-pid", o->server_pid, "report this process's VmRSS at start and end (soak)")
      ->check(CLI::Validator(
          [](std::string& text) -> std::string {
            int pid = 0;
            if (absl::SimpleAtoi(text, &pid) && pid > 0) return "";
            if (text.find_first_of(" \t") != std::string::npos) {
              return "'" + text +
                     "' is several pids (more than one vocabd runs?); pass one, or "
                     "--server-pid-file FILE (deploy/dev.sh run writes build/vocabd.pid)";
            }
            return "'" + text + "' is not a process id (a positive integer)";
          },
          "PID", "Pid"));
  check->add_option("--server-pid-file", o->server_pid_file,
                    "read --server-pid from FILE (deploy/dev.sh run writes build/vocabd.pid)")
      ->check(CLI::ExistingFile)
      ->excludes("--server-pid");
  check->add_flag("--no-progress", o->no_progress, "no live progress line on stderr");
  check->add_flag("--allow-errors", o->allow_errors, "exit 0 even when calls failed");
}

}  // namespace cli
}  // namespace vocabd
