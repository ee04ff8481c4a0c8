// TensorBoard's graph tab as a user gets it: real ps, worker and chief processes on loopback
// training mnist_cnn (a quarter of its width) with its big dense kernel partitioned over two
// ps tasks, and a single-mode logreg run. Each task's events file is read back: the worker and
// the chief wrote the model's graph once, at step 0, with every layer and its shapes, and
// every variable (or part) on the ps task the run's placement table (report.json) names; the
// ps tasks, which never build the model, wrote none.
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "profiler/tfevents.h"
#include "proto/tensorboard.pb.h"
#include "proto/tf_graph.pb.h"
#include "tests/testing/cluster.h"
#include "tests/testing/subprocess.h"

namespace fulcrum {
namespace {

namespace fs = std::filesystem;
using ::fulcrum::testing::FreshDir;
using ::fulcrum::testing::HaveData;
using ::fulcrum::testing::LocalCluster;
using ::fulcrum::testing::ReadFile;
using ::fulcrum::testing::RunBinary;
using ::fulcrum::testing::WriteLocalSpec;
using pb::tensorflow::GraphDef;
using pb::tensorflow::NodeDef;

// The graph events of the one events file in `dir`.
std::vector<pb::tensorboard::Event> GraphEvents(const fs::path& dir) {
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().filename().string().rfind("events.out.tfevents.", 0) == 0) files.push_back(e);
  }
  EXPECT_EQ(files.size(), 1u) << dir;
  std::vector<pb::tensorboard::Event> graphs;
  if (files.size() != 1) return graphs;
  absl::StatusOr<std::vector<std::string>> records = profiler::ReadTfRecordFile(files[0]);
  EXPECT_TRUE(records.ok()) << records.status();
  if (!records.ok()) return graphs;
  for (const std::string& record : *records) {
    pb::tensorboard::Event event;
    EXPECT_TRUE(event.ParseFromString(record));
    if (event.what_case() == pb::tensorboard::Event::kGraphDef) graphs.push_back(event);
  }
  return graphs;
}

// The one graph of the events file in `dir`, by node name; empty (and a failure) otherwise.
std::map<std::string, NodeDef> GraphIn(const fs::path& dir) {
  const std::vector<pb::tensorboard::Event> graphs = GraphEvents(dir);
  EXPECT_EQ(graphs.size(), 1u) << dir;
  std::map<std::string, NodeDef> nodes;
  if (graphs.size() != 1) return nodes;
  EXPECT_EQ(graphs[0].step(), 0);
  GraphDef graph;
  EXPECT_TRUE(graph.ParseFromString(graphs[0].graph_def()));
  for (const NodeDef& node : graph.node()) nodes[node.name()] = node;
  return nodes;
}

std::vector<int64_t> OutputDims(const NodeDef& node) {
  std::vector<int64_t> dims;
  const auto it = node.attr().find("_output_shapes");
  if (it == node.attr().end() || it->second.list().shape_size() == 0) return dims;
  for (const auto& d : it->second.list().shape(0).dim()) dims.push_back(d.size());
  return dims;
}

// mnist_cnn at width 0.25 on 28x28x1: its layers' ops and outputs, all on `device`.
void ExpectMnistCnnLayers(const std::map<std::string, NodeDef>& nodes, const std::string& device) {
  const std::map<std::string, std::vector<int64_t>> layers = {
      {"conv1/Conv2D", {-1, 28, 28, 8}},  {"conv1/Relu", {-1, 28, 28, 8}},
      {"pool1/MaxPool", {-1, 14, 14, 8}}, {"conv2/Conv2D", {-1, 14, 14, 16}},
      {"pool2/MaxPool", {-1, 7, 7, 16}},  {"dense1/Reshape", {-1, 784}},
      {"dense1/MatMul", {-1, 256}},       {"dropout1/Dropout", {-1, 256}},
      {"logits/MatMul", {-1, 10}},        {"logits/BiasAdd", {-1, 10}}};
  for (const auto& [name, dims] : layers) {
    ASSERT_EQ(nodes.count(name), 1u) << name;
    EXPECT_EQ(nodes.at(name).device(), device) << name;
    EXPECT_EQ(OutputDims(nodes.at(name)), dims) << name;
  }
  ASSERT_EQ(nodes.count("loss/SparseSoftmaxCrossEntropyWithLogits"), 1u);
  EXPECT_EQ(nodes.at("loss/SparseSoftmaxCrossEntropyWithLogits").input(0), "logits/BiasAdd");
}

