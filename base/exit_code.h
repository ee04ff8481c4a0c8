// base: maps a run's final absl::Status to the process exit code (the contract in
// docs/architecture.md): 0 success, 2 bad input (flags, spec, data files), 1 runtime failure.
// Thread-safety: pure functions.
#pragma once

#include "absl/status/status.h"

namespace fulcrum {

inline constexpr int kExitOk = 0;
inline constexpr int kExitRuntimeFailure = 1;
inline constexpr int kExitBadInput = 2;

// Bad input is InvalidArgument, NotFound, OutOfRange, FailedPrecondition or DataLoss (a
// truncated or corrupt input file); every other error is a runtime failure.
int ExitCodeForStatus(const absl::Status& status);

}  // namespace fulcrum
