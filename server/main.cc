// vocabd: the gRPC server. Every flag is described in docs/operating.md ("Flags").
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <thread>

#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include "lib/core/data_path.h"
#include "server/build_info.h"
#include "server/logging.h"
#include "server/server.h"

namespace {

// "name=path" -> ModelSpec; a bare path takes its file/folder stem as name.
vocabd::VocabdServer::ModelSpec ParseModelFlag(const std::string& flag) {
  vocabd::VocabdServer::ModelSpec spec;
  const size_t eq = flag.find('=');
  if (eq != std::string::npos) {
    spec.name = flag.substr(0, eq);
    spec.path = flag.substr(eq + 1);
  } else {
    spec.path = flag;
    std::string base = flag;
    while (!base.empty() && base.back() == '/') base.pop_back();
    base = base.substr(base.find_last_of('/') + 1);
    spec.name = base.substr(0, base.find('.'));
  }
  return spec;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"vocabd: serves token embeddings, LM-head scoring and RoPE over gRPC"};
  // "vocabd version=0.1.0 git_sha=... compiler=... onednn=... build_type=...".
  app.set_version_flag("--version", [] { return "vocabd " + vocabd::GetBuildInfo().ToString(); },
                       "print the version, git commit, compiler, oneDNN and build type, and exit");
  vocabd::VocabdServer::Options options;
  std::vector<std::string> model_flags = {"stories260K=models/stories260K/stories260K.bin"};
  std::string log_level = "info";
  std::string log_format = "text";
  int intra_op_threads = 0;
  int64_t drain_timeout_ms = options.drain_timeout.count();
  int64_t drain_quiet_ms = options.drain_quiet_period.count();
  app.add_option("--listen", options.listen_address, "gRPC listen address host:port (port 0 = any)")
      ->capture_default_str()
      ->envname("VOCABD_LISTEN");
  app.add_option("--model", model_flags,
                 "Model to serve as name=path (repeatable; the first is the default model). "
                 "path: llama2.c .bin file, GGUF .gguf file, or a Hugging Face folder with "
                 "config.json + model.safetensors. A relative path is looked up in the working "
                 "directory, then beside the binary (../share/vocabd, .., ../..)")
      ->capture_default_str()
      ->envname("VOCABD_MODEL");
  app.add_option("--model-repository", options.model_repository,
                 "Model repository: each subfolder is a model that LoadModel/UnloadModel "
                 "load/unload by name (with it, --model has no default)")
      ->envname("VOCABD_MODEL_REPOSITORY");
  app.add_option("--load-model", options.load_models,
                 "Repository model to load at start (repeatable)");
  app.add_option("--default-model", options.default_model,
                 "Model answering requests that name none (default: the first --model, else "
                 "the first --load-model)");
  app.add_option("--compute-threads", options.compute_threads,
                 "Worker threads running the LM head GEMM")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--intra-op-threads", intra_op_threads,
                 "OpenMP threads oneDNN uses inside one GEMM (0 = OMP_NUM_THREADS or all cores)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--tokenize-threads", options.tokenize_threads,
                 "Worker threads for large Tokenize/Detokenize calls (a pool of their own, so "
                 "text work never delays LM-head calls)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--max-queue-size", options.max_queue_size,
                 "LM-head calls that may wait for a worker before RESOURCE_EXHAUSTED")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  // LM-head serving (server/model_serving_options.h).
  std::vector<std::string> weights_dtype_flags, batching_flags, tokenizer_flags;
  app.add_option("--tokenizer", tokenizer_flags,
                 "NAME=PATH: tokenizer for model NAME (a tokenizer.json, tokenizer.model, "
                 "llama2.c tok*.bin, .gguf or HF folder) instead of the one its checkpoint "
                 "carries; a path that does not load fails the model (repeatable)");
  app.add_option("--weights-dtype", weights_dtype_flags,
                 "[NAME=]auto|f32|bf16|q8_0: type the embedding table and LM head are served in "
                 "(repeatable; no NAME = every model; auto = the checkpoint's own: quantized "
                 "GGUF tables as stored, BF16 checkpoints in BF16, F32/F16 in F32; q8_0 "
                 "quantizes F32/BF16/F16 tables at load, like llama.cpp --output-tensor-type). "
                 "bf16 falls back to f32 (logged, shown by GetModel) on CPUs without "
                 "AVX512-BF16/AMX");
  app.add_option("--dynamic-batching", options.serving.dynamic_batching,
                 "Batch concurrent ComputeLogits/Score rows into one GEMM (false: one GEMM per "
                 "call)")
      ->capture_default_str();
  app.add_option("--max-batch-rows", options.serving.batching.max_batch_rows,
                 "Most rows concatenated into one LM-head GEMM (every model)")
      ->capture_default_str();
  app.add_option("--max-queue-delay-us", options.serving.batching.max_queue_delay_us,
                 "How long the first queued call may wait for more rows, microseconds")
      ->capture_default_str();
  app.add_option("--max-queue-rows", options.serving.batching.max_queue_rows,
                 "Rows that may wait for the LM head; beyond it calls get RESOURCE_EXHAUSTED")
      ->capture_default_str();
  app.add_option("--batching", batching_flags,
                 "NAME:KEY=VALUE per-model batching override (repeatable); KEY = "
                 "max_batch_rows, max_queue_delay_us, max_queue_rows or enabled (true/false)");
  app.add_option("--max-receive-message-bytes", options.max_receive_message_bytes,
                 "Largest request accepted")
      ->capture_default_str();
  app.add_option("--max-send-message-bytes", options.max_send_message_bytes,
                 "Largest response sent")
      ->capture_default_str();
  app.add_option("--drain-timeout-ms,--drain-timeout", drain_timeout_ms,
                 "On SIGTERM/SIGINT, how long in-flight calls may take to finish (ms)")
      ->capture_default_str()
      ->envname("VOCABD_DRAIN_TIMEOUT_MS");
  app.add_option("--drain-quiet-ms", drain_quiet_ms,
                 "On SIGTERM/SIGINT, after the in-flight calls finished: how long no new call may "
                 "have arrived before gRPC shuts down (calls in transit are refused UNAVAILABLE, "
                 "not cancelled; ms, within --drain-timeout-ms; 0 = no wait). For callers that "
                 "stop sending on NOT_SERVING")
      ->capture_default_str()
      ->envname("VOCABD_DRAIN_QUIET_MS");
  app.add_option("--metrics-listen", options.metrics_listen,
                 "Prometheus /metrics HTTP address host:port (empty = off)")
      ->capture_default_str()
      ->envname("VOCABD_METRICS_LISTEN");
  app.add_option("--http-listen", options.http_listen,
                 "HTTP/JSON address host:port: POST /v1/<Service>/<Method>, /healthz, /readyz, "
                 "/metrics; same TLS/token/limits as gRPC (empty = off)")
      ->capture_default_str()
      ->envname("VOCABD_HTTP_LISTEN");
  // The HTTP front door's limits (server/http_gateway_connection.h).
  vocabd::HttpLimits& http = options.http_limits;
  app.add_option("--http-max-connections", http.max_connections,
                 "HTTP connections open at once; one more is answered 503 and closed")
      ->capture_default_str();
  app.add_option("--http-max-header-bytes", http.max_header_bytes,
                 "Largest HTTP request head (request line + header fields), bytes; more = 431")
      ->capture_default_str();
  app.add_option("--http-max-headers", http.max_headers,
                 "Most header fields in one HTTP request; more = 431")
      ->capture_default_str();
  app.add_option("--http-max-body-bytes", http.max_body_bytes,
                 "Largest HTTP request body, bytes; more = 413 before reading it (0 = the smaller "
                 "of 4 x --max-receive-message-bytes and --max-request-memory-bytes / 6)")
      ->capture_default_str();
  app.add_option("--http-header-timeout-ms", http.header_timeout_ms,
                 "Time for a whole HTTP request head to arrive (total, TLS handshake included "
                 "for a new connection); then 408 and close")
      ->capture_default_str();
  app.add_option("--http-body-timeout-ms", http.body_timeout_ms,
                 "Time for a whole HTTP request body to arrive; then 408 and close")
      ->capture_default_str();
  app.add_option("--http-idle-timeout-ms", http.idle_timeout_ms,
                 "An HTTP keep-alive connection waiting for its next request closes after this")
      ->capture_default_str();
  app.add_option("--http-write-timeout-ms", http.write_timeout_ms,
                 "Longest wait for an HTTP client to take more of an answer; then close")
      ->capture_default_str();
  app.add_option("--max-tokens-per-request", options.max_tokens_per_request,
                 "Largest request in tokens/rows; more = RESOURCE_EXHAUSTED (0 = no limit)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber)
      ->envname("VOCABD_MAX_TOKENS_PER_REQUEST");
  app.add_option("--max-text-bytes", options.max_text_bytes,
                 "Largest text Tokenize accepts, bytes (a request: 4 x this); more = "
                 "RESOURCE_EXHAUSTED")
      ->capture_default_str()
      ->envname("VOCABD_MAX_TEXT_BYTES");
  app.add_option("--max-concurrent-requests", options.max_concurrent_requests,
                 "vocabd.v1 calls in flight at once; more = RESOURCE_EXHAUSTED (0 = no limit)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber)
      ->envname("VOCABD_MAX_CONCURRENT_REQUESTS");
  app.add_option("--max-request-memory-bytes", options.max_request_memory_bytes,
                 "Memory one call's work may need, computed from the request before "
                 "allocating (docs/operating.md, \"Request memory bound\"); more = "
                 "RESOURCE_EXHAUSTED (0 = no bound)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber)
      ->envname("VOCABD_MAX_REQUEST_MEMORY_BYTES");
  app.add_option("--tls-cert", options.security.tls_cert_file,
                 "PEM certificate chain; with --tls-key turns TLS on")
      ->envname("VOCABD_TLS_CERT");
  app.add_option("--tls-key", options.security.tls_key_file, "PEM private key for --tls-cert")
      ->envname("VOCABD_TLS_KEY");
  app.add_option("--tls-client-ca", options.security.tls_client_ca_file,
                 "PEM CA bundle: require client certificates signed by it (mutual TLS)")
      ->envname("VOCABD_TLS_CLIENT_CA");
  app.add_option("--auth-token-file", options.security.auth_token_file,
                 "File of accepted bearer tokens, one per line (needs TLS; health is exempt)")
      ->envname("VOCABD_AUTH_TOKEN_FILE");
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error, critical, off")
      ->capture_default_str()
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "critical", "off"}))
      ->envname("VOCABD_LOG_LEVEL");
  app.add_option("--log-format", log_format,
                 "text or json (one JSON object per line); debug level logs every request")
      ->capture_default_str()
      ->check(CLI::IsMember({"text", "json"}))
      ->envname("VOCABD_LOG_FORMAT");
  CLI11_PARSE(app, argc, argv);

  vocabd::LogFormat format = vocabd::LogFormat::kText;
  if (absl::Status s = vocabd::ParseLogFormat(log_format, &format); !s.ok() ||
      !(s = vocabd::ConfigureLogging(log_level, format)).ok()) {
    std::cerr << s.message() << "\n";
    return 2;
  }
  if (intra_op_threads > 0) {
    // Read by libgomp when oneDNN first opens a parallel region.
    setenv("OMP_NUM_THREADS", std::to_string(intra_op_threads).c_str(), 1);
  }
  options.drain_timeout = std::chrono::milliseconds(drain_timeout_ms);
  options.drain_quiet_period = std::chrono::milliseconds(drain_quiet_ms);
  options.models.clear();
  if (!options.model_repository.empty() && app.count("--model") == 0 &&
      std::getenv("VOCABD_MODEL") == nullptr) {
    model_flags.clear();  // a repository replaces the built-in default model
  }
  for (const std::string& flag : model_flags) options.models.push_back(ParseModelFlag(flag));
  // Relative paths: the working directory, then the install / container /
  // build-tree data folders beside the binary (lib/core/data_path.h).
  for (auto& spec : options.models) {
    auto path = vocabd::ResolveDataPath(spec.path, "model '" + spec.name + "'");
    if (!path.ok()) {
      spdlog::critical("cannot start: {}", path.status().ToString());
      return 1;
    }
    spec.path = *path;
  }
  if (!options.model_repository.empty()) {
    auto path = vocabd::ResolveDataPath(options.model_repository, "--model-repository");
    if (!path.ok()) {
      spdlog::critical("cannot start: {}", path.status().ToString());
      return 1;
    }
    options.model_repository = *path;
  }
  for (const std::string& flag : weights_dtype_flags) {
    if (absl::Status st = options.serving.AddWeightsDTypeFlag(flag); !st.ok()) {
      std::cerr << st.message() << "\n";
      return 2;
    }
  }
  for (const std::string& flag : tokenizer_flags) {
    if (absl::Status st = options.serving.AddTokenizerFlag(flag); !st.ok()) {
      std::cerr << st.message() << "\n";
      return 2;
    }
  }
  for (const std::string& flag : batching_flags) {
    if (absl::Status st = options.serving.AddBatchingFlag(flag); !st.ok()) {
      std::cerr << st.message() << "\n";
      return 2;
    }
  }

  // Block SIGTERM/SIGINT in every thread; a dedicated thread waits for them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  auto server = vocabd::VocabdServer::Create(options);
  if (!server.ok()) {
    spdlog::critical("cannot start: {}", server.status().ToString());
    return 1;
  }
  std::thread signal_thread([&signals, srv = server->get()] {
    int sig = 0;
    sigwait(&signals, &sig);
    spdlog::info("received {}, shutting down", sig == SIGTERM ? "SIGTERM" : "SIGINT");
    srv->Shutdown();
  });
  (*server)->Wait();
  signal_thread.join();
  return 0;
}
