// vocabd.v1.PositionService.
//
// Every RPC first passes the admission check (RejectIfNotAdmitted:
// cancelled / past deadline / --max-concurrent-requests /
// --max-tokens-per-request, see server/call_tracker.h).
//
// Where the work runs: reactors never block. A call whose work is at most
// kPositionInlineMaxValues float values runs inline on the reactor thread
// (single-threaded; ~1 MiB of F32, well under a millisecond of RoPE), a
// larger one runs on the bounded compute pool (ServiceContext::compute_pool,
// the LM head's pool: RESOURCE_EXHAUSTED when its queue is full; a call
// cancelled or past its deadline while queued is finished without
// computing, as scoring does) and the pool worker finishes the reactor.
// The work measure:
//   ApplyRope               q + k values (payload bytes / element size)
//   GetRopeCache            num_positions x rotary_dim (cos + sin)
//   GetSinusoidalPositions  num_positions x dim
//   GetAlibiSlopes          heads x q_len x k_len with the bias, else heads
// On the pool, ApplyRope splits q + k >= 4 MiB over threads (lib/positions/rope.h);
// inline it never starts a thread. Without a pool (services built without
// a server) everything runs inline.
#ifndef VOCABD_SERVER_POSITION_SERVICE_H_
#define VOCABD_SERVER_POSITION_SERVICE_H_

#include <cstdint>
#include <functional>

#include <google/protobuf/message.h>

#include "absl/status/status.h"
#include "lib/checkpoint/model_config.h"
#include "server/service_context.h"
#include "vocabd/v1/position.grpc.pb.h"

namespace vocabd {

// Largest work (float values, see above) a position call does inline.
inline constexpr int64_t kPositionInlineMaxValues = int64_t{1} << 18;

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
  // Runs `fill` inline when `cost` <= kPositionInlineMaxValues, else on
  // the compute pool (see above); finishes `reactor` with its status.
  // `fill(on_pool)` fills `response`, whose size is then checked against
  // --max-send-message-bytes (server/response_size.h).
  // `rpc` names the call in the status of an exception (server/handler_guard.h).
  void Run(const char* rpc, grpc::CallbackServerContext* call, grpc::ServerUnaryReactor* reactor,
           int64_t cost,
           const google::protobuf::Message* response,
           std::function<absl::Status(bool on_pool)> fill);
  absl::Status DoApplyRope(const v1::ApplyRopeRequest& request, bool on_pool,
                           v1::ApplyRopeResponse* response);
  absl::Status DoGetRopeCache(const RopeParams& params, const v1::GetRopeCacheRequest& request,
                              v1::GetRopeCacheResponse* response);
  absl::Status DoGetSinusoidalPositions(const v1::GetSinusoidalPositionsRequest& request,
                                        v1::GetSinusoidalPositionsResponse* response);
  absl::Status DoGetAlibiSlopes(const v1::GetAlibiSlopesRequest& request, int64_t heads,
                                v1::GetAlibiSlopesResponse* response);
  ServiceContext context_;
};

}  // namespace vocabd

#endif  // VOCABD_SERVER_POSITION_SERVICE_H_
