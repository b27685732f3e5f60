#include "server/server.h"

#include <condition_variable>
#include <mutex>
#include <thread>

#include <grpcpp/ext/health_check_service_server_builder_option.h>
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "lib/serving/compute_pool.h"
#include "server/metrics.h"
#include "lib/serving/model_registry.h"
#include "lib/serving/model_repository.h"
#include "lib/core/status_macros.h"
#include "server/api_services.h"
#include "server/build_info.h"
#include "server/call_tracker.h"
#include "server/embedding_service.h"
#include "server/health_service.h"
#include "server/logging.h"
#include "server/http_gateway.h"
#include "server/metrics_http.h"
#include "server/model_service.h"
#include "server/position_service.h"
#include "server/scoring_service.h"
#include "server/tokenizer_service.h"

namespace vocabd {
namespace {

// Largest header block gRPC's transport reads for one call, bytes.
constexpr int kMaxTransportMetadataBytes = 4 << 20;

// How often overall health re-checks the default model's files.
constexpr std::chrono::milliseconds kHealthCheckInterval{1000};

// Services whose health grpc.health.v1 reports individually.
// Logs how a model's head is served (dtype, oneDNN kernel, batching) and
// warns when BF16 was asked for but the CPU cannot run it.
void LogServing(const Model& model) {
  // Names come from LoadModel requests: fields, never formatted into the
  // message (server/logging.h).
  const DynamicBatcher* b = model.batcher();
  std::vector<LogField> fields = {
      {"model", model.name()},
      {"weights", quant::GgmlTypeName(model.lm_head_type())},
      {"embedding", quant::GgmlTypeName(model.embedding_type())},
      {"weights_asked", WeightsDTypeName(model.requested_weights_dtype())},
      {"lm_head_kernel", model.lm_head_implementation()},
      {"dynamic_batching", b == nullptr ? "off" : "on"}};
  if (b != nullptr) {
    fields.emplace_back("max_batch_rows", absl::StrCat(b->options().max_batch_rows));
    fields.emplace_back("max_queue_delay_us", absl::StrCat(b->options().max_queue_delay_us));
    fields.emplace_back("max_queue_rows", absl::StrCat(b->options().max_queue_rows));
  }
  LogEvent(spdlog::level::info, "model serving:", fields);
  if (!model.fallback_reason().empty()) {
    LogEvent(spdlog::level::warn, "model weights fallback:",
             {{"model", model.name()}, {"reason", model.fallback_reason()}});
  }
}

}  // namespace

absl::Status VocabdServer::Options::Validate() const {
  if (listen_address.empty()) return absl::InvalidArgumentError("--listen is empty");
  if (models.empty() && model_repository.empty()) {
    return absl::InvalidArgumentError("no --model given (and no --model-repository)");
  }
  if (!load_models.empty() && model_repository.empty()) {
    return absl::InvalidArgumentError("--load-model needs --model-repository");
  }
  for (const ModelSpec& m : models) {
    if (m.name.empty() || m.path.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--model '", m.name, "=", m.path, "' needs the form name=path"));
    }
  }
  RETURN_IF_ERROR(serving.Validate());
  if (model_repository.empty()) {
    for (const auto& [name, o] : serving.per_model) {
      bool known = false;
      for (const ModelSpec& m : models) known = known || m.name == name;
      if (!known) {
        return absl::InvalidArgumentError(
            absl::StrCat("--batching names model '", name, "' which no --model loads"));
      }
    }
  }
  if (compute_threads < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--compute-threads = ", compute_threads, " must be >= 1"));
  }
  if (tokenize_threads < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--tokenize-threads = ", tokenize_threads, " must be >= 1"));
  }
  if (max_queue_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max-queue-size = ", max_queue_size, " must be >= 1"));
  }
  if (max_receive_message_bytes < 1024) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--max-receive-message-bytes = ", max_receive_message_bytes, " must be >= 1024"));
  }
  if (max_send_message_bytes < 1024) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--max-send-message-bytes = ", max_send_message_bytes, " must be >= 1024"));
  }
  if (max_request_memory_bytes < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--max-request-memory-bytes = ", max_request_memory_bytes, " must be >= 0"));
  }
  if (drain_timeout.count() < 0) {
    return absl::InvalidArgumentError("--drain-timeout-ms must be >= 0");
  }
  if (!metrics_listen.empty()) {
    MetricsHttpServer::Options http_options;
    http_options.listen_address = metrics_listen;
    RETURN_IF_ERROR(http_options.Validate());
  }
  RETURN_IF_ERROR(security.Validate());
  if (!http_listen.empty()) {
    std::string host;
    int port = 0;
    RETURN_IF_ERROR(SplitHostPort(http_listen, "--http-listen", &host, &port));
    RETURN_IF_ERROR(http_limits.Validate());
  }
  CallTracker::Options tracker_options;
  tracker_options.max_tokens_per_request = max_tokens_per_request;
  tracker_options.max_concurrent_requests = max_concurrent_requests;
  tracker_options.drain_quiet_period = drain_quiet_period;
  RETURN_IF_ERROR(tracker_options.Validate());
  TokenizeLimits tokenize_limits;
  tokenize_limits.max_text_bytes = max_text_bytes;
  RETURN_IF_ERROR(tokenize_limits.Validate());
  return absl::OkStatus();
}

