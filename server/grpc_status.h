// The one mapping from absl::Status (lib/) to grpc::Status.
#ifndef VOCABD_SERVER_GRPC_STATUS_H_
#define VOCABD_SERVER_GRPC_STATUS_H_

#include <grpcpp/support/status.h>

#include <string>

#include "absl/status/status.h"

namespace vocabd {

// Same code (absl and gRPC codes share numbering), same message.
grpc::Status ToGrpcStatus(const absl::Status& status);

// The canonical name of a status code ("INVALID_ARGUMENT", ...), as metrics
// labels and HTTP error bodies print it.
std::string StatusCodeName(grpc::StatusCode code);

}  // namespace vocabd

#endif  // VOCABD_SERVER_GRPC_STATUS_H_
