#include "profiler/chrome_trace.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/files.h"
#include "nlohmann/json.hpp"

namespace fulcrum::profiler {
namespace {

using nlohmann::json;

// Serializes one event. Names come from peers and flags, so invalid UTF-8 is replaced rather
// than left to throw out of a profiler call.
std::string Dump(const json& event) {
  return event.dump(-1, ' ', /*ensure_ascii=*/false, json::error_handler_t::replace);
}

// JSON has no NaN or infinity (nlohmann writes null, which viewers reject as a counter value),
// so a non-finite sample is left out of its event instead.
json FiniteValues(const std::map<std::string, double>& values) {
  json out = json::object();
  for (const auto& [key, value] : values) {
    if (std::isfinite(value)) out[key] = value;
  }
  return out;
}

json Metadata(const char* kind, int pid, int tid, const std::string& name) {
  return {{"name", kind}, {"ph", "M"}, {"pid", pid}, {"tid", tid}, {"args", {{"name", name}}}};
}

}  // namespace

ChromeTrace::ChromeTrace(int pid, std::string process_name)
    : pid_(pid), process_name_(std::move(process_name)) {
  events_.push_back(Dump(Metadata("process_name", pid_, 0, process_name_)));
}

void ChromeTrace::NameThread(int tid, const std::string& name) {
  std::string event = Dump(Metadata("thread_name", pid_, tid, name));
  MutexLock lock(&mu_);
  events_.push_back(std::move(event));
}

void ChromeTrace::Span(const std::string& name, const std::string& category, int tid,
                       int64_t begin_us, int64_t dur_us,
                       const std::map<std::string, double>& args) {
  // Built outside the lock so concurrent threads only contend for the push_back.
  std::string event = Dump({{"name", name},
                            {"cat", category},
                            {"ph", "X"},
                            {"ts", begin_us},
                            {"dur", dur_us},
                            {"pid", pid_},
                            {"tid", tid},
                            {"args", FiniteValues(args)}});
  MutexLock lock(&mu_);
  events_.push_back(std::move(event));
}

void ChromeTrace::AsyncSpan(const std::string& name, const std::string& category, uint64_t id,
                            int64_t begin_us, int64_t dur_us,
                            const std::map<std::string, double>& args,
                            const std::map<std::string, std::string>& labels) {
  json begin_args = FiniteValues(args);
  for (const auto& [key, value] : labels) begin_args[key] = value;
  const json id2 = {{"local", absl::StrCat("0x", absl::Hex(id))}};
  std::string begin = Dump({{"name", name},
                            {"cat", category},
                            {"ph", "b"},
                            {"ts", begin_us},
                            {"pid", pid_},
                            {"id2", id2},
                            {"args", std::move(begin_args)}});
  std::string end = Dump({{"name", name},
                          {"cat", category},
                          {"ph", "e"},
                          {"ts", begin_us + std::max<int64_t>(dur_us, 0)},
                          {"pid", pid_},
                          {"id2", id2}});
  MutexLock lock(&mu_);
  events_.push_back(std::move(begin));
  events_.push_back(std::move(end));
}

void ChromeTrace::Counter(const std::string& name, int64_t ts_us,
                          const std::map<std::string, double>& series) {
  std::string event = Dump(
      {{"name", name}, {"ph", "C"}, {"ts", ts_us}, {"pid", pid_}, {"args", FiniteValues(series)}});
  MutexLock lock(&mu_);
  events_.push_back(std::move(event));
}

size_t ChromeTrace::num_events() const {
  MutexLock lock(&mu_);
  return events_.size();
}

std::string ChromeTrace::ToJson() const {
  // Events are kept serialized (compact, and the header needs no JSON type); the document is
  // rebuilt from them with the parser so its text is nlohmann's, never spliced by hand.
  json events = json::array();
  {
    MutexLock lock(&mu_);
    events.get_ref<json::array_t&>().reserve(events_.size());
    for (const std::string& event : events_) events.push_back(json::parse(event));
  }
  const json trace = {{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}};
  return Dump(trace);
}

absl::Status ChromeTrace::Write(const std::string& path) const {
  return WriteFileAtomically(path, ToJson());
}

}  // namespace fulcrum::profiler
