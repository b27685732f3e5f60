// The JSON side of the HTTP/JSON front door (server/http_gateway.h): the
// protobuf JSON mapping (google::protobuf::util, proto3 canonical JSON) plus
// one gateway-only convenience for vocabd.v1.Tensor so a curl user can write
// and read small tensors as plain numbers.
//
// Canonical mapping (what every tensor looks like by default):
//   {"dtype": "F32", "shape": ["2", "64"], "data": "<base64 of the raw bytes>"}
// (int64 fields such as shape and token ids are JSON strings on output and
// accept numbers or strings on input; bytes are standard base64; enums are
// names; field names lowerCamelCase on output, either spelling on input.)
//
// Number arrays ("values"):
//   request   any Tensor object may hold "values": [numbers, row-major]
//             instead of "data". "dtype" defaults to F32 and "shape" to
//             [len(values)]; the numbers are encoded to `dtype` exactly as
//             proto/tensor_codec.h's encoders do (F16/BF16 round to nearest
//             even; I32/I64 need integers in range).
//   response  with ?tensors=values (or header `X-Vocabd-Tensors: values`)
//             every response Tensor of at most kMaxValuesElements elements
//             is written as {"dtype", "shape", "values": [...]} (floats in
//             the shortest form that reads back to the same F32 value, NaN
//             and infinities as "NaN" / "Infinity" / "-Infinity" as the
//             mapping writes float fields; I32/I64 as JSON numbers); larger
//             tensors keep "data". Requests accept the same strings.
#ifndef VOCABD_SERVER_HTTP_JSON_H_
#define VOCABD_SERVER_HTTP_JSON_H_

#include <cstdint>
#include <string>
#include <string_view>

#include <google/protobuf/message.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace vocabd {

inline constexpr int64_t kMaxValuesElements = 1 << 20;
// Deepest nesting of objects / arrays a request body may have (the deepest
// vocabd.v1 request nests 4 levels; protobuf's own JSON parser stops at 100).
// Checked by a linear scan before any parser runs (lib/core/json_limits.h):
// a body nested 70,000 levels overflowed the stack of the JSON parsers.
inline constexpr int64_t kMaxJsonDepth = 100;

// OK when `text` can be handed to a JSON parser: UTF-8 (no UTF-16 byte
// order mark, no NUL byte, valid UTF-8 sequences) and nested at most
// kMaxJsonDepth deep. INVALID_ARGUMENT naming the byte offset, or the depth
// and the limit ("request body: JSON nesting depth 70000 is above the limit
// of 100 (first exceeded at byte 110)").
absl::Status CheckJsonText(std::string_view text);

// JSON text -> `message` (its type decides the fields). Unknown fields are
// refused. INVALID_ARGUMENT: CheckJsonText's refusals, not JSON, a wrong
// field or value (protobuf's message), or a bad "values" tensor
// ("<path>.values: ...").
absl::Status JsonToMessage(const std::string& json, google::protobuf::Message* message);

// `message` -> JSON text (fields with default values included). With
// `tensor_values`, small tensors as number arrays (see above).
absl::StatusOr<std::string> MessageToJson(const google::protobuf::Message& message,
                                          bool tensor_values);

// What the JSON conversions cost, checked against --max-request-memory-bytes
// before converting (protobuf's JSON mapping builds an object per JSON value:
// without this bound a 3 MB body of 1,000,000 empty objects peaks at 1.2 GB).
// Request body of B bytes holding n JSON values ('{', '[' and ','):
//   "HTTP/JSON request needs X bytes (body B x 6 + values n x 512)"
// Response message with v values (messages, fields, repeated elements) and
// S serialized bytes:
//   "HTTP/JSON answer needs X bytes (values v x 512 + serialized S x 4)"
// RESOURCE_EXHAUSTED above `budget` (<= 0: no bound).
absl::Status CheckJsonRequestCost(const std::string& body, int64_t budget);
absl::Status CheckJsonAnswerCost(const google::protobuf::Message& message, int64_t budget);

}  // namespace vocabd

#endif  // VOCABD_SERVER_HTTP_JSON_H_
