#include "server/model_service.h"

#include "server/grpc_status.h"
#include "server/proto_convert.h"
#include "server/unimplemented.h"

namespace vocabd {

grpc::ServerUnaryReactor* ModelServiceImpl::ListModels(grpc::CallbackServerContext* context,
                                                       const v1::ListModelsRequest* request,
                                                       v1::ListModelsResponse* response) {
  const std::string default_name = context_.registry->default_name();
  for (const auto& model : context_.registry->List()) {
    *response->add_models() = ModelToProto(*model, model->name() == default_name);
  }
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* ModelServiceImpl::GetModel(grpc::CallbackServerContext* context,
                                                     const v1::GetModelRequest* request,
                                                     v1::ModelInfo* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  auto model = context_.registry->Get(request->name());
  if (!model.ok()) {
    reactor->Finish(ToGrpcStatus(model.status()));
    return reactor;
  }
  *response = ModelToProto(**model, (*model)->name() == context_.registry->default_name());
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* ModelServiceImpl::LoadModel(grpc::CallbackServerContext* context,
                                                      const v1::LoadModelRequest* request,
                                                      v1::ModelInfo* response) {
  return FinishUnimplemented(context,
                             "LoadModel is not implemented yet (model repository: Checkpoints "
                             "issue); start vocabd with --model name=path instead");
}

grpc::ServerUnaryReactor* ModelServiceImpl::UnloadModel(grpc::CallbackServerContext* context,
                                                        const v1::UnloadModelRequest* request,
                                                        v1::UnloadModelResponse* response) {
  return FinishUnimplemented(
      context, "UnloadModel is not implemented yet (model repository: Checkpoints issue)");
}

}  // namespace vocabd
