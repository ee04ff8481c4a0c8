// models: the spatial transformer network (placeholder until the sampler lands in this change).
#include "absl/status/status.h"
#include "models/registry.h"

namespace fulcrum::models {

absl::Status RegisterStn(ModelRegistry*) { return absl::OkStatus(); }

}  // namespace fulcrum::models
