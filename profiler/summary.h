// profiler: the keys a task's profile adds to its summary.json (docs/profiler.md lists them),
// built by pure functions from what the profiler recorded: the sampler's series and interface
// totals, the per-peer RPC traffic, the worker's step records and the ps's progress records.
// Nothing here reads a clock, a file or a lock, so the tests feed known records and compare
// the keys. Steady-state figures leave out the first kWarmupSteps steps (records.h).
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/types/span.h"
#include "nlohmann/json.hpp"
#include "profiler/metrics_exporter.h"
#include "profiler/records.h"
#include "profiler/sampler.h"

namespace fulcrum::profiler {

// The summary's time series keep at most this many points (downsampled).
inline constexpr size_t kMaxSeriesPoints = 400;

// Everything the summary keys are built from. The spans view records the caller owns (they
// must outlive the call).
struct SummaryInput {
  double job_seconds = 0.0;           // "Job Execution Time": profiler start to finish
  nlohmann::json system_information;  // "System Information" (host_info.h)
  absl::Span<const SystemSample> samples;
  absl::Span<const InterfaceTotals> interfaces;
  absl::Span<const ConnectionTotals> connections;  // the process's TCP connections
  absl::Span<const RpcTrafficPoint> traffic;
  absl::Span<const StepRecord> steps;     // worker; empty elsewhere
  absl::Span<const PsRecord> ps_records;  // ps; empty elsewhere
  int64_t trace_steps_dropped = 0;
  int64_t trace_rpc_spans_dropped = 0;
};

// Every key of an enabled profile (all of the functions below), as one JSON object; not
// `profile` and `host`, which Profiler::Finish writes with or without a profile.
nlohmann::json SummaryKeys(const SummaryInput& input);

// Process CPU and memory over the sampled time: Touchstone's "Total CPU Usage", "Total CPU
// usage per core", "Total Memory used" and cpu_percent_mean/max, cpu_seconds,
// rss_bytes_mean, peak_rss_bytes. Interval means weight each interval by its length. An
// empty object when there are no samples.
nlohmann::json CpuMemoryKeys(absl::Span<const SystemSample> samples);

// The figures beyond process CPU and memory (docs/profiler.md): cpu_user/system_percent_mean,
// context_switches, io_read/write_bytes_total, thread_cpu (per thread name), host_system (the
// host's CPU split, memory, load, context switches, TCP segments, disk bytes) and gpu_usage. Means
// weight each interval by its length. An empty object when there are no samples.
nlohmann::json BreadthKeys(absl::Span<const SystemSample> samples);

// Interface totals: "Total bytes sent/received over network" (every interface, loopback
// included), network_interfaces, network_loopback_* and network_external_*.
nlohmann::json NetworkKeys(absl::Span<const InterfaceTotals> interfaces);

// Application traffic: rpc_traffic (per peer and method), peer_traffic (per peer, sorted by
// peer), app_bytes_sent/received and rpcs.
nlohmann::json TrafficKeys(absl::Span<const RpcTrafficPoint> traffic);

// A worker's steps: profiled_steps (every recorded step) and, over the steady state (the
// steps after the first kWarmupSteps when there are more), examples_per_sec_within_steps
// (examples over the steps' own wall time), examples_per_sec_of_median_step (batch over the
// median step time), step_phase_p50_ms and
// step_phase_mean_ms (data, pull, forward, backward, push, sync_wait), comm_wait_p50_ms and
// comm_wait_mean_ms (the training thread's waits for the ps tasks), comm_inflight_mean_ms (the
// push-pulls' time in flight) and comm_hidden_fraction (1 - mean wait / mean in flight, in
// [0, 1]; 0 when nothing was in flight). Step-time percentiles
// are not here: the worker's run statistics write step_time_p50_ms/p99_ms (one writer per
// key). An empty object for no steps.
nlohmann::json StepKeys(absl::Span<const StepRecord> steps);

// A ps's progress: apply_ms_total and request_wait_ms_total from the last record; an empty
// object for none.
nlohmann::json PsKeys(absl::Span<const PsRecord> records);

// The `series` key for the chief's report: `samples` (unix_s, cpu_percent, rss_bytes, per
// interface rx/tx bytes/s (an interface missing from a sample reads 0), core_percent (per
// core), host_cpu_busy_percent, host_mem_used_bytes, host_load1) when there are
// samples, `steps` (per window of consecutive steps: end time, examples/sec, mean loss, last
// global step) when there are steps; null when neither. At most `max_points` points (+1:
// the last sample is always kept).
nlohmann::json SeriesKeys(absl::Span<const SystemSample> samples,
                          absl::Span<const StepRecord> steps, size_t max_points = kMaxSeriesPoints);

// Indices of at most `max_points` (+1) rows spread evenly over [0, n), always the last one;
// empty for n = 0. `max_points` > 0.
std::vector<size_t> Downsample(size_t n, size_t max_points);

// Copies every key of `keys` into `*summary` that the caller has not written already; returns
// the keys it had (each summary key has exactly one writer: a collision is a bug, and the
// caller's value is kept).
std::vector<std::string> MergeNewKeys(const nlohmann::json& keys, nlohmann::json* summary);

}  // namespace fulcrum::profiler
