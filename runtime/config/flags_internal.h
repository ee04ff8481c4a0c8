// runtime (private): what runtime's flag files share (runtime/config/flags.cc,
// runtime/config/cluster_flags.cc). Not for other modules.
#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "runtime/config/flags.h"
#include "runtime/grpc/security.h"

namespace fulcrum::runtime::flags_internal {

// OK iff `value` is finite and positive; InvalidArgument naming --`flag` otherwise.
absl::Status Positive(absl::string_view flag, double value);
// A positive number of seconds as a Duration; InvalidArgument naming --`flag` otherwise.
absl::StatusOr<absl::Duration> Seconds(absl::string_view flag, double value);
// --tls_cert, --tls_key, --tls_ca, --auth_token_file and --insecure as given.
SecurityFlags SecurityFlagsFromFlags();
// The training flags read and checked (`trains`: this task trains, so the length of training
// is needed).
absl::StatusOr<TrainingOptions> ReadTrainingOptions(bool trains);

}  // namespace fulcrum::runtime::flags_internal
