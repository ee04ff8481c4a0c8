// profiler: a task's trace.json (Chrome trace-event format, chrome_trace.h) built from the
// profiler's records at a flush or the end, never per step: a "step" span per worker step
// with its phase spans nested inside (whole µs, clamped into the step; an overlapped step's
// waits for values inside its forward span), each step's push-pull in flight on a track of
// its own (it outlives its step when overlapped), the RPCs as async spans grouped by peer
// ("rpc ps-0"), counters for ps progress, evaluations, CPU, memory and per-interface
// network. Every task has its own pid (chief 1, ps 100+i, worker 200+i), so the traces of a
// run merge into one (trace_merge.h).
// Thread-safety: functions without shared state; safe from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "profiler/chrome_trace.h"
#include "profiler/records.h"
#include "profiler/sampler.h"

namespace fulcrum::profiler {

// What the trace keeps, so a long run's memory and file stay small: the first steps and the
// first RPCs (the summary says how many were left out).
inline constexpr size_t kMaxTraceSteps = 20000;
inline constexpr size_t kMaxRpcSpans = 100000;

// One RPC as the trace shows it.
struct RpcSpan {
  std::string peer;    // "ps-0"
  const char* method;  // a string literal of the runtime ("PushPull")
  int64_t begin_unix_us;
  int64_t duration_us;
};

// What a task's trace is built from.
struct TraceInput {
  std::string job;  // "worker", "ps", "chief"
  int task_index = 0;
  std::vector<StepRecord> steps;  // only the first kMaxTraceSteps are drawn
  std::vector<RpcSpan> rpc_spans;
  std::vector<PsRecord> ps_records;
  std::vector<EvalRecord> evals;
  std::vector<SystemSample> samples;
};

// The trace pid of a task: chief 1 + i, ps 100 + i, worker 200 + i.
int TracePid(const std::string& job, int task_index);

// Adds every event of `input` to `trace` (made with TracePid and "<job>-<index>").
void FillTrace(const TraceInput& input, ChromeTrace* trace);

// Builds the trace of `input` and writes it to `path` atomically.
absl::Status WriteTrace(const TraceInput& input, const std::string& path);

}  // namespace fulcrum::profiler
