#include "server/model_service.h"

#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"

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

// LoadModel's reactor. The load runs on a repository thread and may take
// long (or, on a hung filesystem, never end); the call must not outlive a
// cancel: the client going away, its deadline, or the drain's deadline
// (grpc::Server::Shutdown cancels calls still open then). OnCancel answers
// CANCELLED at once and the load goes on in the background (GetModel shows
// its state); whichever of the load and the cancel comes first finishes the
// call, the other finds it finished.
class LoadReactor final : public grpc::ServerUnaryReactor {
 public:
  struct State {
    std::mutex mu;
    bool finished = false;
    LoadReactor* reactor = nullptr;
    v1::ModelInfo* response = nullptr;
  };
  LoadReactor(std::string name, v1::ModelInfo* response)
      : name_(std::move(name)), state_(std::make_shared<State>()) {
    state_->reactor = this;
    state_->response = response;
  }
  std::shared_ptr<State> state() const { return state_; }

  // Finishes the call unless it already was; `fill` writes the response
  // first (only when this call finishes it).
  static void FinishOnce(const std::shared_ptr<State>& state, const grpc::Status& status,
                         const std::function<void(v1::ModelInfo*)>& fill) {
    LoadReactor* reactor = nullptr;
    {
      std::lock_guard<std::mutex> lock(state->mu);
      if (state->finished || state->reactor == nullptr) return;
      state->finished = true;
      if (fill && status.ok()) fill(state->response);
      reactor = state->reactor;
    }
    // The reactor lives until OnDone, which follows this Finish.
    reactor->Finish(status);
  }

  void OnCancel() override {
    FinishOnce(state_,
               ToGrpcStatus(absl::CancelledError(absl::StrCat(
                   "LoadModel '", name_,
                   "' cancelled (client gone, deadline passed or server draining); the load "
                   "goes on in the background: GetModel shows its state"))),
               nullptr);
  }
  void OnDone() override {
    {
      std::lock_guard<std::mutex> lock(state_->mu);
      state_->reactor = nullptr;
      state_->response = nullptr;
    }
    delete this;
  }

 private:
  const std::string name_;
  std::shared_ptr<State> state_;
};

}  // namespace

grpc::ServerUnaryReactor* ModelServiceImpl::ListModels(grpc::CallbackServerContext* context,
                                                       const v1::ListModelsRequest* request,
                                                       v1::ListModelsResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  absl::Status listed = CatchAll("ListModels", nullptr, [&] {
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
        info->set_state_reason(absl::StrCat("in the model repository ",
                                            context_.repository->root(), "; LoadModel loads it"));
      }
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
  if (context_.repository == nullptr) {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(ToGrpcStatus(absl::FailedPreconditionError(
        "no model repository: start vocabd with --model-repository DIR")));
    return reactor;
  }
  // The load runs on a repository thread; the reactor finishes from there
  // (or at once on cancel), so no gRPC thread waits for it.
  auto* reactor = new LoadReactor(request->name(), response);
  ModelRegistry* registry = context_.registry;
  context_.repository->LoadAsync(
      request->name(),
      [state = reactor->state(), registry](absl::StatusOr<std::shared_ptr<const Model>> model) {
        if (!model.ok()) {
          LoadReactor::FinishOnce(state, ToGrpcStatus(model.status()), nullptr);
          return;
        }
        v1::ModelInfo info;
        const grpc::Status status = ToGrpcStatus(CatchAll("LoadModel", nullptr, [&] {
          info = ModelToProto(**model, (*model)->name() == registry->default_name());
          return absl::OkStatus();
        }));
        LoadReactor::FinishOnce(state, status,
                                [&](v1::ModelInfo* response) { *response = std::move(info); });
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
