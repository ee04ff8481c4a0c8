#include "profiler/trace_sink.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"

namespace fulcrum::profiler {
namespace {

constexpr int kTrainTid = 1;

void AddStepSpans(const std::vector<StepRecord>& steps, ChromeTrace* trace) {
  const size_t n = std::min(steps.size(), kMaxTraceSteps);
  for (size_t i = 0; i < n; ++i) {
    const StepRecord& r = steps[i];
    const int64_t dur = std::llround(r.wall_ms * 1000.0);
    trace->Span("step", "step", kTrainTid, r.begin_unix_us, dur,
                {{"step", static_cast<double>(r.step)},
                 {"global_step", static_cast<double>(r.global_step)},
                 {"loss", r.loss}});
    // Phases run one after another in this order inside the step.
    int64_t t = r.begin_unix_us;
    const std::pair<const char*, double> phases[] = {
        {"data", r.data_ms},         {"pull", r.pull_ms}, {"forward", r.forward_ms},
        {"backward", r.backward_ms}, {"push", r.push_ms}, {"sync_wait", r.sync_wait_ms}};
    for (const auto& [name, ms] : phases) {
      const int64_t d = std::llround(ms * 1000.0);
      if (d > 0) trace->Span(name, "phase", kTrainTid, t, d);
      t += d;
    }
  }
}

// One track per peer: RPCs to different tasks overlap.
void AddRpcSpans(const std::vector<RpcSpan>& spans, ChromeTrace* trace) {
  std::map<std::string, int> peer_tid;
  for (const RpcSpan& s : spans) {
    auto [it, inserted] = peer_tid.emplace(s.peer, 10 + static_cast<int>(peer_tid.size()));
    if (inserted) trace->NameThread(it->second, absl::StrCat("rpc ", s.peer));
    trace->Span(s.method, "rpc", it->second, s.begin_unix_us, s.duration_us);
  }
}

void AddRecordCounters(const TraceInput& input, ChromeTrace* trace) {
  for (const PsRecord& r : input.ps_records) {
    trace->Counter("ps progress", r.unix_us,
                   {{"global_step", static_cast<double>(r.global_step)},
                    {"pushes_applied", static_cast<double>(r.pushes_applied)},
                    {"pushes_dropped", static_cast<double>(r.pushes_dropped)}});
  }
  for (const EvalRecord& r : input.evals) {
    std::map<std::string, double> series = {{"test_loss", r.loss}};
    if (r.accuracy >= 0) series["test_accuracy"] = r.accuracy;
    trace->Counter("evaluation", r.unix_us, series);
  }
}

void AddSampleCounters(const std::vector<SystemSample>& samples, ChromeTrace* trace) {
  for (const SystemSample& s : samples) {
    trace->Counter("cpu_percent", s.unix_micros, {{"process", s.cpu_percent}});
    trace->Counter("memory_mb", s.unix_micros,
                   {{"rss", static_cast<double>(s.rss_bytes) / 1e6},
                    {"peak_rss", static_cast<double>(s.peak_rss_bytes) / 1e6}});
    for (const InterfaceSample& i : s.interfaces) {
      trace->Counter(absl::StrCat("net ", i.name, " bytes/s"), s.unix_micros,
                     {{"rx", i.rx_bytes_per_sec}, {"tx", i.tx_bytes_per_sec}});
    }
  }
}

}  // namespace

int TracePid(const std::string& job, int task_index) {
  if (job == "chief") return 1 + task_index;
  if (job == "ps") return 100 + task_index;
  return 200 + task_index;
}

void FillTrace(const TraceInput& input, ChromeTrace* trace) {
  trace->NameThread(kTrainTid, input.job == "worker" ? "training" : "main");
  AddStepSpans(input.steps, trace);
  AddRpcSpans(input.rpc_spans, trace);
  AddRecordCounters(input, trace);
  AddSampleCounters(input.samples, trace);
}

absl::Status WriteTrace(const TraceInput& input, const std::string& path) {
  ChromeTrace trace(TracePid(input.job, input.task_index),
                    absl::StrCat(input.job, "-", input.task_index));
  FillTrace(input, &trace);
  return trace.Write(path);
}

}  // namespace fulcrum::profiler
