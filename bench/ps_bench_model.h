// bench/ps_throughput: the models it moves (the zoo's, synthetic ones) and their placement
// and PS definitions, built with the library's placement and shard-definition builder.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ops/optimizer.h"
#include "proto/ps.pb.h"
#include "runtime/cluster/placement.h"

namespace fulcrum::bench {

struct BenchModel {
  std::string name;
  std::vector<runtime::VariableInfo> variables;  // model order
  int64_t bytes() const;
};

// "logreg", "mlp", "autoencoder" (ModelConfig defaults), "syn<N>mb" (8 equal float variables
// [N*32, 1024], N MiB in all) or "skew16" (one [3072, 1024] variable + 8 of [128, 1024]).
absl::StatusOr<BenchModel> MakeModel(const std::string& name);

// The model over `num_ps` PS tasks, partitioning at runtime/config/flags.h's default threshold.
absl::StatusOr<runtime::Placement> Place(const BenchModel& model, int num_ps,
                                         runtime::PlacementStrategy strategy);

// What the chief would send ps `ps`: async mode, `optimizer` with a tiny learning rate.
pb::CreateVariablesRequest Definition(const BenchModel& model, const runtime::Placement& placement,
                                      int ps, ops::OptimizerKind optimizer, int64_t chunk_bytes);

}  // namespace fulcrum::bench
