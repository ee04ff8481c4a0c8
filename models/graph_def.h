// models: a model as a TensorFlow GraphDef (proto/tf_graph.proto), the graph a TF1 job writes
// into its event file and TensorBoard's graph tab draws. Each layer is a name scope of nodes:
// its op (Conv2D, MatMul, MaxPool, ...; Layer::graph_op), then BiasAdd and the activation where
// it has them, a Reshape where the previous layer's output is seen in another shape; the
// variables are VariableV2 nodes on the device that holds them (a partitioned variable is one
// node per part, concatenated where it is read); the batch comes in as Placeholder "input"
// (and "labels") and the loss closes the graph. Edges carry the per-example shapes, the batch
// dimension unknown (-1), as "_output_shapes".
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "models/model.h"
#include "ops/tensor.h"
#include "proto/tf_graph.pb.h"

namespace fulcrum::models {

// One piece of a model variable as a device holds it (runtime's PlacedVariable, seen from here).
struct VariablePart {
  size_t variable = 0;  // index into Model::variables()
  std::string name;     // the node's name: the variable's, or "<variable>/part_<i>" for a slice
  ops::Shape shape;     // the piece's shape
  std::string device;   // TensorFlow's device string, e.g. "/job:ps/task:1"
};

// Where the graph's nodes run.
struct GraphPlacement {
  // The task's own nodes (the layers, the loss, the reads of partitioned variables), e.g.
  // "/job:worker/task:0".
  std::string compute_device;
  // Every piece of every variable; the pieces of one variable in the order of their rows.
  // Empty: every variable is whole on compute_device (a single-process run).
  std::vector<VariablePart> parts = {};
};

// The graph placement of a runtime placement: every piece on "/job:ps/task:<ps>", the task's
// own nodes on `compute_device`; none (a single-process run) when `placement` is null. A
// template over runtime::Placement (its `shards`, lists of pieces with `source`, `name`,
// `shape` and `ps`), so that models/ does not depend on runtime/.
template <typename Placement>
GraphPlacement OnPsTasks(const Placement* placement, std::string compute_device) {
  GraphPlacement where{.compute_device = std::move(compute_device)};
  if (placement == nullptr) return where;
  for (const auto& shard : placement->shards) {
    for (const auto& v : shard) {
      where.parts.push_back(
          {static_cast<size_t>(v.source), v.name, v.shape, absl::StrCat("/job:ps/task:", v.ps)});
    }
  }
  return where;
}

// The graph of `model` placed as `placement` says. InvalidArgument when a part names no
// variable of the model, a variable has no part, or two nodes would have one name.
absl::StatusOr<pb::tensorflow::GraphDef> BuildGraphDef(const Model& model,
                                                       const GraphPlacement& placement);

}  // namespace fulcrum::models