// Every row of the placement table is one VariableV2 node on its ps, and there are no others.
void ExpectPlacement(const std::map<std::string, NodeDef>& nodes, const nlohmann::json& table) {
  size_t variables = 0;
  for (const auto& [name, node] : nodes) variables += node.op() == "VariableV2";
  EXPECT_EQ(variables, table.size());
  for (const auto& row : table) {
    const std::string name = row["variable"];
    ASSERT_EQ(nodes.count(name), 1u) << name;
    EXPECT_EQ(nodes.at(name).op(), "VariableV2") << name;
    EXPECT_EQ(nodes.at(name).device(), absl::StrCat("/job:ps/task:", row["ps"].get<int>())) << name;
  }
}

TEST(GraphClusterTest, WorkerAndChiefWriteTheGraphAsPlaced) {
  if (!HaveData()) GTEST_SKIP() << "the dataset-fashion-mnist package is not installed";
  const fs::path dir = FreshDir("graph_cluster");
  const std::string spec = WriteLocalSpec(dir / "spec.json", 2, 1);
  const fs::path run_dir = dir / "run";
  LocalCluster cluster(dir);
  // dense1/kernel (784 x 256 floats, 784 KiB) is over --partition_min_bytes: one slice per ps.
  cluster.StartAll(
      2, 1,
      {absl::StrCat("--cluster_spec=", spec), "--model=mnist_cnn", "--model_width=0.25",
       "--train_subset=1000", "--batch_size=32", "--train_steps=10", "--placement=partition",
       "--partition_min_bytes=65536", "--eval_every=0", "--eval_batch_size=500", "--threads=1",
       "--log_every=5", "--startup_timeout=60", "--heartbeat_timeout=60",
       absl::StrCat("--run_dir=", run_dir.string())});
  cluster.WaitAll(std::chrono::seconds(300));
  for (const auto& t : cluster.tasks()) {
    ASSERT_EQ(t.exit_code, 0) << t.name() << " failed\n" << cluster.Logs();
  }
  const nlohmann::json report =
      nlohmann::json::parse(ReadFile(run_dir / "report.json"), nullptr, false);
  ASSERT_TRUE(report.is_object()) << "no report.json\n" << cluster.Logs();
  const nlohmann::json& table = report["placement_table"];
  ASSERT_TRUE(table.is_array());

  for (const auto& [task, device] : std::map<std::string, std::string>{
           {"worker-0", "/job:worker/task:0"}, {"chief-0", "/job:chief/task:0"}}) {
    SCOPED_TRACE(task);
    const std::map<std::string, NodeDef> nodes = GraphIn(run_dir / task);
    ExpectMnistCnnLayers(nodes, device);
    ExpectPlacement(nodes, table);
    // The partitioned kernel: a part on each ps, read where the layer runs.
    EXPECT_EQ(nodes.count("dense1/kernel"), 0u);
    EXPECT_EQ(nodes.count("dense1/kernel/part_0"), 1u);
    EXPECT_EQ(nodes.count("dense1/kernel/part_1"), 1u);
    ASSERT_EQ(nodes.count("dense1/kernel/ConcatPartitions/concat"), 1u);
    EXPECT_EQ(nodes.at("dense1/kernel/ConcatPartitions/concat").device(), device);
    EXPECT_EQ(nodes.at("dense1/MatMul").input(1), "dense1/kernel/ConcatPartitions/concat");
  }
  for (const char* ps : {"ps-0", "ps-1"}) EXPECT_TRUE(GraphEvents(run_dir / ps).empty()) << ps;
}

TEST(GraphClusterTest, SingleModeWritesTheGraphWithLocalVariables) {
  if (!HaveData()) GTEST_SKIP() << "the dataset-fashion-mnist package is not installed";
  const fs::path dir = FreshDir("graph_single");
  const auto r = RunBinary("worker", {"--model=logreg", "--train_steps=5", "--threads=1",
                                      absl::StrCat("--run_dir=", dir.string())});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::map<std::string, NodeDef> nodes = GraphIn(dir);
  ASSERT_EQ(nodes.count("dense_0/MatMul"), 1u);
  EXPECT_EQ(OutputDims(nodes.at("dense_0/MatMul")), (std::vector<int64_t>{-1, 10}));
  EXPECT_EQ(OutputDims(nodes.at("input")), (std::vector<int64_t>{-1, 784}));
  for (const char* variable : {"dense_0/kernel", "dense_0/bias"}) {
    ASSERT_EQ(nodes.count(variable), 1u) << variable;
    EXPECT_EQ(nodes.at(variable).device(), "/job:worker/task:0") << variable;
  }
  EXPECT_EQ(OutputDims(nodes.at("dense_0/kernel")), (std::vector<int64_t>{784, 10}));
}

}  // namespace
}  // namespace fulcrum
