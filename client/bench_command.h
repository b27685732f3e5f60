// `vocabctl bench`: the load-generator subcommand (see client/README.md).
#ifndef VOCABD_CLIENT_BENCH_COMMAND_H_
#define VOCABD_CLIENT_BENCH_COMMAND_H_

#include <cstdint>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "absl/status/statusor.h"
#include "client/bench_workloads.h"
#include "client/vocabd_client.h"

namespace vocabd {

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
  std::string save_payload;
  bool no_progress = false;
  bool allow_errors = false;
};

// Adds the `bench` subcommand and its options to `app`.
CLI::App* AddBenchCommand(CLI::App& app, BenchOptions* options);

// Runs it. `target`, `timeout_ms`, `json` and `model` are vocabctl's global
// options. Returns the exit code: 0, or 1 when a call failed (unless
// --allow-errors) or --verify found a mismatch.
absl::StatusOr<int> RunBench(VocabdClient& client, const std::string& target, int64_t timeout_ms,
                             bool json, const std::string& model, BenchOptions options);

// "1,4,16,64" -> {1, 4, 16, 64}; INVALID_ARGUMENT naming --concurrency.
absl::StatusOr<std::vector<int>> ParseConcurrencyList(const std::string& text);

}  // namespace vocabd

#endif  // VOCABD_CLIENT_BENCH_COMMAND_H_
