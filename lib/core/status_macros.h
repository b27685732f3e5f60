// The one place vocabd defines its Status propagation macros.
#ifndef VOCABD_LIB_CORE_STATUS_MACROS_H_
#define VOCABD_LIB_CORE_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define VOCABD_CONCAT_INNER_(a, b) a##b
#define VOCABD_CONCAT_(a, b) VOCABD_CONCAT_INNER_(a, b)

// Returns from the enclosing function when `expr` (an absl::Status) is not OK.
#define RETURN_IF_ERROR(expr)                      \
  do {                                             \
    ::absl::Status vocabd_status_ = (expr);        \
    if (!vocabd_status_.ok()) return vocabd_status_; \
  } while (0)

// `ASSIGN_OR_RETURN(auto x, StatusOrExpr());` declares/assigns `x` from the
// value or returns the error.
#define ASSIGN_OR_RETURN(lhs, expr) \
  ASSIGN_OR_RETURN_IMPL_(VOCABD_CONCAT_(vocabd_statusor_, __LINE__), lhs, expr)

#define ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                           \
  if (!tmp.ok()) return tmp.status();          \
  lhs = std::move(tmp).value()

#endif  // VOCABD_LIB_CORE_STATUS_MACROS_H_
