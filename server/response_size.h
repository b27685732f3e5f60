// Response size limit shared by every handler.
//
// gRPC answers RESOURCE_EXHAUSTED itself for a response above
// --max-send-message-bytes, but only once the message is serialized, and
// protobuf cannot serialize 2 GiB or more: gRPC 1.51 then aborts the whole
// process (`assertion failed: serializer_(msg_).ok()`). A few-KB request can
// ask for that much (Embed of 8.4M token ids on a 64-wide model,
// ComputeLogits with a 128K+ vocabulary), so handlers check the size
// themselves: before computing where it is known from the request
// (CheckResponseBytes), and on the finished message before sending it
// (CheckResponseSize).
#ifndef VOCABD_SERVER_RESPONSE_SIZE_H_
#define VOCABD_SERVER_RESPONSE_SIZE_H_

#include <cstdint>
#include <string>

#include <google/protobuf/message.h>

#include "absl/status/status.h"

namespace vocabd {

// Largest message protobuf can serialize (2 GiB - 1).
inline constexpr int64_t kMaxProtobufMessageBytes = 0x7fffffff;

// The limit a response must stay under: --max-send-message-bytes, never
// more than kMaxProtobufMessageBytes (max_send_bytes <= 0: that cap alone).
int64_t ResponseByteLimit(int64_t max_send_bytes);

// RESOURCE_EXHAUSTED when `bytes` (the payload a request asks for,
// described by `what`, e.g. "8388608 tokens x hidden_size 64 x F32") exceed
// the limit; OK otherwise.
absl::Status CheckResponseBytes(int64_t bytes, const std::string& what, int64_t max_send_bytes);

// RESOURCE_EXHAUSTED when the serialized `response` would exceed the limit.
absl::Status CheckResponseSize(const google::protobuf::Message& response, int64_t max_send_bytes);

}  // namespace vocabd

#endif  // VOCABD_SERVER_RESPONSE_SIZE_H_
