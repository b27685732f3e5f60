// vocabd.v1.ModelService.
#ifndef VOCABD_SERVER_MODEL_SERVICE_H_
#define VOCABD_SERVER_MODEL_SERVICE_H_

#include "server/service_context.h"
#include "vocabd/v1/model.grpc.pb.h"

namespace vocabd {

class ModelServiceImpl final : public v1::ModelService::CallbackService {
 public:
  explicit ModelServiceImpl(const ServiceContext& context) : context_(context) {}

  grpc::ServerUnaryReactor* ListModels(grpc::CallbackServerContext* context,
                                       const v1::ListModelsRequest* request,
                                       v1::ListModelsResponse* response) override;
  grpc::ServerUnaryReactor* GetModel(grpc::CallbackServerContext* context,
                                     const v1::GetModelRequest* request,
                                     v1::ModelInfo* response) override;
  grpc::ServerUnaryReactor* LoadModel(grpc::CallbackServerContext* context,
                                      const v1::LoadModelRequest* request,
                                      v1::ModelInfo* response) override;
  grpc::ServerUnaryReactor* UnloadModel(grpc::CallbackServerContext* context,
                                        const v1::UnloadModelRequest* request,
                                        v1::UnloadModelResponse* response) override;

 private:
  ServiceContext context_;
};

}  // namespace vocabd

#endif  // VOCABD_SERVER_MODEL_SERVICE_H_
