#include "server/model_service.h"

#include <set>
#include <string>

#include "absl/strings/str_cat.h"

#include "server/grpc_status.h"
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
  std::set<std::string> known;
  for (const ModelStatus& status : context_.registry->Statuses()) {
    *response->add_models() = StatusToProto(status);
    known.insert(status.name);
  }
  // Repository subfolders not loaded (and not failed): loadable by name.
  if (context_.repository != nullptr) {
    for (const std::string& name : context_.repository->Available()) {
      if (known.count(name) != 0) continue;
      v1::ModelInfo* info = response->add_models();
      info->set_name(name);
      info->set_state(v1::AVAILABLE);
      info->set_state_reason(absl::StrCat("in the model repository ", context_.repository->root(),
                                          "; LoadModel loads it"));
    }
  }
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
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
  *response = StatusToProto(*status);
  reactor->Finish(grpc::Status::OK);
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
        *response = ModelToProto(**model, (*model)->name() == registry->default_name());
        reactor->Finish(grpc::Status::OK);
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