struct VocabdServer::Impl {
  Options options;
  // Declared first: destroyed last (the services, pool and HTTP thread use it).
  std::unique_ptr<Metrics> metrics;
  std::unique_ptr<CallTracker> tracker;
  std::unique_ptr<MetricsHttpServer> metrics_http;
  ModelRegistry registry;
  // After the registry: destroyed first (joins its load/unload threads).
  std::unique_ptr<ModelRepository> repository;
  std::unique_ptr<ComputePool> pool;
  std::unique_ptr<ComputePool> tokenize_pool;
  std::unique_ptr<ModelServiceImpl> model_service;
  std::unique_ptr<EmbeddingServiceImpl> embedding_service;
  std::unique_ptr<ScoringServiceImpl> scoring_service;
  std::unique_ptr<PositionServiceImpl> position_service;
  std::unique_ptr<TokenizerServiceImpl> tokenizer_service;
  // grpc.health.v1 (ours instead of gRPC's default: Shutdown ends Watch
  // streams, see server/health_service.h).
  std::unique_ptr<HealthService> health_service;
  std::unique_ptr<grpc::Server> server;
  // After the server: destroyed first (its handlers call the server).
  std::unique_ptr<HttpGateway> http_gateway;
  int port = 0;

  std::mutex mu;
  std::condition_variable cv;
  bool shutdown_started = false;
  bool shutdown_done = false;

  // Overall health follows the default model (UpdateHealth); `accepting`
  // turns true once the server is up.
  std::mutex health_mu;
  bool accepting = false;
  std::string damaged_files;  // the last CheckFiles error of the default model

  // Re-checks health every kHealthCheckInterval (the default model's files
  // can change on disk without any registry change) until stopped.
  std::thread health_monitor;
  bool monitor_stop = false;  // guarded by mu

  // Before any member goes: no registry change may reach the health service
  // (a repository thread finishing a load while the members are destroyed).
  ~Impl() {
    StopHealthMonitor();
    registry.set_on_change(nullptr);
  }

  void StopHealthMonitor() {
    {
      std::lock_guard<std::mutex> lock(mu);
      monitor_stop = true;
    }
    cv.notify_all();
    if (health_monitor.joinable()) health_monitor.join();
  }

