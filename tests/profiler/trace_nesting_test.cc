// The trace's nesting rule, checked strictly (tests/testing/trace_nesting.h) on traces built
// from records: steps and phases whose rounded lengths add up past their step, steps that
// begin a µs before the previous one ends, RPCs to one peer in flight at once. Also the
// phases' order (pull first, sync_wait inside push) and the run's merged trace.
#include "tests/testing/trace_nesting.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "base/files.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "profiler/trace_merge.h"
#include "profiler/trace_sink.h"

namespace fulcrum::profiler {
namespace {

namespace fs = std::filesystem;
using testing::NestingViolations;

nlohmann::json Build(const TraceInput& in) {
  ChromeTrace trace(TracePid(in.job, in.task_index), "worker-0");
  FillTrace(in, &trace);
  return nlohmann::json::parse(trace.ToJson());
}

StepRecord Step(int64_t begin_us, double wall_ms, double data, double fwd, double bwd, double push,
                double sync_wait = 0.0, double pull = 0.0) {
  StepRecord r;
  r.begin_unix_us = begin_us;
  r.wall_ms = wall_ms;
  r.data_ms = data;
  r.forward_ms = fwd;
  r.backward_ms = bwd;
  r.push_ms = push;
  r.sync_wait_ms = sync_wait;
  r.pull_ms = pull;
  return r;
}

// The X slices of the trace by name, in file order.
std::vector<nlohmann::json> Slices(const nlohmann::json& trace) {
  std::vector<nlohmann::json> out;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] == "X") out.push_back(e);
  }
  return out;
}

TEST(TraceNestingTest, TheCheckerSeesOverlapsAndUnbalancedAsyncSpans) {
  // What trace.json was: two RPCs to one peer as X slices on one thread, overlapping.
  const nlohmann::json bad = nlohmann::json::parse(R"({"traceEvents": [
    {"ph": "X", "name": "PushPull", "pid": 200, "tid": 10, "ts": 100, "dur": 50},
    {"ph": "X", "name": "PushPull", "pid": 200, "tid": 10, "ts": 120, "dur": 50},
    {"ph": "b", "name": "rpc ps-0", "cat": "rpc", "pid": 200, "id2": {"local": "0x1"}, "ts": 1},
    {"ph": "e", "name": "rpc ps-0", "cat": "rpc", "pid": 200, "id2": {"local": "0x2"}, "ts": 2},
    {"ph": "B", "name": "open", "pid": 200, "tid": 1, "ts": 5}]})");
  const std::vector<std::string> v = NestingViolations(bad);
  ASSERT_EQ(v.size(), 4u) << ::testing::PrintToString(v);
  const auto mentions = [&](const std::string& what) {
    return std::count_if(v.begin(), v.end(),
                         [&](const std::string& line) { return line.find(what) != line.npos; });
  };
  EXPECT_EQ(mentions("overhangs"), 1) << ::testing::PrintToString(v);
  EXPECT_EQ(mentions("with no begin"), 1) << ::testing::PrintToString(v);
  EXPECT_EQ(mentions("never ends"), 2) << ::testing::PrintToString(v);  // the b and the B
  // A phase that ends a µs after its step: the old rounding's 1 µs overhang.
  const nlohmann::json overhang = nlohmann::json::parse(R"({"traceEvents": [
    {"ph": "X", "name": "step", "pid": 200, "tid": 1, "ts": 0, "dur": 2},
    {"ph": "X", "name": "data", "pid": 200, "tid": 1, "ts": 0, "dur": 1},
    {"ph": "X", "name": "forward", "pid": 200, "tid": 1, "ts": 1, "dur": 1},
    {"ph": "X", "name": "backward", "pid": 200, "tid": 1, "ts": 2, "dur": 1}]})");
  EXPECT_TRUE(NestingViolations(overhang).empty());  // backward starts where the step ends
  nlohmann::json past_end = overhang;
  past_end["traceEvents"][3]["ts"] = 1;
  past_end["traceEvents"][3]["dur"] = 2;  // [1, 3) in a step of [0, 2)
  EXPECT_EQ(NestingViolations(past_end).size(), 1u);
}

