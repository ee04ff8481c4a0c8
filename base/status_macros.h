// base: the few helpers every Fulcrum module shares (Status macros, exit codes, logging set-up).
// Thread-safety: the macros have no state; see each header for the rest.
#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"

// Debian's Abseil (20220623) has no RETURN_IF_ERROR / ASSIGN_OR_RETURN; these are ours.

#define FULCRUM_CONCAT_INNER_(a, b) a##b
#define FULCRUM_CONCAT_(a, b) FULCRUM_CONCAT_INNER_(a, b)

// Evaluates `expr` (an absl::Status) and returns it from the enclosing function if not OK.
#define FULCRUM_RETURN_IF_ERROR(expr)              \
  do {                                             \
    ::absl::Status fulcrum_status_ = (expr);       \
    if (!fulcrum_status_.ok()) return fulcrum_status_; \
  } while (false)

// `lhs` = value of `rexpr` (an absl::StatusOr<T>), or returns its error status.
#define FULCRUM_ASSIGN_OR_RETURN(lhs, rexpr) \
  FULCRUM_ASSIGN_OR_RETURN_IMPL_(FULCRUM_CONCAT_(fulcrum_statusor_, __LINE__), lhs, rexpr)

#define FULCRUM_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, rexpr) \
  auto statusor = (rexpr);                                   \
  if (!statusor.ok()) return statusor.status();              \
  lhs = std::move(statusor).value()
