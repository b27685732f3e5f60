// spdlog setup for vocabd: level and format (text or one JSON object per
// line). JSON lines look like
//   {"ts":"2024-05-01T12:00:00.123Z","level":"info","thread":123,"msg":"..."}
// and key=value pairs in the message (the per-request line) are also emitted
// as JSON fields, so log pipelines can filter on rpc/status/latency_ms.
#ifndef VOCABD_SERVER_LOGGING_H_
#define VOCABD_SERVER_LOGGING_H_

#include <memory>
#include <string>

#include <spdlog/formatter.h>

#include "absl/status/status.h"

namespace vocabd {

enum class LogFormat { kText, kJson };

// "text" | "json"; INVALID_ARGUMENT naming --log-format otherwise.
absl::Status ParseLogFormat(const std::string& name, LogFormat* format);

// Sets the default logger's level ("trace".."off") and format.
// INVALID_ARGUMENT naming --log-level for an unknown level.
absl::Status ConfigureLogging(const std::string& level, LogFormat format);

// The JSON formatter (exposed for tests).
std::unique_ptr<spdlog::formatter> MakeJsonFormatter();

}  // namespace vocabd

#endif  // VOCABD_SERVER_LOGGING_H_
