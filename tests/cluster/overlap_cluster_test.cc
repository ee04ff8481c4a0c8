// The overlapped schedule (--overlap) in a cluster as a user runs it: real ps, worker and
// chief processes on loopback, a small CNN under weight decay on synthetic data, 1 ps x 2
// workers in sync mode, with chunks small enough that every layer has its own. The final
// checkpoint holds the same values bit for bit with --overlap on every worker, on none, or
// on one of the two (sync mode's step values do not depend on when chunks were sent), and
// with the data RPCs on the tcp data plane (--data_plane=tcp) instead of gRPC; the
// overlapped workers' traces keep the nesting rule and show the push-pulls on their own track,
// reaching past the end of the step that sent them.
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "proto/ps.pb.h"
#include "tests/testing/cluster.h"
#include "tests/testing/subprocess.h"
#include "tests/testing/trace_nesting.h"

namespace fulcrum {
namespace {

namespace fs = std::filesystem;
using ::fulcrum::testing::FreshDir;
using ::fulcrum::testing::LocalCluster;
using ::fulcrum::testing::ReadFile;
using ::fulcrum::testing::ReadJson;
using ::fulcrum::testing::WriteLocalSpec;

constexpr int kSteps = 30;

// One sync run into dir/<run>; `overlap[i]` is worker i's --overlap. Returns the values of
// the final checkpoint's ps:0 shard (empty, with a test failure, if any task failed).
std::vector<std::string> TrainAndReadValues(const fs::path& dir, const std::string& run,
                                            const std::vector<bool>& overlap,
                                            const std::string& data_plane = "grpc") {
  const std::string spec = WriteLocalSpec(dir / (run + "-spec.json"), 1, 2);
  const fs::path ckpt = dir / (run + "-ckpt");
  const std::vector<std::string> flags = {absl::StrCat("--cluster_spec=", spec),
                                          "--model=mnist_cnn",
                                          "--model_width=0.25",
                                          "--dataset=synthetic",
                                          "--synthetic_shape=28,28,1",
                                          "--synthetic_examples=2000",
                                          "--batch_size=16",
                                          "--weight_decay=0.01",
                                          "--optimizer=momentum",
                                          "--learning_rate=0.05",
                                          absl::StrCat("--train_steps=", kSteps),
                                          "--mode=sync",
                                          "--rpc_chunk_bytes=16384",
                                          "--eval_every=0",
                                          "--threads=1",
                                          "--log_every=10",
                                          "--startup_timeout=60",
                                          "--checkpoint_every_secs=0",
                                          absl::StrCat("--data_plane=", data_plane),
                                          absl::StrCat("--checkpoint_dir=", ckpt.string()),
                                          absl::StrCat("--run_dir=", (dir / run).string())};
  fs::create_directories(dir / (run + "-logs"));
  LocalCluster cluster(dir / (run + "-logs"));
  cluster.Start("ps", 0, flags);
  for (int i = 0; i < 2; ++i) {
    std::vector<std::string> worker = flags;
    worker.push_back(overlap[static_cast<size_t>(i)] ? "--overlap" : "--nooverlap");
    cluster.Start("worker", i, worker);
  }
  cluster.Start("chief", 0, flags);
  cluster.WaitAll(std::chrono::seconds(300));
  for (const auto& t : cluster.tasks()) {
    EXPECT_EQ(t.exit_code, 0) << t.name() << " failed\n" << cluster.Logs();
    if (t.exit_code != 0) return {};
  }
  pb::ShardCheckpoint checkpoint;
  const fs::path file = ckpt / absl::StrCat("ckpt-", kSteps) / "ps-0.ckpt";
  EXPECT_TRUE(checkpoint.ParseFromString(ReadFile(file))) << file;
  return {checkpoint.values().begin(), checkpoint.values().end()};
}

TEST(OverlapClusterTest, SyncValuesDoNotDependOnTheScheduleAndTheTraceShowsTheOverlap) {
  const fs::path dir = FreshDir("cluster_overlap");
  const std::vector<std::string> sequential = TrainAndReadValues(dir, "off", {false, false});
  const std::vector<std::string> overlapped = TrainAndReadValues(dir, "on", {true, true});
  const std::vector<std::string> mixed = TrainAndReadValues(dir, "mixed", {true, false});
  // The same run with Pull/PushPull on the tcp data plane instead of gRPC.
  const std::vector<std::string> tcp = TrainAndReadValues(dir, "tcp", {true, false}, "tcp");
  ASSERT_FALSE(sequential.empty());
  EXPECT_TRUE(overlapped == sequential) << "the overlapped run ended at other values";
  EXPECT_TRUE(mixed == sequential) << "the mixed run ended at other values";
  EXPECT_TRUE(tcp == sequential) << "the tcp data plane's run ended at other values";
  const nlohmann::json tcp_report = ReadJson(dir / "tcp" / "report.json");
  ASSERT_TRUE(tcp_report.is_object());
  for (const auto& w : tcp_report["workers"]) EXPECT_EQ(w["data_plane"], "tcp") << w.dump();

  const nlohmann::json report = ReadJson(dir / "on" / "report.json");
  ASSERT_TRUE(report.is_object());
  EXPECT_EQ(report["global_step"], kSteps);
  for (const auto& w : report["workers"]) {
    EXPECT_EQ(w["overlap"], true) << w.dump();
    EXPECT_GT(w["comm_inflight_mean_ms"].get<double>(), 0.0) << w.dump();
  }
  for (const std::string name : {"worker-0", "worker-1", "ps-0", "chief-0"}) {
    const nlohmann::json trace = ReadJson(dir / "on" / name / "trace.json");
    ASSERT_TRUE(trace.is_object()) << name;
    const std::vector<std::string> v = testing::NestingViolations(trace);
    EXPECT_TRUE(v.empty()) << name << ": " << v.size() << " violations, first: " << v.front();
  }
  // The push-pulls on their track run past the end of the step that sent them: the next
  // step's forward pass began while they were in flight.
  const nlohmann::json trace = ReadJson(dir / "on" / "worker-0" / "trace.json");
  std::vector<std::pair<int64_t, int64_t>> steps, inflight;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] != "X") continue;
    const int64_t b = e["ts"].get<int64_t>(), end = b + e["dur"].get<int64_t>();
    if (e["name"] == "step") steps.emplace_back(b, end);
    if (e["name"] == "push-pull") inflight.emplace_back(b, end);
  }
  ASSERT_EQ(steps.size(), static_cast<size_t>(kSteps));
  ASSERT_EQ(inflight.size(), static_cast<size_t>(kSteps));
  int past_their_step = 0;
  for (size_t i = 0; i < steps.size(); ++i) {
    EXPECT_GE(inflight[i].first, steps[i].first);
    EXPECT_LT(inflight[i].first, steps[i].second);
    past_their_step += inflight[i].second > steps[i].second;
  }
  EXPECT_GT(past_their_step, 0);
  const nlohmann::json merged = ReadJson(dir / "on" / "run_trace.json");
  ASSERT_TRUE(merged.is_object());
  const std::vector<std::string> v = testing::NestingViolations(merged);
  EXPECT_TRUE(v.empty()) << "run_trace.json: " << v.size() << " violations, first: " << v.front();
}

}  // namespace
}  // namespace fulcrum
