#include "server/logging.h"

#include <chrono>
#include <ctime>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"

namespace vocabd {
namespace {

// Splits "text key=value key2=value2" style messages: every whitespace-
// separated token of the form key=value (key = [a-z_]+) becomes a field.
void AddKeyValues(const std::string& msg, nlohmann::json* out) {
  size_t i = 0;
  while (i < msg.size()) {
    while (i < msg.size() && msg[i] == ' ') ++i;
    size_t end = msg.find(' ', i);
    if (end == std::string::npos) end = msg.size();
    const std::string token = msg.substr(i, end - i);
    const size_t eq = token.find('=');
    if (eq != std::string::npos && eq > 0) {
      const std::string key = token.substr(0, eq);
      bool ok = true;
      for (char c : key) ok = ok && ((c >= 'a' && c <= 'z') || c == '_');
      if (ok && key != "ts" && key != "level" && key != "msg" && key != "thread") {
        std::string value = token.substr(eq + 1);
        // "tls=false," / "rows=4096)": punctuation of the prose, not the value.
        while (!value.empty() && (value.back() == ',' || value.back() == ';' ||
                                  (value.back() == ')' && value.find('(') == std::string::npos))) {
          value.pop_back();
        }
        (*out)[key] = value;
      }
    }
    i = end;
  }
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
    char ts[40];
    std::snprintf(ts, sizeof(ts), "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                  tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, millis);
    const std::string text(msg.payload.data(), msg.payload.size());
    nlohmann::json line;
    line["ts"] = ts;
    const auto level = spdlog::level::to_string_view(msg.level);
    line["level"] = std::string(level.data(), level.size());
    line["thread"] = msg.thread_id;
    line["msg"] = text;
    AddKeyValues(text, &line);
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
