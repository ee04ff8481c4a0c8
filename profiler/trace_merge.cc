#include "profiler/trace_merge.h"

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "base/files.h"
#include "nlohmann/json.hpp"
#include "profiler/trace_sink.h"

namespace fulcrum::profiler {
namespace {

using nlohmann::json;

// The events of one task's trace file; a message saying why when there are none to take.
absl::StatusOr<json> ReadTaskEvents(const std::filesystem::path& path) {
  absl::StatusOr<std::string> text = ReadFileToString(path);
  if (!text.ok()) {
    return absl::IsNotFound(text.status()) ? absl::NotFoundError("not found") : text.status();
  }
  json trace = json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (trace.is_discarded()) return absl::DataLossError("not JSON (cut short?)");
  if (!trace.is_object() || !trace.contains("traceEvents") || !trace["traceEvents"].is_array()) {
    return absl::DataLossError("no traceEvents array");
  }
  return std::move(trace["traceEvents"]);
}

// Moves the task's events into `out` under `pid`, with one process_name of `name` (the
// file's own is replaced, so a task is one process named after its folder).
size_t AppendTask(json events, int pid, const std::string& name, json* out) {
  out->push_back({{"name", "process_name"},
                  {"ph", "M"},
                  {"pid", pid},
                  {"tid", 0},
                  {"args", {{"name", name}}}});
  size_t n = 1;
  for (json& event : events) {
    if (!event.is_object()) continue;
    if (event.value("ph", "") == "M" && event.value("name", "") == "process_name") continue;
    event["pid"] = pid;
    out->push_back(std::move(event));
    ++n;
  }
  return n;
}

}  // namespace

absl::StatusOr<TraceMergeResult> MergeRunTrace(const std::string& run_dir,
                                               const std::vector<TraceTask>& tasks,
                                               const std::string& out_path) {
  TraceMergeResult result;
  json events = json::array();
  for (const TraceTask& task : tasks) {
    const std::string name = absl::StrCat(task.job, "-", task.task_index);
    absl::StatusOr<json> task_events =
        ReadTaskEvents(std::filesystem::path(run_dir) / name / "trace.json");
    if (!task_events.ok()) {
      result.missing.emplace_back(name, std::string(task_events.status().message()));
      continue;
    }
    result.events +=
        AppendTask(std::move(*task_events), TracePid(task.job, task.task_index), name, &events);
    result.merged.push_back(name);
  }
  if (result.merged.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("no task's trace.json could be read in ", run_dir));
  }
  const json trace = {{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}};
  const std::string text =
      trace.dump(-1, ' ', /*ensure_ascii=*/false, json::error_handler_t::replace);
  if (absl::Status s = WriteFileAtomically(out_path, text); !s.ok()) return s;
  return result;
}

}  // namespace fulcrum::profiler
