#include "models/graph_def.h"

#include <cstdint>
#include <span>
#include <string>
#include <unordered_set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace fulcrum::models {
namespace {

using pb::tensorflow::DataType;
using pb::tensorflow::GraphDef;
using pb::tensorflow::NodeDef;
using pb::tensorflow::TensorShapeProto;
using Dims = std::vector<int64_t>;

// A batch of examples of shape `dims`: the batch size is not part of the graph.
Dims Batched(const Dims& dims) {
  Dims out = {-1};
  out.insert(out.end(), dims.begin(), dims.end());
  return out;
}

void SetShape(const Dims& dims, TensorShapeProto* shape) {
  for (int64_t d : dims) shape->add_dim()->set_size(d);
}

void SetType(NodeDef* node, const char* key, DataType type) {
  (*node->mutable_attr())[key].set_type(type);
}

// A node of `op` reading `inputs`, with one output per entry of `output_shapes`; its element
// type T is float unless the op has none (a variable or a placeholder says dtype instead).
NodeDef* AddNode(GraphDef* graph, std::string name, std::string op, const std::string& device,
                 std::vector<std::string> inputs, const std::vector<Dims>& output_shapes) {
  NodeDef* node = graph->add_node();
  node->set_name(std::move(name));
  node->set_op(std::move(op));
  node->set_device(device);
  for (std::string& input : inputs) node->add_input(std::move(input));
  auto* shapes = (*node->mutable_attr())["_output_shapes"].mutable_list();
  for (const Dims& dims : output_shapes) SetShape(dims, shapes->add_shape());
  return node;
}

NodeDef* AddPlaceholder(GraphDef* graph, std::string name, DataType type, const Dims& dims,
                        const std::string& device) {
  NodeDef* node = AddNode(graph, std::move(name), "Placeholder", device, {}, {dims});
  SetType(node, "dtype", type);
  SetShape(dims, (*node->mutable_attr())["shape"].mutable_shape());
  return node;
}

// Adds variable `v`'s nodes, one VariableV2 per part on the part's device; returns the node
// its readers take as input: the variable, or where a partitioned one is read, the
// concatenation of its parts (TensorFlow's PartitionedVariable does the same).
std::string AddVariable(const VariableSpec& v, const std::vector<VariablePart>& parts,
                        const std::string& device, GraphDef* graph) {
  std::vector<std::string> names;
  for (const VariablePart& part : parts) {
    const Dims dims = part.shape.dims_vector();
    NodeDef* node = AddNode(graph, part.name, "VariableV2", part.device, {}, {dims});
    SetType(node, "dtype", pb::tensorflow::DT_FLOAT);
    SetShape(dims, (*node->mutable_attr())["shape"].mutable_shape());
    names.push_back(part.name);
  }
  if (names.size() == 1) return names.front();
  NodeDef* concat = AddNode(graph, absl::StrCat(v.name, "/ConcatPartitions/concat"), "ConcatV2",
                            device, std::move(names), {v.shape.dims_vector()});
  SetType(concat, "T", pb::tensorflow::DT_FLOAT);
  (*concat->mutable_attr())["N"].set_i(static_cast<int64_t>(parts.size()));
  return concat->name();
}

const char* ActivationOp(Activation activation) {
  switch (activation) {
    case Activation::kNone:
      return nullptr;
    case Activation::kRelu:
      return "Relu";
    case Activation::kSigmoid:
      return "Sigmoid";
    case Activation::kTanh:
      return "Tanh";
  }
  return nullptr;
}

// One float node of `op` in the layer's scope, one output of `dims` per example.
std::string AddFloatNode(GraphDef* graph, const std::string& scope, const std::string& op,
                         const std::string& device, std::vector<std::string> inputs,
                         const Dims& dims) {
  NodeDef* node =
      AddNode(graph, absl::StrCat(scope, "/", op), op, device, std::move(inputs), {Batched(dims)});
  SetType(node, "T", pb::tensorflow::DT_FLOAT);
  return node->name();
}

// Adds `layer`'s nodes reading node `input`, whose examples have the shape *dims, and the
// variable reads `reads` (the layer's variables, in order); returns the layer's output node
// and sets *dims to its examples' shape.
std::string AddLayer(const Layer& layer, std::string input, std::span<const std::string> reads,
                     const std::string& device, Dims* dims, GraphDef* graph) {
  const LayerOp op = layer.graph_op();
  const std::string& scope = layer.name();
  // Where a dense layer follows an image, TensorFlow flattens it with a reshape.
  if (op.input_dims != *dims) {
    input = AddFloatNode(graph, scope, "Reshape", device, {input}, op.input_dims);
  }
  const bool bias = op.bias_add && !reads.empty();
  std::vector<std::string> inputs = {input};
  inputs.insert(inputs.end(), reads.begin(), reads.end() - (bias ? 1 : 0));
  std::string output = AddFloatNode(graph, scope, op.op, device, std::move(inputs), op.output_dims);
  if (bias) {
    output = AddFloatNode(graph, scope, "BiasAdd", device, {output, reads.back()}, op.output_dims);
  }
  if (const char* activation = ActivationOp(op.activation); activation != nullptr) {
    output = AddFloatNode(graph, scope, activation, device, {output}, op.output_dims);
  }
  *dims = op.output_dims;
  return output;
}

// The loss over the model's output node `output` (examples of shape `dims`): the mean
// softmax cross-entropy against the "labels" placeholder, or the mean squared difference
// against the input (an autoencoder's reconstruction).
void AddLoss(const Model& model, const std::string& output, const Dims& dims,
             const std::string& device, GraphDef* graph) {
  std::string per_example;
  if (model.loss_kind() == LossKind::kSoftmaxCrossEntropy) {
    AddPlaceholder(graph, "labels", pb::tensorflow::DT_INT32, {-1}, device);
    NodeDef* xent = AddNode(graph, "loss/SparseSoftmaxCrossEntropyWithLogits",
                            "SparseSoftmaxCrossEntropyWithLogits", device, {output, "labels"},
                            {{-1}, Batched(dims)});
    SetType(xent, "T", pb::tensorflow::DT_FLOAT);
    SetType(xent, "Tlabels", pb::tensorflow::DT_INT32);
    per_example = xent->name();
  } else {
    per_example = AddFloatNode(graph, "loss", "SquaredDifference", device, {output, "input"}, dims);
  }
  NodeDef* mean = AddNode(graph, "loss/Mean", "Mean", device, {per_example}, {Dims{}});
  SetType(mean, "T", pb::tensorflow::DT_FLOAT);
}

absl::Status CheckUniqueNames(const GraphDef& graph) {
  std::unordered_set<std::string> names;
  for (const NodeDef& node : graph.node()) {
    if (!names.insert(node.name()).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("graph: two nodes are named \"", node.name(), "\""));
    }
  }
  return absl::OkStatus();
}

