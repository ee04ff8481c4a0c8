// runtime: the definition each PS task is created with (pb::CreateVariablesRequest): what
// the chief sends, what benches and tests build. One builder, from a Placement, so that every
// PS shard holds exactly the rows, initial bits and chunking the workers expect. Also the
// one conversion between the flag's SyncMode and the wire's pb::Mode.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "ops/optimizer.h"
#include "proto/ps.pb.h"
#include "runtime/cluster/chunk_plan.h"
#include "runtime/cluster/placement.h"

namespace fulcrum::runtime {

enum class SyncMode;  // runtime/config/flags.h

// The run-wide part of every shard's definition.
struct ShardDefOptions {
  std::string run_id;
  std::string run_dir;  // where the PS writes its own files ("" for none)
  ops::OptimizerConfig optimizer;
  pb::Mode mode = pb::MODE_ASYNC;
  int replicas_to_aggregate = 0;  // sync mode: gradients per step (>= 1)
  int num_workers = 0;            // ssp mode: the cluster's workers (>= 1)
  int64_t staleness = 0;          // ssp mode: steps a worker may run ahead of the slowest
  bool staleness_aware_lr = false;  // async and ssp: lr / (1 + staleness) per push
  int64_t chunk_bytes = kDefaultChunkBytes;
  uint64_t seed = 0;  // the run's seed; each variable's is VariableSeed(seed, name)
};

// The CreateVariablesRequest for ps `ps` of `placement`: its variables (whole or row
// slices) with the full shape, initializer and seed of their source in `variables` (the
// list the placement was computed from, model order), then `options`.
// Precondition: 0 <= ps < placement.num_ps() and the placement is of `variables`.
pb::CreateVariablesRequest ShardDefinition(const Placement& placement,
                                           std::span<const VariableInfo> variables, int ps,
                                           const ShardDefOptions& options);

// The wire's mode of a --mode flag value, and back.
pb::Mode ModeToProto(SyncMode mode);
SyncMode ModeFromProto(pb::Mode mode);
// "sync", "async" or "ssp" (runtime::ModeName of the SyncMode): for logs and summaries.
const char* ModeName(pb::Mode mode);

}  // namespace fulcrum::runtime
