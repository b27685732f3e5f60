// vocabd.v1.PositionService. RoPE is memory-bound and cheap: it runs inline.
#ifndef VOCABD_SERVER_POSITION_SERVICE_H_
#define VOCABD_SERVER_POSITION_SERVICE_H_

#include "absl/status/status.h"
#include "server/service_context.h"
#include "vocabd/v1/position.grpc.pb.h"

namespace vocabd {

class PositionServiceImpl final : public v1::PositionService::CallbackService {
 public:
  explicit PositionServiceImpl(const ServiceContext& context) : context_(context) {}

  grpc::ServerUnaryReactor* ApplyRope(grpc::CallbackServerContext* context,
                                      const v1::ApplyRopeRequest* request,
                                      v1::ApplyRopeResponse* response) override;
  grpc::ServerUnaryReactor* GetRopeCache(grpc::CallbackServerContext* context,
                                         const v1::GetRopeCacheRequest* request,
                                         v1::GetRopeCacheResponse* response) override;
  grpc::ServerUnaryReactor* GetSinusoidalPositions(
      grpc::CallbackServerContext* context, const v1::GetSinusoidalPositionsRequest* request,
      v1::GetSinusoidalPositionsResponse* response) override;
  grpc::ServerUnaryReactor* GetAlibiSlopes(grpc::CallbackServerContext* context,
                                           const v1::GetAlibiSlopesRequest* request,
                                           v1::GetAlibiSlopesResponse* response) override;

 private:
  absl::Status DoApplyRope(const v1::ApplyRopeRequest& request, v1::ApplyRopeResponse* response);
  absl::Status DoGetRopeCache(const v1::GetRopeCacheRequest& request,
                              v1::GetRopeCacheResponse* response);
  absl::Status DoGetSinusoidalPositions(const v1::GetSinusoidalPositionsRequest& request,
                                        v1::GetSinusoidalPositionsResponse* response);
  absl::Status DoGetAlibiSlopes(const v1::GetAlibiSlopesRequest& request,
                                v1::GetAlibiSlopesResponse* response);
  ServiceContext context_;
};

}  // namespace vocabd

#endif  // VOCABD_SERVER_POSITION_SERVICE_H_
