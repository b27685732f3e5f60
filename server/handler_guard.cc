#include "server/handler_guard.h"

#include <exception>
#include <new>
#include <string>

#include "absl/strings/str_cat.h"

namespace vocabd {

absl::Status CatchAll(std::string_view rpc, const RequestMemory* need,
                      absl::FunctionRef<absl::Status()> body) noexcept {
  try {
    try {
      return body();
    } catch (const std::bad_alloc&) {
      return need != nullptr ? OutOfMemoryStatus(rpc, need->bytes(), need->formula())
                             : OutOfMemoryStatus(rpc, -1, "");
    } catch (const std::exception& e) {
      return absl::InternalError(
          absl::StrCat(std::string(rpc), ": unexpected exception: ", e.what()));
    } catch (...) {
      return absl::InternalError(absl::StrCat(std::string(rpc), ": unexpected exception"));
    }
  } catch (...) {
    // Building the status itself failed (no memory for the message).
    return absl::Status(absl::StatusCode::kResourceExhausted, "out of memory");
  }
}

}  // namespace vocabd
