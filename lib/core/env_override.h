// Operators' overrides of start-up choices in environment variables
// (VOCABD_QUANT_PACK, VOCABD_QUANT_PREFETCH, VOCABD_HEAD_HUGE_PAGES, ...:
// docs/operating.md lists them), validated: a value outside the variable's
// domain is INVALID_ARGUMENT naming the variable, the value and the domain,
// so a typo fails the load instead of being ignored.
#ifndef VOCABD_LIB_CORE_ENV_OVERRIDE_H_
#define VOCABD_LIB_CORE_ENV_OVERRIDE_H_

#include <cstdint>

#include "absl/status/statusor.h"

namespace vocabd {

// On/off switch: -1 when `name` is unset, else 0 or 1 ("0" / "1");
// e.g. INVALID_ARGUMENT "VOCABD_QUANT_PACK = 'yes' (want 0 or 1)".
absl::StatusOr<int> SwitchEnv(const char* name);

// Integer: -1 when `name` is unset, else a value in [0, max];
// e.g. INVALID_ARGUMENT "VOCABD_QUANT_PREFETCH = '9' (want an integer in [0, 8])".
absl::StatusOr<int64_t> RangeEnv(const char* name, int64_t max);

}  // namespace vocabd

#endif  // VOCABD_LIB_CORE_ENV_OVERRIDE_H_
