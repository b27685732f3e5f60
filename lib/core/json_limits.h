// Bounds checked on JSON text before it is parsed.
//
// Recursive-descent JSON parsers and the trees they build recurse once per
// nesting level (nlohmann::json's destructor and protobuf's JSON mapping do,
// and so does any code walking the tree), so a document nested 70,000
// levels deep (`[[[[...`, 140 KB) overflows the thread's stack and kills the
// process. CheckJsonDepth finds the deepest nesting with one linear scan of
// the bytes (no allocation, no recursion) so such text is refused before any
// parser sees it.
#ifndef VOCABD_LIB_CORE_JSON_LIMITS_H_
#define VOCABD_LIB_CORE_JSON_LIMITS_H_

#include <cstdint>
#include <string_view>

#include "absl/status/status.h"

namespace vocabd {

// The deepest nesting of objects and arrays in `text`: 0 for a scalar, 1
// for `[1]` or `{}`, 2 for `{"a": [1]}`. Brackets inside JSON strings
// (between unescaped double quotes) do not count. The scan does not
// validate the text; a parser still has to. O(size), no allocation.
int64_t JsonNestingDepth(std::string_view text);

// OK when JsonNestingDepth(text) <= max_depth, else INVALID_ARGUMENT:
//   "<what>: JSON nesting depth 70000 is above the limit of 100 (first
//    exceeded at byte 100)"
// `max_depth` >= 1.
absl::Status CheckJsonDepth(std::string_view text, int64_t max_depth, std::string_view what);

}  // namespace vocabd

#endif  // VOCABD_LIB_CORE_JSON_LIMITS_H_
