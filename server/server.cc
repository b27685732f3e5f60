#include "server/server.h"

#include <condition_variable>
#include <mutex>

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "lib/compute_pool.h"
#include "lib/model_registry.h"
#include "lib/model_repository.h"
#include "lib/status_macros.h"
#include "server/embedding_service.h"
#include "server/model_service.h"
#include "server/position_service.h"
#include "server/scoring_service.h"

namespace vocabd {
namespace {

// Services whose health grpc.health.v1 reports individually.
const char* const kServiceNames[] = {
    "vocabd.v1.ModelService", "vocabd.v1.EmbeddingService", "vocabd.v1.ScoringService",
    "vocabd.v1.PositionService"};

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
  if (compute_threads < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--compute-threads = ", compute_threads, " must be >= 1"));
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
  if (drain_timeout.count() < 0) {
    return absl::InvalidArgumentError("--drain-timeout-ms must be >= 0");
  }
  return absl::OkStatus();
}

struct VocabdServer::Impl {
  Options options;
  ModelRegistry registry;
  // After the registry: destroyed first (joins its load/unload threads).
  std::unique_ptr<ModelRepository> repository;
  std::unique_ptr<ComputePool> pool;
  std::unique_ptr<ModelServiceImpl> model_service;
  std::unique_ptr<EmbeddingServiceImpl> embedding_service;
  std::unique_ptr<ScoringServiceImpl> scoring_service;
  std::unique_ptr<PositionServiceImpl> position_service;
  std::unique_ptr<grpc::Server> server;
  int port = 0;

  std::mutex mu;
  std::condition_variable cv;
  bool shutdown_started = false;
  bool shutdown_done = false;
};

VocabdServer::VocabdServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

VocabdServer::~VocabdServer() { Shutdown(); }

absl::StatusOr<std::unique_ptr<VocabdServer>> VocabdServer::Create(const Options& options) {
  RETURN_IF_ERROR(options.Validate());
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  for (const ModelSpec& spec : options.models) {
    spdlog::info("loading model '{}' from {}", spec.name, spec.path);
    auto model = Model::Create({spec.name, spec.path});
    if (!model.ok()) {
      return absl::Status(model.status().code(),
                          absl::StrCat("loading model '", spec.name, "' from ", spec.path, ": ",
                                       model.status().message()));
    }
    const ModelConfig& cfg = (*model)->config();
    spdlog::info(
        "model '{}': {} vocab_size={} hidden_size={} layers={} heads={}/{} head_dim={} "
        "tied={} resident_bytes={}",
        spec.name, cfg.architecture, cfg.vocab_size, cfg.hidden_size, cfg.num_hidden_layers,
        cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim, cfg.tie_word_embeddings,
        (*model)->checkpoint().resident_bytes());
    RETURN_IF_ERROR(impl->registry.Add(std::shared_ptr<const Model>(std::move(*model))));
  }
  if (!options.default_model.empty()) impl->registry.set_default_name(options.default_model);
  ModelRepository::Options repository_options;
  repository_options.root = options.model_repository;
  repository_options.registry = &impl->registry;
  ASSIGN_OR_RETURN(impl->repository, ModelRepository::Create(repository_options));
  for (const std::string& name : options.load_models) {
    spdlog::info("loading model '{}' from the repository {}", name, impl->repository->root());
    auto model = impl->repository->Load(name);
    if (!model.ok()) return model.status();
  }
  ComputePool::Options pool_options;
  pool_options.num_threads = options.compute_threads;
  pool_options.max_queue_size = static_cast<size_t>(options.max_queue_size);
  ASSIGN_OR_RETURN(impl->pool, ComputePool::Create(pool_options));

  ServiceContext context;
  context.registry = &impl->registry;
  context.repository = impl->repository.get();
  context.compute_pool = impl->pool.get();
  impl->model_service = std::make_unique<ModelServiceImpl>(context);
  impl->embedding_service = std::make_unique<EmbeddingServiceImpl>(context);
  impl->scoring_service = std::make_unique<ScoringServiceImpl>(context);
  impl->position_service = std::make_unique<PositionServiceImpl>(context);

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  builder.AddListeningPort(options.listen_address, grpc::InsecureServerCredentials(),
                           &impl->port);
  builder.SetMaxReceiveMessageSize(options.max_receive_message_bytes);
  builder.SetMaxSendMessageSize(options.max_send_message_bytes);
  builder.RegisterService(impl->model_service.get());
  builder.RegisterService(impl->embedding_service.get());
  builder.RegisterService(impl->scoring_service.get());
  builder.RegisterService(impl->position_service.get());
  impl->server = builder.BuildAndStart();
  if (impl->server == nullptr || impl->port == 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", options.listen_address, " (address in use or invalid)"));
  }
  grpc::HealthCheckServiceInterface* health = impl->server->GetHealthCheckService();
  health->SetServingStatus(true);
  for (const char* name : kServiceNames) health->SetServingStatus(name, true);
  spdlog::info("vocabd listening on port {} ({} model(s), default '{}')", impl->port,
               options.models.size(), impl->registry.default_name());
  return std::unique_ptr<VocabdServer>(new VocabdServer(std::move(impl)));
}

int VocabdServer::port() const { return impl_->port; }

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
  grpc::HealthCheckServiceInterface* health = impl_->server->GetHealthCheckService();
  // Flips overall and every per-service status to NOT_SERVING.
  health->Shutdown();
  impl_->server->Shutdown(std::chrono::system_clock::now() + impl_->options.drain_timeout);
  impl_->pool->Shutdown();
  impl_->server->Wait();
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
