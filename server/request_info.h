// What the per-request log line and the limits need to know about a request
// message, for every vocabd.v1 request type. Messages of other types (health,
// reflection, streaming, future RPCs) give empty fields and 0 tokens.
#ifndef VOCABD_SERVER_REQUEST_INFO_H_
#define VOCABD_SERVER_REQUEST_INFO_H_

#include <cstdint>
#include <string>
#include <string_view>

#include <google/protobuf/message.h>

#include "absl/status/status.h"

namespace vocabd {

struct RequestInfo {
  std::string request_id;  // the message's request_id field ("" if none)
  std::string model;       // the message's model (GetModel: name) field
  // Tokens (= rows) the request asks to process:
  //   Embed: sum of sequences[*].token_ids sizes
  //   ComputeLogits / Score: hidden.shape[0]
  //   ApplyRope: q tokens, batch x seq (BHSD/BSHD; SaturatingMul: a negative
  //              dim counts as 0, overflow gives INT64_MAX) or total tokens (THD)
  int64_t tokens = 0;
  // The request field that `tokens` counts, named in limit errors.
  std::string tokens_field;
};

RequestInfo GetRequestInfo(const google::protobuf::Message& request);

// A request id (the request_id field, the x-request-id metadata, HTTP's
// X-Request-Id) is at most kMaxRequestIdBytes bytes of printable ASCII
// (0x20-0x7E): it goes into logs and gRPC metadata and is echoed back.
inline constexpr size_t kMaxRequestIdBytes = 128;
// OK, or INVALID_ARGUMENT naming `name`, the length and the bound
//   "request_id is 62914560 bytes long; at most 128 bytes are accepted ..."
// or the first byte outside 0x20-0x7E
//   "request_id byte 3 is 0x09 (TAB): a request id must be printable ASCII
//    (0x20-0x7E), at most 128 bytes".
// The id itself is never quoted.
absl::Status CheckRequestId(std::string_view id, std::string_view name);

}  // namespace vocabd

#endif  // VOCABD_SERVER_REQUEST_INFO_H_
