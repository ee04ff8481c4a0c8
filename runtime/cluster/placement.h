// runtime: which PS task holds which variable (TensorFlow's replica_device_setter and
// partitioners). Three strategies:
//   round_robin  variable i (model order) -> ps i mod num_ps (TensorFlow's default);
//   greedy       byte-balanced: the least-loaded PS (by bytes, lowest index on ties) takes the
//                next-largest variable (model order on ties);
//   partition    variables larger than partition_min_bytes are split along their first axis
//                into num_ps slices (rows as even as possible, slice i on ps i, like
//                TensorFlow's min-max partitioner); the rest are placed greedily.
// A slice is a contiguous element range of its variable, so the worker reads and writes
// slices in place: reassembly is free. Deterministic: the chief, every worker and every PS
// compute the same placement from the same variables and flags.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "ops/initializer.h"
#include "ops/tensor.h"

namespace fulcrum::runtime {

enum class PlacementStrategy { kRoundRobin, kGreedy, kPartition };

// "round_robin", "greedy" or "partition": --placement, parsed by Abseil (base/enum_flag.h).
const char* PlacementName(PlacementStrategy strategy);
bool AbslParseFlag(absl::string_view text, PlacementStrategy* strategy, std::string* error);
std::string AbslUnparseFlag(PlacementStrategy strategy);

// A model variable as placement and the PS definitions see it.
struct VariableInfo {
  std::string name;
  ops::Shape shape;
  // How the PS initialises it (runtime/cluster/shard_defs.h); placement ignores it.
  ops::Initializer initializer = {};
};

// One variable (or slice) as a PS holds it.
struct PlacedVariable {
  std::string name;  // the model variable's name, or "<name>/part_<i>" for a slice
  int source = 0;    // index of the model variable
  int ps = 0;
  int64_t row_begin = 0;  // rows [row_begin, row_end) of the first axis
  int64_t row_end = 0;
  int64_t element_offset = 0;  // first element within the model variable
  int64_t num_elements = 0;
  ops::Shape shape;  // the slice's shape (the variable's when whole)
  int64_t bytes() const { return num_elements * static_cast<int64_t>(sizeof(float)); }
};

struct Placement {
  PlacementStrategy strategy = PlacementStrategy::kRoundRobin;
  // shards[p]: what ps p holds, ordered by (source, row_begin). The chunk plan of ps p is
  // PlanChunks over these in this order.
  std::vector<std::vector<PlacedVariable>> shards;

  int num_ps() const { return static_cast<int>(shards.size()); }
  int64_t shard_bytes(int ps) const;
  // Largest shard's bytes over the mean shard's bytes (1.0 = perfectly even).
  double imbalance() const;
  // A table, one line per placed variable: name, ps, shape, bytes; then bytes per PS.
  std::string Table() const;
};

// InvalidArgument when num_ps < 1 or a variable has no elements.
absl::StatusOr<Placement> PlaceVariables(std::span<const VariableInfo> variables, int num_ps,
                                         PlacementStrategy strategy, int64_t partition_min_bytes);

// InvalidArgument naming the first ps task `placement` leaves without a variable (more ps
// tasks than the strategy can fill: a ps cannot serve an empty shard), with what would help.
absl::Status CheckEveryPsHoldsSomething(const Placement& placement, int64_t partition_min_bytes);

}  // namespace fulcrum::runtime
