// The model's graph for TensorBoard: a small CNN whose every layer, shape and variable
// placement is read back from the GraphDef, a partitioned variable read through its
// concatenation, the autoencoder's loss against the input, and the bad placements refused.
#include "models/graph_def.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "models/builder.h"
#include "models/registry.h"

namespace fulcrum::models {
namespace {

using pb::tensorflow::GraphDef;
using pb::tensorflow::NodeDef;

std::map<std::string, NodeDef> ByName(const GraphDef& graph) {
  std::map<std::string, NodeDef> nodes;
  for (const NodeDef& node : graph.node()) nodes[node.name()] = node;
  return nodes;
}

std::vector<int64_t> Dims(const pb::tensorflow::TensorShapeProto& shape) {
  std::vector<int64_t> dims;
  for (const auto& d : shape.dim()) dims.push_back(d.size());
  return dims;
}

// The first output shape the node declares ("_output_shapes").
std::vector<int64_t> OutputDims(const NodeDef& node) {
  const auto it = node.attr().find("_output_shapes");
  if (it == node.attr().end() || it->second.list().shape_size() == 0) return {-999};
  return Dims(it->second.list().shape(0));
}

std::vector<std::string> Inputs(const NodeDef& node) {
  return {node.input().begin(), node.input().end()};
}

// 8x8x1 images: conv 3x3x4 SAME + ReLU, max-pool 2 (4x4x4), dense 16 + ReLU, dropout, logits.
std::unique_ptr<Model> SmallCnn() {
  ConvOptions conv;
  conv.kernel_h = conv.kernel_w = 3;
  conv.filters = 4;
  ops::Pool2DParams pool;
  pool.window_h = pool.window_w = pool.stride_h = pool.stride_w = 2;
  pool.padding = ops::Padding::kValid;
  DenseOptions relu;
  relu.activation = Activation::kRelu;
  auto model = NetBuilder("small_cnn", {8, 8, 1})
                   .Conv("conv1", conv)
                   .MaxPool("pool1", pool)
                   .Dense("dense1", 16, relu)
                   .Dropout("dropout1", 0.5)
                   .Dense("logits", 10, DenseOptions{})
                   .Build(LossKind::kSoftmaxCrossEntropy);
  EXPECT_TRUE(model.ok()) << model.status();
  return std::move(model).value();
}

// Variable i on ps i % 2, whole.
GraphPlacement TwoPs(const Model& model) {
  GraphPlacement placement{.compute_device = "/job:worker/task:3"};
  for (size_t i = 0; i < model.variables().size(); ++i) {
    const VariableSpec& v = model.variables()[i];
    placement.parts.push_back({i, v.name, v.shape, absl::StrCat("/job:ps/task:", i % 2)});
  }
  return placement;
}

TEST(GraphDefTest, EveryLayerWithItsShapesOnTheWorkerAndVariablesOnThePs) {
  const std::unique_ptr<Model> model = SmallCnn();
  absl::StatusOr<GraphDef> graph = BuildGraphDef(*model, TwoPs(*model));
  ASSERT_TRUE(graph.ok()) << graph.status();
  const std::map<std::string, NodeDef> nodes = ByName(*graph);
  ASSERT_EQ(nodes.size(), static_cast<size_t>(graph->node_size())) << "unique names";
  // Each layer's own op, in its name scope, with its output per example (batch unknown).
  const std::map<std::string, std::vector<int64_t>> layers = {
      {"conv1/Conv2D", {-1, 8, 8, 4}}, {"conv1/BiasAdd", {-1, 8, 8, 4}},
      {"conv1/Relu", {-1, 8, 8, 4}},   {"pool1/MaxPool", {-1, 4, 4, 4}},
      {"dense1/Reshape", {-1, 64}},    {"dense1/MatMul", {-1, 16}},
      {"dense1/BiasAdd", {-1, 16}},    {"dense1/Relu", {-1, 16}},
      {"dropout1/Dropout", {-1, 16}},  {"logits/MatMul", {-1, 10}},
      {"logits/BiasAdd", {-1, 10}}};
  for (const auto& [name, dims] : layers) {
    ASSERT_EQ(nodes.count(name), 1u) << name;
    const NodeDef& node = nodes.at(name);
    EXPECT_EQ(node.op(), name.substr(name.find('/') + 1)) << name;
    EXPECT_EQ(node.device(), "/job:worker/task:3") << name;
    EXPECT_EQ(OutputDims(node), dims) << name;
  }
  EXPECT_EQ(nodes.count("logits/Relu"), 0u) << "logits are linear";
  // The edges: the batch flows layer to layer; each op reads its kernel, BiasAdd its bias.
  EXPECT_EQ(Inputs(nodes.at("conv1/Conv2D")), (std::vector<std::string>{"input", "conv1/kernel"}));
  EXPECT_EQ(Inputs(nodes.at("conv1/BiasAdd")),
            (std::vector<std::string>{"conv1/Conv2D", "conv1/bias"}));
  EXPECT_EQ(Inputs(nodes.at("pool1/MaxPool")), (std::vector<std::string>{"conv1/Relu"}));
  EXPECT_EQ(Inputs(nodes.at("dense1/Reshape")), (std::vector<std::string>{"pool1/MaxPool"}));
  EXPECT_EQ(Inputs(nodes.at("dense1/MatMul")),
            (std::vector<std::string>{"dense1/Reshape", "dense1/kernel"}));
  EXPECT_EQ(Inputs(nodes.at("logits/MatMul")),
            (std::vector<std::string>{"dropout1/Dropout", "logits/kernel"}));
  // The batch and the loss.
  EXPECT_EQ(nodes.at("input").op(), "Placeholder");
  EXPECT_EQ(Dims(nodes.at("input").attr().at("shape").shape()),
            (std::vector<int64_t>{-1, 8, 8, 1}));
  EXPECT_EQ(nodes.at("labels").attr().at("dtype").type(), pb::tensorflow::DT_INT32);
  EXPECT_EQ(Inputs(nodes.at("loss/SparseSoftmaxCrossEntropyWithLogits")),
            (std::vector<std::string>{"logits/BiasAdd", "labels"}));
  EXPECT_EQ(Inputs(nodes.at("loss/Mean")),
            (std::vector<std::string>{"loss/SparseSoftmaxCrossEntropyWithLogits"}));
  // Every variable once, a VariableV2 of its shape on the ps the placement names.
  for (size_t i = 0; i < model->variables().size(); ++i) {
    const VariableSpec& v = model->variables()[i];
    ASSERT_EQ(nodes.count(v.name), 1u) << v.name;
    const NodeDef& node = nodes.at(v.name);
    EXPECT_EQ(node.op(), "VariableV2");
    EXPECT_EQ(node.device(), absl::StrCat("/job:ps/task:", i % 2)) << v.name;
    EXPECT_EQ(Dims(node.attr().at("shape").shape()), v.shape.dims_vector()) << v.name;
    EXPECT_EQ(node.attr().at("dtype").type(), pb::tensorflow::DT_FLOAT);
  }
  EXPECT_EQ(Dims(nodes.at("dense1/kernel").attr().at("shape").shape()),
            (std::vector<int64_t>{64, 16}));
}

TEST(GraphDefTest, PartitionedVariableIsReadThroughTheConcatenationOfItsParts) {
  const std::unique_ptr<Model> model = SmallCnn();
  GraphPlacement placement = TwoPs(*model);
  // dense1/kernel [64, 16] in two slices of 32 rows, one per ps.
  for (auto it = placement.parts.begin(); it != placement.parts.end(); ++it) {
    if (it->name != "dense1/kernel") continue;
    const size_t variable = it->variable;
    it = placement.parts.erase(it);
    placement.parts.insert(
        it, {{variable, "dense1/kernel/part_0", ops::Shape{32, 16}, "/job:ps/task:0"},
             {variable, "dense1/kernel/part_1", ops::Shape{32, 16}, "/job:ps/task:1"}});
    break;
  }
  absl::StatusOr<GraphDef> graph = BuildGraphDef(*model, placement);
  ASSERT_TRUE(graph.ok()) << graph.status();
  const std::map<std::string, NodeDef> nodes = ByName(*graph);
  EXPECT_EQ(nodes.count("dense1/kernel"), 0u);
  EXPECT_EQ(nodes.at("dense1/kernel/part_1").device(), "/job:ps/task:1");
  EXPECT_EQ(OutputDims(nodes.at("dense1/kernel/part_1")), (std::vector<int64_t>{32, 16}));
  const NodeDef& concat = nodes.at("dense1/kernel/ConcatPartitions/concat");
  EXPECT_EQ(concat.op(), "ConcatV2");
  EXPECT_EQ(concat.device(), "/job:worker/task:3");
  EXPECT_EQ(Inputs(concat),
            (std::vector<std::string>{"dense1/kernel/part_0", "dense1/kernel/part_1"}));
  EXPECT_EQ(OutputDims(concat), (std::vector<int64_t>{64, 16}));
  EXPECT_EQ(Inputs(nodes.at("dense1/MatMul")),
            (std::vector<std::string>{"dense1/Reshape", "dense1/kernel/ConcatPartitions/concat"}));
}

TEST(GraphDefTest, WithoutAPlacementTheVariablesAreLocal) {
  ModelRegistry registry;
  ASSERT_TRUE(RegisterBuiltinModels(&registry).ok());
  absl::StatusOr<std::unique_ptr<Model>> model = registry.Create("autoencoder", {});
  ASSERT_TRUE(model.ok()) << model.status();
  absl::StatusOr<GraphDef> graph = BuildGraphDef(**model, {.compute_device = "/job:worker/task:0"});
  ASSERT_TRUE(graph.ok()) << graph.status();
  const std::map<std::string, NodeDef> nodes = ByName(*graph);
  size_t variables = 0;
  for (const auto& [name, node] : nodes) {
    EXPECT_EQ(node.device(), "/job:worker/task:0") << name;
    variables += node.op() == "VariableV2";
  }
  EXPECT_EQ(variables, (*model)->variables().size());
  // A reconstruction: no labels; the loss compares the last layer's output with the input.
  EXPECT_EQ(nodes.count("labels"), 0u);
  const NodeDef& diff = nodes.at("loss/SquaredDifference");
  ASSERT_EQ(diff.input_size(), 2);
  EXPECT_EQ(diff.input(1), "input");
  EXPECT_EQ(nodes.at(diff.input(0)).op(), "Sigmoid");
  EXPECT_EQ(OutputDims(diff), (std::vector<int64_t>{-1, 784}));
}

// The spatial transformer is one node named for what it is, reading the localisation
// network's variables, its output the resampled image the classifier's first conv reads.
TEST(GraphDefTest, TheSpatialTransformerIsOneNode) {
  ModelRegistry registry;
  ASSERT_TRUE(RegisterBuiltinModels(&registry).ok());
  absl::StatusOr<std::unique_ptr<Model>> model = registry.Create(
      "stn_deep", {.input_size = 784, .num_classes = 10, .input_shape = {28, 28, 1}});
  ASSERT_TRUE(model.ok()) << model.status();
  absl::StatusOr<GraphDef> graph = BuildGraphDef(**model, {.compute_device = "/job:worker/task:0"});
  ASSERT_TRUE(graph.ok()) << graph.status();
  const std::map<std::string, NodeDef> nodes = ByName(*graph);
  ASSERT_EQ(nodes.count("st/SpatialTransformer"), 1u);
  const NodeDef& st = nodes.at("st/SpatialTransformer");
  EXPECT_EQ(OutputDims(st), (std::vector<int64_t>{-1, 28, 28, 1}));
  EXPECT_EQ(Inputs(st).front(), "input");
  EXPECT_EQ(Inputs(st).size(), 1u + (*model)->layers().front()->variables().size());
  EXPECT_EQ(nodes.count("st/Layer"), 0u);
}

TEST(GraphDefTest, PlacementsThatDoNotFitTheModelAreRefused) {
  const std::unique_ptr<Model> model = SmallCnn();
  GraphPlacement missing = TwoPs(*model);
  missing.parts.pop_back();  // logits/bias
  absl::StatusOr<GraphDef> graph = BuildGraphDef(*model, missing);
  EXPECT_EQ(graph.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(graph.status().message().find("logits/bias"), std::string::npos) << graph.status();

  GraphPlacement stray = TwoPs(*model);
  stray.parts.push_back({model->variables().size(), "ghost", ops::Shape{1}, "/job:ps/task:0"});
  graph = BuildGraphDef(*model, stray);
  EXPECT_EQ(graph.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(graph.status().message().find("ghost"), std::string::npos) << graph.status();

  GraphPlacement clash = TwoPs(*model);
  clash.parts[0].name = "input";  // a variable node named like the batch's placeholder
  graph = BuildGraphDef(*model, clash);
  EXPECT_EQ(graph.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(graph.status().message().find("\"input\""), std::string::npos) << graph.status();
}

}  // namespace
}  // namespace fulcrum::models
