// The one mapping from absl::Status (lib/) to grpc::Status.
#ifndef VOCABD_SERVER_GRPC_STATUS_H_
#define VOCABD_SERVER_GRPC_STATUS_H_

#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace vocabd {

// Same code (absl and gRPC codes share numbering), same message.
grpc::Status ToGrpcStatus(const absl::Status& status);

}  // namespace vocabd

#endif  // VOCABD_SERVER_GRPC_STATUS_H_
