// No exception leaves a handler. gRPC's callback API turns an exception
// thrown by a handler method into UNIMPLEMENTED with an empty message (and
// one thrown on a compute thread ends the process), so every handler runs
// its work through CatchAll, which maps:
//   std::bad_alloc        -> RESOURCE_EXHAUSTED "<rpc>: out of memory (the
//                            request needs about N bytes: <formula>)"
//                            (lib/serving/request_memory.h; without the
//                            estimate when none was made yet)
//   other std::exception  -> INTERNAL "<rpc>: unexpected exception: <what>"
//   anything else         -> INTERNAL "<rpc>: unexpected exception"
#ifndef VOCABD_SERVER_HANDLER_GUARD_H_
#define VOCABD_SERVER_HANDLER_GUARD_H_

#include <string_view>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "lib/serving/request_memory.h"

namespace vocabd {

// Runs body() and returns its status, or the status of the exception it
// threw (above). `need` (may be null) names the request's size.
absl::Status CatchAll(std::string_view rpc, const RequestMemory* need,
                      absl::FunctionRef<absl::Status()> body) noexcept;

}  // namespace vocabd

#endif  // VOCABD_SERVER_HANDLER_GUARD_H_
