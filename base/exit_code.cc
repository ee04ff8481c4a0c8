#include "base/exit_code.h"

namespace fulcrum {

int ExitCodeForStatus(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kOk:
      return kExitOk;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kDataLoss:
      return kExitBadInput;
    default:
      return kExitRuntimeFailure;
  }
}

}  // namespace fulcrum
