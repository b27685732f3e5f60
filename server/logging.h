// spdlog setup for vocabd: level and format (text or one JSON object per
// line). JSON lines look like
//   {"ts":"2024-05-01T12:00:00.123Z","level":"info","thread":123,"msg":"...",
//    <the line's fields>}
// Fields are structured data passed to LogEvent (the per-request line's
// id/rpc/model/rows/status/latency_ms/peer/error, the build and model
// lines): each becomes its own JSON member, a string. The message text is
// never parsed for fields, so client-controlled text (a model name, a
// request id, an error message holding `" status=OK`, quotes or newlines)
// stays inside the one value it belongs to and cannot forge another field
// or another line. The JSON formatter reads a line's fields from a
// thread-local set by LogEvent around the spdlog call, so it needs
// synchronous sinks (vocabd's default stderr logger; no async logger).
//
// Text format: `<msg> key=value key2="a value"`: values holding a space,
// '"', '=', a backslash or a control character (newline...) are written
// quoted with \" \\ \n \r \t \xHH escapes (logfmt), so one event is one
// line.
#ifndef VOCABD_SERVER_LOGGING_H_
#define VOCABD_SERVER_LOGGING_H_

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <spdlog/common.h>
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

// One field of a log line: key ([a-z_]+; "ts", "level", "thread" and "msg"
// are reserved and dropped) and value (any bytes; invalid UTF-8 is replaced
// in JSON).
using LogField = std::pair<std::string, std::string>;

// Logs `msg` with `fields` at `level` (nothing is built when the level is
// off): JSON members in --log-format json, logfmt pairs after the message in
// text (see the file comment).
void LogEvent(spdlog::level::level_enum level, std::string_view msg,
              const std::vector<LogField>& fields);

// The text form of an event: msg, then " key=value" per field, values
// quoted and escaped when needed (exposed for tests).
std::string FormatLogText(std::string_view msg, const std::vector<LogField>& fields);

}  // namespace vocabd

#endif  // VOCABD_SERVER_LOGGING_H_
