#include "lib/core/env_override.h"

#include <cstdlib>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace vocabd {

absl::StatusOr<int> SwitchEnv(const char* name) {
  const char* env = std::getenv(name);
  if (env == nullptr) return -1;
  const std::string value = env;
  if (value == "0" || value == "1") return value == "1" ? 1 : 0;
  return absl::InvalidArgumentError(absl::StrCat(name, " = '", value, "' (want 0 or 1)"));
}

absl::StatusOr<int64_t> RangeEnv(const char* name, int64_t max) {
  const char* env = std::getenv(name);
  if (env == nullptr) return -1;
  int64_t v = 0;
  if (!absl::SimpleAtoi(env, &v) || v < 0 || v > max) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, " = '", env, "' (want an integer in [0, ", max, "])"));
  }
  return v;
}

}  // namespace vocabd
