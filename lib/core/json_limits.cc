#include "lib/core/json_limits.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace vocabd {
namespace {

struct DepthScan {
  int64_t max_depth = 0;
  int64_t first_over_at = -1;  // byte offset of the bracket that first went over `limit`
};

DepthScan Scan(std::string_view text, int64_t limit) {
  DepthScan scan;
  int64_t depth = 0;
  bool in_string = false;
  bool escaped = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    switch (c) {
      case '"':
        in_string = true;
        break;
      case '[':
      case '{':
        ++depth;
        if (depth > scan.max_depth) scan.max_depth = depth;
        if (depth > limit && scan.first_over_at < 0) scan.first_over_at = static_cast<int64_t>(i);
        break;
      case ']':
      case '}':
        if (depth > 0) --depth;
        break;
      default:
        break;
    }
  }
  return scan;
}

}  // namespace

int64_t JsonNestingDepth(std::string_view text) {
  return Scan(text, INT64_MAX).max_depth;
}

absl::Status CheckJsonDepth(std::string_view text, int64_t max_depth, std::string_view what) {
  const DepthScan scan = Scan(text, max_depth);
  if (scan.max_depth <= max_depth) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(std::string(what), ": JSON nesting depth ", scan.max_depth,
                                                 " is above the limit of ", max_depth,
                                                 " (first exceeded at byte ", scan.first_over_at,
                                                 ")"));
}

}  // namespace vocabd
