#include "runtime/cluster/placement.h"

#include <algorithm>
#include <cstdio>
#include <numeric>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/enum_flag.h"

namespace fulcrum::runtime {
namespace {

constexpr int64_t kFloatBytes = static_cast<int64_t>(sizeof(float));

PlacedVariable Whole(const VariableInfo& variable, int source, int ps) {
  PlacedVariable placed;
  placed.name = variable.name;
  placed.source = source;
  placed.ps = ps;
  placed.row_begin = 0;
  placed.row_end = variable.shape.rank() > 0 ? variable.shape.dim(0) : 1;
  placed.element_offset = 0;
  placed.num_elements = variable.shape.num_elements();
  placed.shape = variable.shape;
  return placed;
}

// The least-loaded PS, lowest index on ties.
int LeastLoaded(const std::vector<int64_t>& loads) {
  return static_cast<int>(std::min_element(loads.begin(), loads.end()) - loads.begin());
}

// Places `candidates` (indices into variables) greedily: next-largest first (model order on
// ties) onto the least-loaded PS.
void PlaceGreedy(std::span<const VariableInfo> variables, std::vector<int> candidates,
                 std::vector<int64_t>* loads, Placement* placement) {
  std::stable_sort(candidates.begin(), candidates.end(), [&](int a, int b) {
    return variables[static_cast<size_t>(a)].shape.num_elements() >
           variables[static_cast<size_t>(b)].shape.num_elements();
  });
  for (int v : candidates) {
    const int ps = LeastLoaded(*loads);
    PlacedVariable placed = Whole(variables[static_cast<size_t>(v)], v, ps);
    (*loads)[static_cast<size_t>(ps)] += placed.bytes();
    placement->shards[static_cast<size_t>(ps)].push_back(std::move(placed));
  }
}

constexpr EnumName<PlacementStrategy> kPlacementNames[] = {
    {PlacementStrategy::kRoundRobin, "round_robin"},
    {PlacementStrategy::kGreedy, "greedy"},
    {PlacementStrategy::kPartition, "partition"}};

}  // namespace

const char* PlacementName(PlacementStrategy strategy) {
  return EnumNameOf(strategy, kPlacementNames);
}

bool AbslParseFlag(absl::string_view text, PlacementStrategy* strategy, std::string* error) {
  return ParseEnum(text, kPlacementNames, strategy, error);
}

std::string AbslUnparseFlag(PlacementStrategy strategy) {
  return UnparseEnum(strategy, kPlacementNames);
}

int64_t Placement::shard_bytes(int ps) const {
  if (ps < 0 || ps >= num_ps()) return 0;
  int64_t total = 0;
  for (const PlacedVariable& v : shards[static_cast<size_t>(ps)]) total += v.bytes();
  return total;
}

double Placement::imbalance() const {
  if (shards.empty()) return 1.0;
  int64_t total = 0;
  int64_t largest = 0;
  for (int p = 0; p < num_ps(); ++p) {
    const int64_t bytes = shard_bytes(p);
    total += bytes;
    largest = std::max(largest, bytes);
  }
  if (total == 0) return 1.0;
  const double mean = static_cast<double>(total) / static_cast<double>(num_ps());
  return static_cast<double>(largest) / mean;
}

std::string Placement::Table() const {
  std::vector<const PlacedVariable*> rows;
  for (const auto& shard : shards) {
    for (const PlacedVariable& v : shard) rows.push_back(&v);
  }
  std::stable_sort(rows.begin(), rows.end(), [](const PlacedVariable* a, const PlacedVariable* b) {
    return std::make_pair(a->source, a->row_begin) < std::make_pair(b->source, b->row_begin);
  });

  size_t name_width = std::string("variable").size();
  size_t shape_width = std::string("shape").size();
  size_t bytes_width = std::string("bytes").size();
  int64_t total = 0;
  for (const PlacedVariable* v : rows) {
    name_width = std::max(name_width, v->name.size());
    shape_width = std::max(shape_width, v->shape.ToString().size());
    bytes_width = std::max(bytes_width, absl::StrCat(v->bytes()).size());
    total += v->bytes();
  }
  for (int p = 0; p < num_ps(); ++p) {
    bytes_width = std::max(bytes_width, absl::StrCat(shard_bytes(p)).size());
  }
  const int nw = static_cast<int>(name_width);
  const int sw = static_cast<int>(shape_width);
  const int bw = static_cast<int>(bytes_width);

  std::string out = absl::StrFormat("placement: %s over %d ps, %d variable(s) / slice(s)\n",
                                    PlacementName(strategy), num_ps(), rows.size());
  absl::StrAppendFormat(&out, "%-*s  %4s  %-*s  %*s\n", nw, "variable", "ps", sw, "shape", bw,
                        "bytes");
  for (const PlacedVariable* v : rows) {
    absl::StrAppendFormat(&out, "%-*s  %4d  %-*s  %*d\n", nw, v->name, v->ps, sw,
                          v->shape.ToString(), bw, v->bytes());
  }
  for (int p = 0; p < num_ps(); ++p) {
    const int64_t bytes = shard_bytes(p);
    const double share =
        total > 0 ? 100.0 * static_cast<double>(bytes) / static_cast<double>(total) : 0.0;
    absl::StrAppendFormat(&out, "ps %-*d  %*d bytes  %5.1f%%  (%d variable(s))\n", 4, p, bw, bytes,
                          share, shards[static_cast<size_t>(p)].size());
  }
  absl::StrAppendFormat(&out, "total %*d bytes; imbalance (max/mean shard bytes) %.3f\n", bw, total,
                        imbalance());
  return out;
}

namespace {

// Cuts variable `v` along its first axis into `slices` near-equal row ranges, slice i on ps i.
void PlaceSlices(const VariableInfo& var, int v, int64_t slices, std::vector<int64_t>* loads,
                 Placement* placement) {
  const int64_t rows = var.shape.dim(0);
  const int64_t row_elements = var.shape.num_elements() / rows;
  const int64_t base = rows / slices;
  const int64_t extra = rows % slices;
  int64_t row = 0;
  for (int64_t i = 0; i < slices; ++i) {
    const int64_t n = base + (i < extra ? 1 : 0);
    PlacedVariable slice;
    slice.name = absl::StrCat(var.name, "/part_", i);
    slice.source = v;
    slice.ps = static_cast<int>(i);
    slice.row_begin = row;
    slice.row_end = row + n;
    slice.element_offset = row * row_elements;
    slice.num_elements = n * row_elements;
    std::vector<int64_t> dims = var.shape.dims_vector();
    dims[0] = n;
    slice.shape = ops::Shape(std::move(dims));
    (*loads)[static_cast<size_t>(i)] += slice.bytes();
    placement->shards[static_cast<size_t>(i)].push_back(std::move(slice));
    row += n;
  }
}

}  // namespace

absl::StatusOr<Placement> PlaceVariables(std::span<const VariableInfo> variables, int num_ps,
                                         PlacementStrategy strategy, int64_t partition_min_bytes) {
  if (num_ps < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("placement over ", num_ps, " ps task(s): need at least one ps task"));
  }
  for (const VariableInfo& v : variables) {
    bool empty = false;
    for (int64_t d : v.shape.dims()) empty = empty || d <= 0;
    if (empty || v.shape.num_elements() <= 0) {
      return absl::InvalidArgumentError(absl::StrCat("variable \"", v.name, "\" has shape ",
                                                     v.shape.ToString(), ": no elements to place"));
    }
  }

