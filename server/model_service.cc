#include "server/model_service.h"

#include "server/grpc_status.h"
#include "server/handler_guard.h"
#include "server/proto_convert.h"

namespace vocabd {
namespace {

v1::ModelState StateToProto(ModelState state) {
  switch (state) {
    case ModelState::kLoading: return v1::LOADING;
    case ModelState::kReady: return v1::READY;
    case ModelState::kFailed: return v1::FAILED;
    case ModelState::kUnloading: return v1::UNLOADING;
  }
  return v1::MODEL_STATE_UNSPECIFIED;
}

v1::ModelInfo StatusToProto(const ModelStatus& status) {
  v1::ModelInfo info;
  if (status.model != nullptr) {
    info = ModelToProto(*status.model, status.is_default);
  } else {
    info.set_name(status.name);
    info.set_is_default(status.is_default);
  }
  info.set_state(StateToProto(status.state));
  info.set_state_reason(status.reloading ? "reloading: a new version is being loaded"
                                         : status.reason);
  return info;
}

}  // namespace

grpc::ServerUnaryReactor* ModelServiceImpl::ListModels(grpc::CallbackServerContext* context,
                                                       const v1::ListModelsRequest* request,
                                                       v1::ListModelsResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  absl::Status listed = CatchAll("ListModels", nullptr, [&] {
    for (const ModelStatus& status : context_.registry->Statuses()) {
      *response->add_models() = StatusToProto(status);
    }
    return absl::OkStatus();
  });
  reactor->Finish(ToGrpcStatus(listed));
  return reactor;
}

grpc::ServerUnaryReactor* ModelServiceImpl::GetModel(grpc::CallbackServerContext* context,
                                                     const v1::GetModelRequest* request,
                                                     v1::ModelInfo* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  const std::string name =
      request->name().empty() ? context_.registry->default_name() : request->name();
  auto status = context_.registry->Status(name);
  if (!status.ok()) {
    // Same NOT_FOUND message (listing loaded models) as every other RPC.
    auto model = context_.registry->Get(request->name());
    reactor->Finish(ToGrpcStatus(model.ok() ? status.status() : model.status()));
    return reactor;
  }
  reactor->Finish(ToGrpcStatus(CatchAll("GetModel", nullptr, [&] {
    *response = StatusToProto(*status);
    return absl::OkStatus();
  })));
  return reactor;
}

grpc::ServerUnaryReactor* ModelServiceImpl::LoadModel(grpc::CallbackServerContext* context,
                                                      const v1::LoadModelRequest* request,
                                                      v1::ModelInfo* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (context_.repository == nullptr) {
    reactor->Finish(ToGrpcStatus(absl::FailedPreconditionError(
        "no model repository: start vocabd with --model-repository DIR")));
    return reactor;
  }
  // The load runs on a repository thread; the reactor finishes from there,
  // so no gRPC thread waits for it.
  ModelRegistry* registry = context_.registry;
  context_.repository->LoadAsync(
      request->name(),
      [reactor, response, registry](absl::StatusOr<std::shared_ptr<const Model>> model) {
        if (!model.ok()) {
          reactor->Finish(ToGrpcStatus(model.status()));
          return;
        }
        reactor->Finish(ToGrpcStatus(CatchAll("LoadModel", nullptr, [&] {
          *response = ModelToProto(**model, (*model)->name() == registry->default_name());
          return absl::OkStatus();
        })));
      });
  return reactor;
}

grpc::ServerUnaryReactor* ModelServiceImpl::UnloadModel(grpc::CallbackServerContext* context,
                                                        const v1::UnloadModelRequest* request,
                                                        v1::UnloadModelResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (context_.repository == nullptr) {
    reactor->Finish(ToGrpcStatus(absl::FailedPreconditionError("server has no model repository")));
    return reactor;
  }
  // Waiting for in-flight calls happens on a repository thread.
  context_.repository->UnloadAsync(
      request->name(), [reactor](absl::Status s) { reactor->Finish(ToGrpcStatus(s)); });
  return reactor;
}

}  // namespace vocabd
