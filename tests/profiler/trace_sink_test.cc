// The trace sink: which events FillTrace adds for known records (steps and their phases, RPCs
// as async spans grouped by peer, counters), the step cap, and the task's pid.
#include "profiler/trace_sink.h"

#include <map>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace fulcrum::profiler {
namespace {

std::map<std::string, int> CountByPhaseAndCategory(const ChromeTrace& trace) {
  std::map<std::string, int> counts;
  const nlohmann::json j = nlohmann::json::parse(trace.ToJson());
  for (const auto& e : j["traceEvents"]) {
    const std::string ph = e["ph"];
    ++counts[ph == "X" || ph == "b" || ph == "e" ? ph + ":" + e["cat"].get<std::string>()
                                                 : ph + ":" + e["name"].get<std::string>()];
  }
  return counts;
}

TEST(TraceSinkTest, EveryRecordBecomesItsEvents) {
  TraceInput in;
  in.job = "worker";
  in.task_index = 2;
  StepRecord step;
  step.begin_unix_us = 1000;
  step.wall_ms = 3.0;
  step.data_ms = 1.0;
  step.forward_ms = 1.0;
  step.backward_ms = 1.0;  // pull, push and sync_wait are 0: no span
  in.steps = {step, step};
  in.steps[1].begin_unix_us = 4000;
  in.rpc_spans = {
      {"ps-0", "PushPull", 1000, 10}, {"ps-1", "PushPull", 1000, 10}, {"ps-0", "Pull", 2000, 10}};
  in.ps_records.resize(1);
  in.evals.resize(2);
  SystemSample s;
  s.interfaces.resize(1);
  s.interfaces[0].name = "lo";
  in.samples = {s};
  ChromeTrace trace(TracePid(in.job, in.task_index), "worker-2");
  FillTrace(in, &trace);
  std::map<std::string, int> counts = CountByPhaseAndCategory(trace);
  EXPECT_EQ(counts["X:step"], 2);
  EXPECT_EQ(counts["X:phase"], 6);
  EXPECT_EQ(counts["X:rpc"], 0);  // RPCs overlap: never spans on a thread
  EXPECT_EQ(counts["b:rpc"], 3);
  EXPECT_EQ(counts["e:rpc"], 3);
  EXPECT_EQ(counts["M:thread_name"], 1);  // "training"
  EXPECT_EQ(counts["C:ps progress"], 1);
  EXPECT_EQ(counts["C:evaluation"], 2);
  EXPECT_EQ(counts["C:cpu_percent"], 1);
  EXPECT_EQ(counts["C:memory_mb"], 1);
  EXPECT_EQ(counts["C:net lo bytes/s"], 1);
}

TEST(TraceSinkTest, RpcSpansHaveOneIdEachAndAreNamedAfterTheirPeer) {
  TraceInput in;
  in.rpc_spans = {{"ps-0", "PushPull", 1000, 10}, {"ps-0", "PushPull", 1005, 10}};
  ChromeTrace trace(200, "worker-0");
  FillTrace(in, &trace);
  const nlohmann::json j = nlohmann::json::parse(trace.ToJson());
  std::map<std::string, std::vector<int64_t>> ts_by_id;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] != "b" && e["ph"] != "e") continue;
    EXPECT_EQ(e["name"], "rpc ps-0") << e;
    EXPECT_EQ(e["cat"], "rpc") << e;
    if (e["ph"] == "b") {
      EXPECT_EQ(e["args"]["method"], "PushPull") << e;
    }
    ts_by_id[e["id2"]["local"].get<std::string>()].push_back(e["ts"].get<int64_t>());
  }
  EXPECT_EQ(ts_by_id, (std::map<std::string, std::vector<int64_t>>{{"0x1", {1000, 1010}},
                                                                   {"0x2", {1005, 1015}}}));
}

TEST(TraceSinkTest, KeepsTheFirstStepsOnly) {
  TraceInput in;
  in.steps.resize(kMaxTraceSteps + 5);
  ChromeTrace trace(1, "worker-0");
  FillTrace(in, &trace);
  EXPECT_EQ(CountByPhaseAndCategory(trace)["X:step"], static_cast<int>(kMaxTraceSteps));
}

TEST(TraceSinkTest, EveryTaskHasItsOwnPid) {
  EXPECT_EQ(TracePid("chief", 0), 1);
  EXPECT_EQ(TracePid("ps", 3), 103);
  EXPECT_EQ(TracePid("worker", 4), 204);
}

}  // namespace
}  // namespace fulcrum::profiler