  // Overall health ("") is SERVING only while the default model is READY
  // and its mapped files are as they were loaded (Checkpoint::CheckFiles):
  // NOT_SERVING while it loads, after a failed load, once unloaded, once a
  // file it serves from was truncated or modified in place (its calls then
  // fail FAILED_PRECONDITION naming the file). The per-service statuses and
  // ModelService stay as they are.
  void UpdateHealth() {
    std::lock_guard<std::mutex> lock(health_mu);
    if (!accepting || health_service == nullptr) return;
    bool serving = registry.default_ready();
    if (serving) {
      absl::StatusOr<std::shared_ptr<const Model>> model = registry.Get("");
      absl::Status files = model.ok() ? (*model)->checkpoint().CheckFiles() : model.status();
      if (!files.ok()) {
        serving = false;
        if (damaged_files != files.message()) {
          damaged_files = std::string(files.message());
          LogEvent(spdlog::level::err, "default model unhealthy (health NOT_SERVING):",
                   {{"model", registry.default_name()}, {"error", damaged_files}});
        }
      } else {
        damaged_files.clear();
      }
    }
    health_service->SetServingStatus("", serving);
  }
};

VocabdServer::VocabdServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

VocabdServer::~VocabdServer() { Shutdown(); }

absl::StatusOr<std::unique_ptr<VocabdServer>> VocabdServer::Create(const Options& options) {
  RETURN_IF_ERROR(options.Validate());
  // Before any thread of ours or gRPC's exists (server/api_services.h).
  BuildApiDescriptors();
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  const BuildInfo& build = GetBuildInfo();
  LogEvent(spdlog::level::info, "vocabd starting:", build.Labels());
  ASSIGN_OR_RETURN(impl->metrics, Metrics::Create(Metrics::Options()));
  impl->metrics->SetBuildInfo(build.Labels());
  CallTracker::Options tracker_options;
  tracker_options.max_tokens_per_request = options.max_tokens_per_request;
  tracker_options.max_concurrent_requests = options.max_concurrent_requests;
  tracker_options.drain_quiet_period = options.drain_quiet_period;
  ASSIGN_OR_RETURN(impl->tracker, CallTracker::Create(tracker_options, impl->metrics.get()));
  ComputePool::Options pool_options;
  pool_options.num_threads = options.compute_threads;
  pool_options.max_queue_size = static_cast<size_t>(options.max_queue_size);
  ASSIGN_OR_RETURN(impl->pool, ComputePool::Create(pool_options));
  ComputePool::Options tokenize_pool_options;
  tokenize_pool_options.num_threads = options.tokenize_threads;
  tokenize_pool_options.max_queue_size = static_cast<size_t>(options.max_queue_size);
  ASSIGN_OR_RETURN(impl->tokenize_pool, ComputePool::Create(tokenize_pool_options));
  // Model options (weights dtype, batcher) for a name and path; batch sizes
  // go to the metrics.
  auto model_options = [impl = impl.get(), serving = options.serving](const std::string& name,
                                                                       const std::string& path) {
    return serving.ForModel(name, path, impl->pool.get(), [metrics = impl->metrics.get()](
                                                              int64_t rows) {
      metrics->ObserveBatchSize(rows);
    });
  };
  for (const ModelSpec& spec : options.models) {
    spdlog::info("loading model '{}' from {}", spec.name, spec.path);
    auto model = Model::Create(model_options(spec.name, spec.path));
    if (!model.ok()) {
      return absl::Status(model.status().code(),
                          absl::StrCat("loading model '", spec.name, "' from ", spec.path, ": ",
                                       model.status().message()));
    }
    const ModelConfig& cfg = (*model)->config();
    LogEvent(spdlog::level::info, "model loaded:",
             {{"model", spec.name},
              {"architecture", cfg.architecture},
              {"vocab_size", absl::StrCat(cfg.vocab_size)},
              {"hidden_size", absl::StrCat(cfg.hidden_size)},
              {"layers", absl::StrCat(cfg.num_hidden_layers)},
              {"heads", absl::StrCat(cfg.num_attention_heads, "/", cfg.num_key_value_heads)},
              {"head_dim", absl::StrCat(cfg.head_dim)},
              {"tied", cfg.tie_word_embeddings ? "true" : "false"},
              {"resident_bytes", absl::StrCat((*model)->resident_bytes())}});
    LogServing(**model);
    RETURN_IF_ERROR(impl->registry.Add(std::shared_ptr<const Model>(std::move(*model))));
  }
  if (!options.default_model.empty()) impl->registry.set_default_name(options.default_model);
  ModelRepository::Options repository_options;
  repository_options.root = options.model_repository;
  repository_options.registry = &impl->registry;
  repository_options.stop_timeout = options.drain_timeout;
  repository_options.factory = [model_options](const std::string& name, const std::string& path)
      -> absl::StatusOr<std::unique_ptr<Model>> {
    auto model = Model::Create(model_options(name, path));
    if (model.ok()) {
      LogServing(**model);
    } else {  // the model shows FAILED with this reason (ListModels, GetModel)
      spdlog::error("loading model '{}' from {} failed: {}", name, path,
                    model.status().ToString());
    }
    return model;
  };
  ASSIGN_OR_RETURN(impl->repository, ModelRepository::Create(repository_options));
  for (const std::string& name : options.load_models) {
    spdlog::info("loading model '{}' from the repository {}", name, impl->repository->root());
    auto model = impl->repository->Load(name);
    if (!model.ok()) return model.status();
  }
  impl->metrics->SetQueueDepthSource(
      "compute", [pool = impl->pool.get()] { return static_cast<int64_t>(pool->queue_depth()); });
  impl->metrics->SetQueueDepthSource("tokenize", [pool = impl->tokenize_pool.get()] {
    return static_cast<int64_t>(pool->queue_depth());
  });
  // Sampled from the registry at every scrape, so --model, --load-model,
  // LoadModel, reloads and UnloadModel all show without hooks of their own.
  impl->metrics->SetModelSource([registry = &impl->registry] {
    std::vector<Metrics::ModelSample> samples;
    for (const std::shared_ptr<const Model>& model : registry->List()) {
      Metrics::ModelSample& sample = samples.emplace_back();
      sample.name = model->name();
      sample.resident_bytes = model->resident_bytes();
      if (const DynamicBatcher* batcher = model->batcher()) {
        sample.lm_head_queued_rows = batcher->queued_rows();
      }
    }
    return samples;
  });

  ServiceContext context;
  context.registry = &impl->registry;
  context.repository = impl->repository.get();
  context.compute_pool = impl->pool.get();
  context.tokenize_pool = impl->tokenize_pool.get();
  context.metrics = impl->metrics.get();
  context.tracker = impl->tracker.get();
  context.max_send_message_bytes = options.max_send_message_bytes;
  context.max_request_memory_bytes = options.max_request_memory_bytes;
  context.tokenize_limits.max_text_bytes = options.max_text_bytes;
  impl->model_service = std::make_unique<ModelServiceImpl>(context);
  impl->embedding_service = std::make_unique<EmbeddingServiceImpl>(context);
  impl->scoring_service = std::make_unique<ScoringServiceImpl>(context);
  impl->position_service = std::make_unique<PositionServiceImpl>(context);
  impl->tokenizer_service = std::make_unique<TokenizerServiceImpl>(context);

  // NOT_SERVING (overall and per service) until everything is up.
  impl->health_service = std::make_unique<HealthService>();
  impl->health_service->SetServingStatus("", false);
  for (const char* name : kApiServices) impl->health_service->SetServingStatus(name, false);

  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  // No default health service: ours is registered below.
  builder.SetOption(std::make_unique<grpc::HealthCheckServiceServerBuilderOption>(nullptr));
  // Calls the token check refuses never reach the interceptors: counted here.
  AuthRefusalHook count_refusal = [metrics = impl->metrics.get()](const std::string& method,
                                                                  double seconds) {
    metrics->RecordRequest(method, "UNAUTHENTICATED", seconds);
  };
  ASSIGN_OR_RETURN(std::shared_ptr<grpc::ServerCredentials> credentials,
                   MakeServerCredentials(options.security, std::move(count_refusal)));
  builder.AddListeningPort(options.listen_address, credentials, &impl->port);
  // gRPC sets SO_REUSEPORT by default: a second vocabd on a taken port would
  // start and silently share the port (clients spread over both servers).
  // Off: a taken --listen address fails the start.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  // Request metadata (headers): gRPC 1.51 treats a header block above this
  // as an error of the whole connection (every call on it fails, the next
  // finds it closed), so the transport's bound is kept high and calls with
  // more than CallTracker's 16 KiB are refused RESOURCE_EXHAUSTED by
  // Admit() (docs/operating.md "Metadata").
  builder.AddChannelArgument(GRPC_ARG_MAX_METADATA_SIZE, kMaxTransportMetadataBytes);
  {
    std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> creators;
    creators.push_back(impl->tracker->MakeInterceptorFactory());
    builder.experimental().SetInterceptorCreators(std::move(creators));
  }
  builder.SetMaxReceiveMessageSize(options.max_receive_message_bytes);
  builder.SetMaxSendMessageSize(options.max_send_message_bytes);
  builder.RegisterService(impl->model_service.get());
  builder.RegisterService(impl->embedding_service.get());
  builder.RegisterService(impl->scoring_service.get());
  builder.RegisterService(impl->position_service.get());
  builder.RegisterService(impl->tokenizer_service.get());
  builder.RegisterService(impl->health_service.get());
  impl->server = builder.BuildAndStart();
  if (impl->server == nullptr || impl->port == 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", options.listen_address, " (address in use or invalid)"));
  }
  if (!options.metrics_listen.empty()) {
    MetricsHttpServer::Options http_options;
    http_options.listen_address = options.metrics_listen;
    auto http = MetricsHttpServer::Create(http_options, impl->metrics.get());
    if (!http.ok()) {
      impl->health_service->Shutdown();
      impl->server->Shutdown();
      impl->pool->Shutdown();
      impl->tokenize_pool->Shutdown();
      return http.status();
    }
    impl->metrics_http = std::move(*http);
    // The bound port, also when --metrics-listen asked for port 0.
    const std::string& listen = options.metrics_listen;
    spdlog::info("metrics on http://{}:{}/metrics (port {})", listen.substr(0, listen.rfind(':')),
                 impl->metrics_http->port(), impl->metrics_http->port());
  }
  if (!options.http_listen.empty()) {
    // The gateway calls this server in process (see server/http_gateway.h):
    // the server's own limits apply, the channel adds none.
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(-1);
    args.SetMaxSendMessageSize(-1);
    HttpGateway::Options http_options;
    http_options.listen_address = options.http_listen;
    http_options.security = options.security;
    // JSON is larger than the binary message (base64 4/3, number arrays
    // ~3x); the gRPC server then holds the decoded request to its limit.
    http_options.limits = options.http_limits;
    http_options.max_receive_message_bytes = options.max_receive_message_bytes;
    http_options.max_request_memory_bytes = options.max_request_memory_bytes;
    http_options.ready = [registry = &impl->registry]() -> absl::StatusOr<std::string> {
      ASSIGN_OR_RETURN(std::shared_ptr<const Model> model, registry->Get(""));
      RETURN_IF_ERROR(model->checkpoint().CheckFiles());
      return model->name();
    };
    auto gateway = HttpGateway::Create(http_options, impl->server->InProcessChannel(args),
                                       impl->metrics.get());
    if (!gateway.ok()) {
      impl->health_service->Shutdown();
      impl->server->Shutdown();
      impl->pool->Shutdown();
      impl->tokenize_pool->Shutdown();
      return gateway.status();
    }
    impl->http_gateway = std::move(*gateway);
    const std::string& listen = options.http_listen;
    spdlog::info("HTTP/JSON on {}://{}:{}/v1/<Service>/<Method> (port {})",
                 impl->http_gateway->tls() ? "https" : "http",
                 listen.substr(0, listen.rfind(':')), impl->http_gateway->port(),
                 impl->http_gateway->port());
  }
  for (const char* name : kApiServices) impl->health_service->SetServingStatus(name, true);
  impl->registry.set_on_change([impl = impl.get()] { impl->UpdateHealth(); });
  {
    std::lock_guard<std::mutex> lock(impl->health_mu);
    impl->accepting = true;
  }
  impl->UpdateHealth();
  impl->health_monitor = std::thread([impl = impl.get()] {
    std::unique_lock<std::mutex> lock(impl->mu);
    while (!impl->cv.wait_for(lock, kHealthCheckInterval, [impl] { return impl->monitor_stop; })) {
      lock.unlock();
      impl->UpdateHealth();
      lock.lock();
    }
  });
  spdlog::info("vocabd listening on port {} ({} model(s), default '{}', tls={}, mtls={}, "
               "token_auth={})",
               impl->port, impl->registry.List().size(), impl->registry.default_name(),
               options.security.tls(), !options.security.tls_client_ca_file.empty(),
               !options.security.auth_token_file.empty());
  return std::unique_ptr<VocabdServer>(new VocabdServer(std::move(impl)));
}

