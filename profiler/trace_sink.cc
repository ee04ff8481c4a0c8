#include "profiler/trace_sink.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <span>
#include <string_view>
#include <utility>

#include "absl/strings/str_cat.h"

namespace fulcrum::profiler {
namespace {

constexpr int kTrainTid = 1;
constexpr int kCommTid = 2;  // the push-pulls in flight, beside the training thread

int64_t RoundUs(double ms) { return std::llround(std::max(ms, 0.0) * 1000.0); }

// The PS's wait for the step's aggregation happens inside the push: each push-pull RPC is
// held by its PS after the gradients are taken and before the new values are sent back. The
// worker learns only how long the longest wait was (the PS measures it), not when it ended,
// so it is drawn ending where the push ends: it really ended when that PS sent its reply, so
// the drawing is late by that reply's way back (and any RPC of the push still in flight).
void AddSyncWait(const StepRecord& r, int64_t push_begin, int64_t push_end, ChromeTrace* trace) {
  const int64_t begin = std::max(push_begin, push_end - RoundUs(r.sync_wait_ms));
  if (begin < push_end) trace->Span("sync_wait", "phase", kTrainTid, begin, push_end - begin);
}

// The phases of a step inside [begin, end) on the train thread, in the order they run: the
// pull a step carries (the first one's), data, forward, backward, then the push RPCs with the
// PS's sync wait inside them (drawn at their end, see AddSyncWait). Every boundary is rounded
// from the time since the step's begin, one base for all, and clamped into the step, so no
// phase overhangs its step or its neighbour after rounding.
// Calls draw(name, phase begin, phase end) for each phase of `phases` (name, length in ms)
// that is not empty once its boundaries are rounded from the time since `begin` and clamped
// into [begin, end).
template <typename Draw>
void ForEachPhase(std::span<const std::pair<const char*, double>> phases, int64_t begin,
                  int64_t end, Draw draw) {
  double since_begin_ms = 0.0;
  int64_t t = begin;
  for (const auto& [name, ms] : phases) {
    since_begin_ms += std::max(ms, 0.0);
    const int64_t phase_end = std::clamp(begin + RoundUs(since_begin_ms), t, end);
    if (phase_end == t) continue;
    draw(name, t, phase_end);
    t = phase_end;
  }
}

void AddPhaseSpans(const StepRecord& r, int64_t begin, int64_t end, ChromeTrace* trace) {
  const std::pair<const char*, double> phases[] = {{"pull", r.pull_ms},
                                                   {"data", r.data_ms},
                                                   {"forward", r.forward_ms},
                                                   {"backward", r.backward_ms},
                                                   {"push", r.push_ms + r.sync_wait_ms}};
  ForEachPhase(phases, begin, end, [&](const char* name, int64_t t, int64_t phase_end) {
    if (std::string_view(name) == "push") {
      trace->Span(name, "phase", kTrainTid, t, phase_end - t,
                  {{"push_ms", r.push_ms}, {"sync_wait_ms", r.sync_wait_ms}});
      AddSyncWait(r, t, phase_end, trace);
    } else {
      trace->Span(name, "phase", kTrainTid, t, phase_end - t);
    }
  });
}

// The overlapped schedule's phases inside [begin, end), in the order they run: the first
// step's pull, data, forward (the forward pass with its waits for values, drawn as "pull"
// slices inside it at their measured moments), push (the previous push-pull's end, with the
// part of the sync wait not already spent waiting for values drawn at its end) and backward.
// The step's sync wait is taken from its waits for values first (see TrainLoop). Boundaries
// as in AddPhaseSpans.
void AddOverlappedPhaseSpans(const StepRecord& r, int64_t begin, int64_t end, ChromeTrace* trace) {
  double waits_ms = 0.0;
  for (const StepRecord::Span& w : r.value_waits) waits_ms += std::max(w.ms, 0.0);
  const double sync_in_waits_ms = std::min(waits_ms, r.sync_wait_ms);
  const double first_pull_ms = std::max(r.pull_ms + sync_in_waits_ms - waits_ms, 0.0);
  const double sync_in_push_ms = r.sync_wait_ms - sync_in_waits_ms;
  const std::pair<const char*, double> phases[] = {{"pull", first_pull_ms},
                                                   {"data", r.data_ms},
                                                   {"forward", r.forward_ms + waits_ms},
                                                   {"push", r.push_ms + sync_in_push_ms},
                                                   {"backward", r.backward_ms}};
  ForEachPhase(phases, begin, end, [&](const char* name, int64_t t, int64_t phase_end) {
    if (std::string_view(name) == "push") {
      trace->Span(name, "phase", kTrainTid, t, phase_end - t,
                  {{"push_ms", r.push_ms}, {"sync_wait_ms", sync_in_push_ms}});
      const int64_t wait_begin = std::max(t, phase_end - RoundUs(sync_in_push_ms));
      if (wait_begin < phase_end) {
        trace->Span("sync_wait", "phase", kTrainTid, wait_begin, phase_end - wait_begin);
      }
    } else if (std::string_view(name) == "forward") {
      trace->Span(name, "phase", kTrainTid, t, phase_end - t,
                  {{"forward_ms", r.forward_ms},
                   {"pull_ms", waits_ms - sync_in_waits_ms},
                   {"sync_wait_ms", sync_in_waits_ms}});
      // Each wait where it was measured, clamped into the forward slice and after the last.
      int64_t floor = t;
      for (const StepRecord::Span& w : r.value_waits) {
        const int64_t wb = std::clamp(begin + RoundUs(w.begin_ms), floor, phase_end);
        const int64_t we = std::clamp(begin + RoundUs(w.begin_ms + w.ms), wb, phase_end);
        if (we > wb) trace->Span("pull", "phase", kTrainTid, wb, we - wb);
        floor = we;
      }
    } else {
      trace->Span(name, "phase", kTrainTid, t, phase_end - t);
    }
  });
}

// The steps' push-pulls on their own track, as measured from the first chunk sent to the last
// chunk's values in: overlapped, they run beside the backward pass and into the next
// step's forward pass. Kept disjoint after rounding (each begins at or after the last end).
void AddInflightSpans(const std::vector<StepRecord>& steps, size_t n, ChromeTrace* trace) {
  int64_t floor = std::numeric_limits<int64_t>::min();
  bool named = false;
  for (size_t i = 0; i < n; ++i) {
    const StepRecord& r = steps[i];
    if (r.inflight_ms <= 0) continue;
    if (!named) {
      trace->NameThread(kCommTid, "push-pull in flight");
      named = true;
    }
    const int64_t begin = std::max(r.begin_unix_us + RoundUs(r.inflight_begin_ms), floor);
    const int64_t end =
        std::max(begin, r.begin_unix_us + RoundUs(r.inflight_begin_ms + r.inflight_ms));
    if (end == begin) continue;
    trace->Span("push-pull", "comm", kCommTid, begin, end - begin,
                {{"step", static_cast<double>(r.step)},
                 {"inflight_ms", r.inflight_ms},
                 {"comm_wait_ms", r.comm_wait_ms}});
    floor = end;
  }
}

// Draws every step (up to kMaxTraceSteps) with its phases. A step's begin is the system
// clock's and its length the steady clock's, so after rounding a step could reach past the
// next one's begin: each step is drawn inside [previous drawn end, next begin], which keeps
// the steps disjoint and their phases nested.
void AddStepSpans(const std::vector<StepRecord>& steps, ChromeTrace* trace) {
  const size_t n = std::min(steps.size(), kMaxTraceSteps);
  int64_t floor = std::numeric_limits<int64_t>::min();
  for (size_t i = 0; i < n; ++i) {
    const StepRecord& r = steps[i];
    const int64_t begin = std::max(r.begin_unix_us, floor);
    int64_t end = begin + RoundUs(r.wall_ms);
    if (i + 1 < steps.size()) end = std::min(end, std::max(begin, steps[i + 1].begin_unix_us));
    trace->Span("step", "step", kTrainTid, begin, end - begin,
                {{"step", static_cast<double>(r.step)},
                 {"global_step", static_cast<double>(r.global_step)},
                 {"loss", r.loss}});
    if (r.overlap) {
      AddOverlappedPhaseSpans(r, begin, end, trace);
    } else {
      AddPhaseSpans(r, begin, end, trace);
    }
    floor = end;
  }
  AddInflightSpans(steps, n, trace);
}

// RPCs to one peer overlap (a push-pull is one RPC per chunk, all in flight at once), so they
// are async spans, not spans on a thread: one id each, named after the peer ("rpc ps-0", the
// track group Perfetto draws them in), the method in their args.
void AddRpcSpans(const std::vector<RpcSpan>& spans, ChromeTrace* trace) {
  uint64_t id = 0;
  for (const RpcSpan& s : spans) {
    trace->AsyncSpan(absl::StrCat("rpc ", s.peer), "rpc", ++id, s.begin_unix_us, s.duration_us, {},
                     {{"method", s.method}});
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
