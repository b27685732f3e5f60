#include "server/response_size.h"

#include <algorithm>
#include <limits>
#include <string>

#include "absl/strings/str_cat.h"

namespace vocabd {

int64_t ResponseByteLimit(int64_t max_send_bytes) {
  return max_send_bytes > 0 ? std::min(max_send_bytes, kMaxProtobufMessageBytes)
                            : kMaxProtobufMessageBytes;
}

absl::Status CheckResponseBytes(int64_t bytes, const std::string& what, int64_t max_send_bytes) {
  const int64_t limit = ResponseByteLimit(max_send_bytes);
  if (bytes <= limit) return absl::OkStatus();
  const std::string size = bytes == std::numeric_limits<int64_t>::max()
                               ? std::string("more than 2^63")
                               : absl::StrCat(bytes);
  return absl::ResourceExhaustedError(absl::StrCat(
      "response would hold ", what, " = ", size, " bytes > ", limit, " (--max-send-message-bytes",
      limit == kMaxProtobufMessageBytes ? ", capped at protobuf's 2 GiB limit" : "",
      "); split the request into smaller ones"));
}

absl::Status CheckResponseSize(const google::protobuf::Message& response, int64_t max_send_bytes) {
  const size_t bytes = response.ByteSizeLong();
  const int64_t limit = ResponseByteLimit(max_send_bytes);
  if (bytes <= static_cast<size_t>(limit)) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrCat(
      "response would be ", bytes, " bytes > ", limit, " (--max-send-message-bytes",
      limit == kMaxProtobufMessageBytes ? ", capped at protobuf's 2 GiB limit" : "",
      "); split the request into smaller ones"));
}

}  // namespace vocabd