int VocabdServer::port() const { return impl_->port; }

std::shared_ptr<grpc::Channel> VocabdServer::InProcessChannel() const {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  return impl_->server->InProcessChannel(args);
}

int VocabdServer::http_port() const {
  return impl_->http_gateway ? impl_->http_gateway->port() : 0;
}

int VocabdServer::metrics_port() const {
  return impl_->metrics_http ? impl_->metrics_http->port() : 0;
}

Metrics& VocabdServer::metrics() const { return *impl_->metrics; }

std::string VocabdServer::target() const {
  // Keep the host the server listens on; wildcard hosts are reached via
  // loopback.
  std::string host = impl_->options.listen_address;
  const size_t colon = host.rfind(':');
  host = colon == std::string::npos ? host : host.substr(0, colon);
  if (host.empty() || host == "0.0.0.0" || host == "[::]") host = "127.0.0.1";
  return absl::StrCat(host, ":", impl_->port);
}

void VocabdServer::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    if (impl_->shutdown_started) return;
    impl_->shutdown_started = true;
  }
  spdlog::info("draining: health NOT_SERVING, finishing in-flight calls (up to {} ms)",
               impl_->options.drain_timeout.count());
  impl_->StopHealthMonitor();
  // Overall and every per-service status turn NOT_SERVING; Watch streams get
  // that update and then end, so they do not hold the drain below (which
  // waits for every open call).
  impl_->health_service->Shutdown();
  // HTTP: /readyz turns 503, the listener closes and the requests in
  // progress finish (their in-process calls drain with the gRPC ones below,
  // which cancels them at the drain deadline), concurrently with gRPC.
  std::thread http_stop;
  if (impl_->http_gateway) {
    impl_->http_gateway->StartDraining();
    http_stop = std::thread([gateway = impl_->http_gateway.get()] { gateway->Stop(); });
  }
  // Calls already admitted finish; new ones are refused UNAVAILABLE by the
  // tracker (a status clients retry elsewhere) while the server still reads
  // them. Only then does gRPC's own shutdown start (GOAWAY; it would cancel
  // a call that reached the server but had not started yet).
  const auto deadline = std::chrono::system_clock::now() + impl_->options.drain_timeout;
  impl_->tracker->StartDraining();
  if (!impl_->tracker->WaitUntilDrained(deadline)) {
    spdlog::warn("drain deadline reached with calls in flight: cancelling them");
  }
  impl_->server->Shutdown(deadline);
  impl_->pool->Shutdown();
  impl_->tokenize_pool->Shutdown();
  impl_->server->Wait();
  if (http_stop.joinable()) http_stop.join();
  if (impl_->metrics_http) impl_->metrics_http->Stop();
  spdlog::info("vocabd stopped");
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->shutdown_done = true;
  }
  impl_->cv.notify_all();
}

void VocabdServer::Wait() {
  std::unique_lock<std::mutex> lock(impl_->mu);
  impl_->cv.wait(lock, [this] { return impl_->shutdown_done; });
}

}  // namespace vocabd