TEST(TraceNestingTest, RoundedPhasesStayInsideTheirStep) {
  TraceInput in;
  in.job = "worker";
  // Every phase rounds up alone (0.6 µs -> 1 µs): three of them would take 3 µs of a 2 µs step.
  in.steps.push_back(Step(1000, 0.0018, 0.0006, 0.0006, 0.0006, 0.0));
  // The next step's system-clock begin falls a µs before this one's rounded end.
  in.steps.push_back(Step(1001, 1.0006, 0.2004, 0.2004, 0.2004, 0.2004, 0.1990));
  in.steps.push_back(Step(2002, 0.5, 0.1, 0.1, 0.1, 0.25, 0.0));  // phases add up past wall
  const nlohmann::json trace = Build(in);
  const std::vector<std::string> v = NestingViolations(trace);
  EXPECT_TRUE(v.empty()) << ::testing::PrintToString(v);
  for (const auto& e : Slices(trace)) {
    if (e["name"] == "step") continue;
    EXPECT_GT(e["dur"].get<int64_t>(), 0) << e;  // nothing drawn with no length
  }
}

TEST(TraceNestingTest, PhasesInTheOrderTheyRunWithSyncWaitInsidePush) {
  TraceInput in;
  in.job = "worker";
  // A first step: its pull began 2 ms before the batch was read; the push took 5 ms of which
  // the PS held it 3 ms for the step's aggregation.
  in.steps.push_back(Step(10'000, 12.0, 1.0, 2.0, 2.0, 2.0, 3.0, 2.0));
  const std::vector<nlohmann::json> s = Slices(Build(in));
  std::vector<std::string> names;
  std::map<std::string, std::pair<int64_t, int64_t>> at;
  for (const auto& e : s) {
    names.push_back(e["name"]);
    at[e["name"]] = {e["ts"].get<int64_t>(), e["ts"].get<int64_t>() + e["dur"].get<int64_t>()};
  }
  EXPECT_EQ(names, (std::vector<std::string>{"step", "pull", "data", "forward", "backward", "push",
                                             "sync_wait"}));
  EXPECT_EQ(at["pull"], std::make_pair(int64_t{10'000}, int64_t{12'000}));
  EXPECT_EQ(at["data"], std::make_pair(int64_t{12'000}, int64_t{13'000}));
  EXPECT_EQ(at["push"], std::make_pair(int64_t{17'000}, int64_t{22'000}));
  EXPECT_EQ(at["sync_wait"], std::make_pair(int64_t{19'000}, int64_t{22'000}));
  EXPECT_EQ(at["step"], std::make_pair(int64_t{10'000}, int64_t{22'000}));
}

// Many steps with phase lengths near every rounding boundary and bursts of RPCs to two peers
// in flight at once: the trace holds one slice per step, per non-empty phase and per RPC, and
// not one breaks the nesting rule.
TEST(TraceNestingTest, RandomRecordsAlwaysNest) {
  std::mt19937 rng(13);
  std::uniform_int_distribution<int> tenths(0, 30);  // phase lengths of 0.0 - 3.0 µs ...
  TraceInput in;
  in.job = "worker";
  int64_t t = 1'700'000'000'000'000;
  for (int i = 0; i < 2000; ++i) {
    double ms[6];
    double sum = 0;
    for (double& m : ms) sum += (m = tenths(rng) * 0.0001 + (tenths(rng) % 3) * 0.001);
    const double wall = sum + (tenths(rng) - 15) * 0.0001;  // ... adding up to about the wall
    in.steps.push_back(Step(t, wall, ms[0], ms[1], ms[2], ms[3], ms[4], i == 0 ? ms[5] : 0.0));
    for (int k = 0; k < 4; ++k) {
      in.rpc_spans.push_back({k % 2 ? "ps-1" : "ps-0", "PushPull", t + k, 5 + tenths(rng)});
    }
    t += std::llround(wall * 1000) + tenths(rng) % 3 - 1;  // the next begin: ±1 µs
  }
  const nlohmann::json trace = Build(in);
  const std::vector<std::string> v = NestingViolations(trace);
  EXPECT_TRUE(v.empty()) << v.size() << " violations, first: " << v.front();
  int slices = 0, async_begins = 0;
  for (const auto& e : trace["traceEvents"]) {
    slices += e["ph"] == "X";
    async_begins += e["ph"] == "b";
  }
  EXPECT_EQ(async_begins, 8000);
  EXPECT_GE(slices, 2000 * 2);  // a step and at least one phase each
}

// An overlapped step runs data, forward (with its waits for values inside, where they were
// measured), push (the previous push-pull's end), backward; its push-pull is drawn on its own
// track from the first chunk sent to the last values in, reaching into the next step.
TEST(TraceNestingTest, OverlappedStepsDrawTheirWaitsInsideForwardAndTheirPushPullBeside) {
  TraceInput in;
  in.job = "worker";
  for (int i = 0; i < 2; ++i) {
    // 10 ms steps: data 1, forward 4 of which 1.5 waited (0.5 at 1.0, 1.0 at 3.5), push 0.5,
    // backward 4.5; chunks in flight from 6.0 to 13.0 (3 ms into the next step).
    StepRecord r = Step(10'000 + 10'000 * i, 10.0, 1.0, 2.5, 4.5, 0.5, 0.0, 1.5);
    r.step = i + 1;
    r.overlap = true;
    r.value_waits = {{1.0, 0.5}, {3.5, 1.0}};
    r.comm_wait_ms = 2.0;
    r.inflight_begin_ms = 6.0;
    r.inflight_ms = 7.0;
    in.steps.push_back(r);
  }
  const nlohmann::json trace = Build(in);
  const std::vector<std::string> v = NestingViolations(trace);
  EXPECT_TRUE(v.empty()) << ::testing::PrintToString(v);
  std::vector<std::string> names;
  std::vector<std::pair<int64_t, int64_t>> pulls, inflight;
  std::map<std::string, std::pair<int64_t, int64_t>> at;
  for (const auto& e : Slices(trace)) {
    const int64_t b = e["ts"].get<int64_t>(), end = b + e["dur"].get<int64_t>();
    if (e["tid"] == 2) {
      inflight.emplace_back(b, end);
      EXPECT_EQ(e["name"], "push-pull");
      continue;
    }
    if (b >= 20'000) continue;  // the first step only
    names.push_back(e["name"]);
    if (e["name"] == "pull") pulls.emplace_back(b, end);
    at[e["name"]] = {b, end};
  }
  EXPECT_EQ(names, (std::vector<std::string>{"step", "data", "forward", "pull", "pull", "push",
                                             "backward"}));
  EXPECT_EQ(at["data"], std::make_pair(int64_t{10'000}, int64_t{11'000}));
  EXPECT_EQ(at["forward"], std::make_pair(int64_t{11'000}, int64_t{15'000}));
  EXPECT_EQ(pulls, (std::vector<std::pair<int64_t, int64_t>>{{11'000, 11'500}, {13'500, 14'500}}));
  EXPECT_EQ(at["push"], std::make_pair(int64_t{15'000}, int64_t{15'500}));
  EXPECT_EQ(at["backward"], std::make_pair(int64_t{15'500}, int64_t{20'000}));
  EXPECT_EQ(inflight,
            (std::vector<std::pair<int64_t, int64_t>>{{16'000, 23'000}, {26'000, 33'000}}));
}

// Overlapped steps with random waits (some past their forward slice, some overlapping each
// other after rounding) and push-pulls reaching past the next one's begin still nest.
TEST(TraceNestingTest, RandomOverlappedRecordsAlwaysNest) {
  std::mt19937 rng(17);
  std::uniform_int_distribution<int> tenths(0, 30);
  TraceInput in;
  in.job = "worker";
  int64_t t = 1'700'000'000'000'000;
  for (int i = 0; i < 2000; ++i) {
    StepRecord r;
    r.step = i + 1;
    r.overlap = true;
    r.begin_unix_us = t;
    r.data_ms = tenths(rng) * 0.0001;
    r.forward_ms = tenths(rng) * 0.001;
    r.push_ms = tenths(rng) * 0.0001;
    r.backward_ms = tenths(rng) * 0.001;
    double at = r.data_ms + tenths(rng) * 0.0001;
    for (int k = 0; k < 3; ++k) {
      const double w = tenths(rng) * 0.0003;
      r.value_waits.push_back({at, w});
      r.pull_ms += w;
      at += w + (tenths(rng) - 10) * 0.0001;  // sometimes before the last one's end
    }
    r.wall_ms = r.data_ms + r.forward_ms + r.pull_ms + r.push_ms + r.backward_ms +
                (tenths(rng) - 15) * 0.0001;
    r.inflight_begin_ms = r.wall_ms * tenths(rng) / 30.0;
    r.inflight_ms = tenths(rng) * 0.002;
    in.steps.push_back(r);
    t += std::llround(std::max(r.wall_ms, 0.0) * 1000) + tenths(rng) % 3 - 1;
  }
  const nlohmann::json trace = Build(in);
  const std::vector<std::string> v = NestingViolations(trace);
  EXPECT_TRUE(v.empty()) << v.size() << " violations, first: " << v.front();
}

class TraceMergeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    run_ = fs::path(::testing::TempDir()) / "trace_merge_test";
    fs::remove_all(run_);
  }
  // Writes the trace of task `job`-`index` with `steps` steps and one RPC into its folder.
  void WriteTask(const std::string& job, int index, int steps) {
    TraceInput in;
    in.job = job;
    in.task_index = index;
    for (int i = 0; i < steps; ++i) in.steps.push_back(Step(1000 * i, 1.0, 0.5, 0.5, 0, 0));
    in.rpc_spans.push_back({"ps-0", "Pull", 10, 20});
    const fs::path dir = run_ / (job + "-" + std::to_string(index));
    ASSERT_TRUE(MakeDirs(dir, "task").ok());
    ASSERT_TRUE(WriteTrace(in, (dir / "trace.json").string()).ok());
  }
  fs::path run_;
};

TEST_F(TraceMergeTest, EveryTaskIsOneProcessAndMissingOnesAreNamed) {
  WriteTask("chief", 0, 0);
  WriteTask("ps", 0, 0);
  WriteTask("worker", 0, 3);
  WriteTask("worker", 1, 2);
  ASSERT_TRUE(MakeDirs(run_ / "worker-3", "task").ok());
  ASSERT_TRUE(WriteFileAtomically(run_ / "worker-3" / "trace.json", "{\"traceEv").ok());
  const std::vector<TraceTask> tasks = {{"chief", 0},  {"ps", 0},     {"worker", 0},
                                        {"worker", 1}, {"worker", 2}, {"worker", 3}};
  const fs::path out = run_ / "run_trace.json";
  absl::StatusOr<TraceMergeResult> r = MergeRunTrace(run_.string(), tasks, out.string());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->merged, (std::vector<std::string>{"chief-0", "ps-0", "worker-0", "worker-1"}));
  ASSERT_EQ(r->missing.size(), 2u);
  EXPECT_EQ(r->missing[0].first, "worker-2");
  EXPECT_EQ(r->missing[0].second, "not found");
  EXPECT_EQ(r->missing[1].first, "worker-3");

  absl::StatusOr<std::string> text = ReadFileToString(out);
  ASSERT_TRUE(text.ok()) << text.status();
  const nlohmann::json merged = nlohmann::json::parse(*text);
  EXPECT_EQ(merged["traceEvents"].size(), r->events);
  std::map<int, std::string> process_names;
  std::map<int, int> steps_by_pid;
  for (const auto& e : merged["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "process_name") {
      EXPECT_TRUE(process_names.emplace(e["pid"].get<int>(), e["args"]["name"]).second) << e;
    }
    if (e["ph"] == "X" && e["name"] == "step") ++steps_by_pid[e["pid"].get<int>()];
  }
  EXPECT_EQ(process_names,
            (std::map<int, std::string>{
                {1, "chief-0"}, {100, "ps-0"}, {200, "worker-0"}, {201, "worker-1"}}));
  EXPECT_EQ(steps_by_pid, (std::map<int, int>{{200, 3}, {201, 2}}));
  // The same RPC id in two tasks stays two spans: ids are process-local.
  const std::vector<std::string> v = NestingViolations(merged);
  EXPECT_TRUE(v.empty()) << ::testing::PrintToString(v);
}

TEST_F(TraceMergeTest, NoTraceToMergeIsAnErrorAndWritesNothing) {
  const fs::path out = run_ / "run_trace.json";
  absl::StatusOr<TraceMergeResult> r = MergeRunTrace(run_.string(), {{"worker", 0}}, out.string());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition) << r.status();
  EXPECT_FALSE(fs::exists(out));
}

}  // namespace
}  // namespace fulcrum::profiler