  Placement placement;
  placement.strategy = strategy;
  placement.shards.resize(static_cast<size_t>(num_ps));
  std::vector<int64_t> loads(static_cast<size_t>(num_ps), 0);
  const int count = static_cast<int>(variables.size());

  switch (strategy) {
    case PlacementStrategy::kRoundRobin:
      for (int v = 0; v < count; ++v) {
        placement.shards[static_cast<size_t>(v % num_ps)].push_back(
            Whole(variables[static_cast<size_t>(v)], v, v % num_ps));
      }
      break;
    case PlacementStrategy::kGreedy: {
      std::vector<int> all(static_cast<size_t>(count));
      std::iota(all.begin(), all.end(), 0);
      PlaceGreedy(variables, std::move(all), &loads, &placement);
      break;
    }
    case PlacementStrategy::kPartition: {
      std::vector<int> rest;
      for (int v = 0; v < count; ++v) {
        const VariableInfo& var = variables[static_cast<size_t>(v)];
        const int64_t bytes = var.shape.num_elements() * kFloatBytes;
        const int64_t rows = var.shape.rank() > 0 ? var.shape.dim(0) : 1;
        const int64_t slices = std::min<int64_t>(num_ps, rows);
        // A variable that cannot be cut in two along its first axis stays whole.
        if (bytes <= partition_min_bytes || slices < 2) {
          rest.push_back(v);
          continue;
        }
        PlaceSlices(var, v, slices, &loads, &placement);
      }
      PlaceGreedy(variables, std::move(rest), &loads, &placement);
      break;
    }
  }

  for (auto& shard : placement.shards) {
    std::stable_sort(
        shard.begin(), shard.end(), [](const PlacedVariable& a, const PlacedVariable& b) {
          return std::make_pair(a.source, a.row_begin) < std::make_pair(b.source, b.row_begin);
        });
  }
  return placement;
}

absl::Status CheckEveryPsHoldsSomething(const Placement& placement, int64_t partition_min_bytes) {
  for (int p = 0; p < placement.num_ps(); ++p) {
    if (!placement.shards[static_cast<size_t>(p)].empty()) continue;
    return absl::InvalidArgumentError(
        absl::StrCat("--placement=", PlacementName(placement.strategy), " leaves ps:", p,
                     " without a variable: the model's variables do not fill ", placement.num_ps(),
                     " ps tasks; run fewer ps tasks",
                     placement.strategy == PlacementStrategy::kPartition
                         ? absl::StrCat(" or a --partition_min_bytes below ", partition_min_bytes,
                                        " to cut the large variables into more slices")
                         : ", or --placement=partition to cut the large variables into slices"));
  }
  return absl::OkStatus();
}

}  // namespace fulcrum::runtime