// Each model variable's parts: as placed, or whole on the compute device.
absl::StatusOr<std::vector<std::vector<VariablePart>>> PartsByVariable(
    const Model& model, const GraphPlacement& placement) {
  const std::vector<VariableSpec>& variables = model.variables();
  std::vector<std::vector<VariablePart>> parts(variables.size());
  for (const VariablePart& part : placement.parts) {
    if (part.variable >= variables.size()) {
      return absl::InvalidArgumentError(absl::StrCat("graph: part ", part.name, " of variable ",
                                                     part.variable, "; ", model.name(), " has ",
                                                     variables.size()));
    }
    parts[part.variable].push_back(part);
  }
  for (size_t i = 0; i < variables.size(); ++i) {
    if (placement.parts.empty()) {
      parts[i].push_back({i, variables[i].name, variables[i].shape, placement.compute_device});
    } else if (parts[i].empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("graph: variable ", variables[i].name, " has no part"));
    }
  }
  return parts;
}

}  // namespace

absl::StatusOr<GraphDef> BuildGraphDef(const Model& model, const GraphPlacement& placement) {
  if (model.layers().empty()) {
    return absl::InvalidArgumentError(absl::StrCat("graph: ", model.name(), " has no layers"));
  }
  FULCRUM_ASSIGN_OR_RETURN(const std::vector<std::vector<VariablePart>> parts,
                           PartsByVariable(model, placement));
  const std::string& device = placement.compute_device;
  GraphDef graph;
  Dims dims = model.layers().front()->graph_op().input_dims;
  AddPlaceholder(&graph, "input", pb::tensorflow::DT_FLOAT, Batched(dims), device);
  std::vector<std::string> reads;
  for (size_t i = 0; i < parts.size(); ++i) {
    reads.push_back(AddVariable(model.variables()[i], parts[i], device, &graph));
  }
  std::string output = "input";
  size_t first = 0;
  for (const auto& layer : model.layers()) {
    const size_t count = layer->variables().size();
    output = AddLayer(*layer, output, std::span<const std::string>(reads).subspan(first, count),
                      device, &dims, &graph);
    first += count;
  }
  AddLoss(model, output, dims, device, &graph);
  FULCRUM_RETURN_IF_ERROR(CheckUniqueNames(graph));
  return graph;
}

}  // namespace fulcrum::models
