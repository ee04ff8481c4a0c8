// The trace sink: which events FillTrace adds for known records (steps and their phases, RPC
// tracks per peer, counters), the step cap, and the task's pid.
#include "profiler/trace_sink.h"

#include <map>
#include <string>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace fulcrum::profiler {
namespace {

std::map<std::string, int> CountByPhaseAndCategory(const ChromeTrace& trace) {
  std::map<std::string, int> counts;
  const nlohmann::json j = nlohmann::json::parse(trace.ToJson());
  for (const auto& e : j["traceEvents"]) {
    const std::string ph = e["ph"];
    ++counts[ph == "X" ? "X:" + e["cat"].get<std::string>()
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
  EXPECT_EQ(counts["X:rpc"], 3);
  EXPECT_EQ(counts["M:thread_name"], 3);  // "training" and one track per peer
  EXPECT_EQ(counts["C:ps progress"], 1);
  EXPECT_EQ(counts["C:evaluation"], 2);
  EXPECT_EQ(counts["C:cpu_percent"], 1);
  EXPECT_EQ(counts["C:memory_mb"], 1);
  EXPECT_EQ(counts["C:net lo bytes/s"], 1);
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
