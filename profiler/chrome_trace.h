// profiler: a Chrome trace-event file (the JSON object format, {"traceEvents": [...]}) that
// Perfetto and chrome://tracing open. Events are collected in memory and written at the end:
// complete spans ("X": steps and their phases, which must nest on their thread), nestable
// async spans ("b"/"e": RPCs, which overlap freely), counters ("C": CPU, memory, network) and
// the process/thread name metadata ("M"). Timestamps are microseconds since the epoch, so traces
// of several tasks (one pid per task) line up when merged.
// Thread-safety: all methods are thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "base/mutex.h"

namespace fulcrum::profiler {

class ChromeTrace {
 public:
  // `pid` identifies the task in a merged trace; `process_name` labels it ("worker-1").
  ChromeTrace(int pid, std::string process_name);

  // Names thread `tid` of this process ("training", "sampler", "rpc").
  void NameThread(int tid, const std::string& name);
  // A span [begin_us, begin_us + dur_us) on thread `tid`; `args` are shown with it.
  void Span(const std::string& name, const std::string& category, int tid, int64_t begin_us,
            int64_t dur_us, const std::map<std::string, double>& args = {});
  // A nestable async span [begin_us, begin_us + dur_us): a "b" and an "e" event with the same
  // `name`, `category` and process-local id (id2.local, so merged tasks never share one).
  // Perfetto draws the async spans of one name in one track group per process; spans of
  // different ids may overlap. `id` must be unique per span within the process.
  void AsyncSpan(const std::string& name, const std::string& category, uint64_t id,
                 int64_t begin_us, int64_t dur_us, const std::map<std::string, double>& args = {},
                 const std::map<std::string, std::string>& labels = {});
  // Counter track `name` with one value per series at `ts_us`.
  void Counter(const std::string& name, int64_t ts_us, const std::map<std::string, double>& series);

  size_t num_events() const;
  // The whole trace as JSON text ({"traceEvents": [...], "displayTimeUnit": "ms"}).
  std::string ToJson() const;
  // Writes ToJson() to `path` atomically.
  absl::Status Write(const std::string& path) const;

 private:
  const int pid_;
  const std::string process_name_;
  mutable Mutex mu_;
  std::vector<std::string> events_ ABSL_GUARDED_BY(mu_);  // each a serialized JSON event object
};

}  // namespace fulcrum::profiler
