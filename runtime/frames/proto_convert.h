// runtime: conversions between ops' value types and their proto/ps.proto forms.
// Thread-safety: pure functions.
#pragma once

#include "absl/status/statusor.h"
#include "ops/initializer.h"
#include "ops/optimizer.h"
#include "proto/ps.pb.h"

namespace fulcrum::runtime {

pb::InitializerDef InitializerToProto(const ops::Initializer& init);
// InvalidArgument for an unknown kind.
absl::StatusOr<ops::Initializer> InitializerFromProto(const pb::InitializerDef& def);

pb::OptimizerDef OptimizerToProto(const ops::OptimizerConfig& config);
absl::StatusOr<ops::OptimizerConfig> OptimizerFromProto(const pb::OptimizerDef& def);

}  // namespace fulcrum::runtime
