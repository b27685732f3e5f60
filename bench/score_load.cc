// A small closed-loop gRPC load driver for ScoringService/Score
// (docs/performance.md, "End to end"; bench/score_e2e.sh): C callers, each
// sending one single-row (or --rows) Score request at a time for --seconds, on
// one shared channel. Prints one line: concurrency, requests, requests/s,
// p50/p99 latency, errors (the first error message is printed too).
//
//   score_load --target 127.0.0.1:50051 --model llama3 --hidden-size 4096 --concurrency 64 --seconds 10
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>

#include "proto/tensor_codec.h"
#include "client/vocabd_client.h"

int main(int argc, char** argv) {
  CLI::App app{"closed-loop Score load driver"};
  std::string target = "127.0.0.1:50051", model;
  int concurrency = 1, rows = 1, top_k = 5;
  int64_t hidden_size = 4096;
  double seconds = 10;
  app.add_option("--target", target)->capture_default_str();
  app.add_option("--model", model, "model name (empty = default)");
  app.add_option("--hidden-size", hidden_size)->capture_default_str();
  app.add_option("--concurrency", concurrency, "callers, each with one call in flight")
      ->capture_default_str();
  app.add_option("--rows", rows, "rows per request")->capture_default_str();
  app.add_option("--top-k", top_k)->capture_default_str();
  app.add_option("--seconds", seconds, "measured duration")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  vocabd::VocabdClient::Options options;
  options.target = target;
  options.timeout = std::chrono::milliseconds(600000);
  auto client = vocabd::VocabdClient::Create(options);
  if (!client.ok()) {
    std::fprintf(stderr, "%s\n", client.status().ToString().c_str());
    return 1;
  }
  std::mt19937 rng(3);
  std::normal_distribution<float> dist;
  std::vector<float> hidden(static_cast<size_t>(rows * hidden_size));
  for (float& x : hidden) x = dist(rng);
  vocabd::v1::ScoreRequest request;
  request.set_model(model);
  *request.mutable_hidden() = vocabd::EncodeFloatTensor(hidden, {rows, hidden_size});
  for (int r = 0; r < rows; ++r) request.add_target_ids(1000 + r);
  request.set_top_k(top_k);

  // One untimed call (loads pages, builds the channel).
  if (auto warm = (*client)->Score(request); !warm.ok()) {
    std::fprintf(stderr, "warm-up call failed: %s\n", warm.status().ToString().c_str());
    return 1;
  }
  using Clock = std::chrono::steady_clock;
  const auto end = Clock::now() + std::chrono::duration<double>(seconds);
  std::mutex mu;
  std::vector<double> latencies;
  std::atomic<int64_t> errors{0};
  std::string first_error;
  std::vector<std::thread> threads;
  const auto start = Clock::now();
  for (int c = 0; c < concurrency; ++c) {
    threads.emplace_back([&] {
      std::vector<double> mine;
      while (Clock::now() < end) {
        const auto t0 = Clock::now();
        auto response = (*client)->Score(request);
        const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
        if (response.ok()) {
          mine.push_back(ms);
        } else {
          errors++;
          std::lock_guard<std::mutex> lock(mu);
          if (first_error.empty()) first_error = response.status().ToString();
        }
      }
      std::lock_guard<std::mutex> lock(mu);
      latencies.insert(latencies.end(), mine.begin(), mine.end());
    });
  }
  for (auto& t : threads) t.join();
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  std::sort(latencies.begin(), latencies.end());
  auto pct = [&](double p) {
    return latencies.empty() ? 0.0 : latencies[static_cast<size_t>(p * (latencies.size() - 1))];
  };
  std::printf("concurrency=%d requests=%zu seconds=%.2f rps=%.2f p50_ms=%.1f p99_ms=%.1f errors=%ld\n",
              concurrency, latencies.size(), elapsed, latencies.size() / elapsed, pct(0.5),
              pct(0.99), static_cast<long>(errors.load()));
  if (!first_error.empty()) std::printf("first error: %s\n", first_error.c_str());
  return errors.load() == 0 ? 0 : 2;
}
