#include "server/logging.h"

#include <chrono>
#include <ctime>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"

namespace vocabd {
namespace {

// The fields of the event being logged on this thread (LogEvent), read by
// the JSON formatter. Null for plain spdlog calls: they have no fields.
thread_local const std::vector<LogField>* t_fields = nullptr;

bool Reserved(const std::string& key) {
  return key == "ts" || key == "level" || key == "msg" || key == "thread";
}

bool NeedsQuotes(std::string_view value) {
  if (value.empty()) return true;
  for (unsigned char c : value) {
    if (c <= 0x20 || c == 0x7f || c == '"' || c == '=' || c == '\\') return true;
  }
  return false;
}

void AppendValue(std::string_view value, std::string* out) {
  if (!NeedsQuotes(value)) {
    out->append(value);
    return;
  }
  out->push_back('"');
  for (unsigned char c : value) {
    switch (c) {
      case '"': out->append("\\\""); break;
      case '\\': out->append("\\\\"); break;
      case '\n': out->append("\\n"); break;
      case '\r': out->append("\\r"); break;
      case '\t': out->append("\\t"); break;
      default:
        if (c < 0x20 || c == 0x7f) {
          static constexpr char kHex[] = "0123456789abcdef";
          out->append("\\x");
          out->push_back(kHex[c >> 4]);
          out->push_back(kHex[c & 0xf]);
        } else {
          out->push_back(static_cast<char>(c));
        }
    }
  }
  out->push_back('"');
}

class JsonFormatter final : public spdlog::formatter {
 public:
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    const auto since_epoch = msg.time.time_since_epoch();
    const std::time_t secs =
        std::chrono::duration_cast<std::chrono::seconds>(since_epoch).count();
    const int millis = static_cast<int>(
        std::chrono::duration_cast<std::chrono::milliseconds>(since_epoch).count() % 1000);
    std::tm tm{};
    gmtime_r(&secs, &tm);
    char ts[80];  // 24 bytes for any year 0..9999; room for what -Wformat-truncation assumes
    std::snprintf(ts, sizeof(ts), "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                  tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, millis);
    const std::string text(msg.payload.data(), msg.payload.size());
    nlohmann::json line;
    line["ts"] = ts;
    const auto level = spdlog::level::to_string_view(msg.level);
    line["level"] = std::string(level.data(), level.size());
    line["thread"] = msg.thread_id;
    line["msg"] = text;
    if (t_fields != nullptr) {
      for (const auto& [key, value] : *t_fields) {
        if (!Reserved(key)) line[key] = value;
      }
    }
    // Invalid UTF-8 in a message must not throw out of the logger.
    const std::string s =
        line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
    dest.append(s.data(), s.data() + s.size());
  }
  std::unique_ptr<spdlog::formatter> clone() const override {
    return std::make_unique<JsonFormatter>();
  }
};

}  // namespace

absl::Status ParseLogFormat(const std::string& name, LogFormat* format) {
  if (name == "text") {
    *format = LogFormat::kText;
  } else if (name == "json") {
    *format = LogFormat::kJson;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("--log-format = '", name, "' must be text or json"));
  }
  return absl::OkStatus();
}

std::unique_ptr<spdlog::formatter> MakeJsonFormatter() { return std::make_unique<JsonFormatter>(); }

std::string FormatLogText(std::string_view msg, const std::vector<LogField>& fields) {
  std::string text(msg);
  for (const auto& [key, value] : fields) {
    if (Reserved(key)) continue;
    text.push_back(' ');
    text.append(key);
    text.push_back('=');
    AppendValue(value, &text);
  }
  return text;
}

void LogEvent(spdlog::level::level_enum level, std::string_view msg,
              const std::vector<LogField>& fields) {
  if (!spdlog::should_log(level)) return;
  const std::string text = FormatLogText(msg, fields);
  const std::vector<LogField>* previous = t_fields;
  t_fields = &fields;
  spdlog::log(level, "{}", text);
  t_fields = previous;
}

absl::Status ConfigureLogging(const std::string& level, LogFormat format) {
  const spdlog::level::level_enum parsed = spdlog::level::from_str(level);
  if (parsed == spdlog::level::off && level != "off") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--log-level = '", level, "' must be trace, debug, info, warn, error, critical or off"));
  }
  spdlog::set_level(parsed);
  if (format == LogFormat::kJson) {
    spdlog::set_formatter(MakeJsonFormatter());
  } else {
    spdlog::set_pattern("[%Y-%m-%d %H:%M:%S.%e] [%l] [%t] %v");
  }
  return absl::OkStatus();
}

}  // namespace vocabd
