// Answers for RPCs that a later issue implements.
#ifndef VOCABD_SERVER_UNIMPLEMENTED_H_
#define VOCABD_SERVER_UNIMPLEMENTED_H_

#include <string>

#include <grpcpp/grpcpp.h>

#include "lib/core/happens_before.h"

namespace vocabd {

// A bidi-stream reactor that finishes at once with UNIMPLEMENTED and
// `message`, and deletes itself when gRPC is done with it.
template <typename Request, typename Response>
class UnimplementedBidiReactor : public grpc::ServerBidiReactor<Request, Response> {
 public:
  explicit UnimplementedBidiReactor(const std::string& message) {
    this->Finish(grpc::Status(grpc::StatusCode::UNIMPLEMENTED, message));
    HappensBefore(this);  // OnDone runs on another thread
  }
  void OnDone() override {
    HappensAfter(this);
    delete this;
  }
};

// Finishes a unary call with UNIMPLEMENTED and `message`.
inline grpc::ServerUnaryReactor* FinishUnimplemented(grpc::CallbackServerContext* context,
                                                     const std::string& message) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(grpc::Status(grpc::StatusCode::UNIMPLEMENTED, message));
  return reactor;
}

}  // namespace vocabd

#endif  // VOCABD_SERVER_UNIMPLEMENTED_H_
