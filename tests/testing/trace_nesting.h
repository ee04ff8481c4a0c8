// tests: the trace-event nesting rule Perfetto's importer enforces, checked strictly on a
// Chrome trace (JSON object format). On every thread track (pid, tid) the "X" slices and the
// "B"/"E" pairs must nest or be disjoint (a slice that starts inside another and ends after
// it is dropped by Perfetto); every "B" needs its "E"; the async "b"/"e" events of one
// (pid, cat, name, id) must balance and nest likewise. Returns one line per violation.
// Thread-safety: pure functions.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace fulcrum::testing {

struct TraceSlice {
  int64_t begin = 0;
  int64_t end = 0;
  std::string name;
};

// Slices that start inside an earlier one and end after it; `track` names them.
inline void CheckSlicesNest(std::vector<TraceSlice> slices, const std::string& track,
                            std::vector<std::string>* violations) {
  std::stable_sort(slices.begin(), slices.end(), [](const TraceSlice& a, const TraceSlice& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end > b.end;
  });
  std::vector<const TraceSlice*> open;
  for (const TraceSlice& s : slices) {
    while (!open.empty() && open.back()->end <= s.begin) open.pop_back();
    if (!open.empty() && s.end > open.back()->end) {
      violations->push_back(absl::StrCat(track, ": ", s.name, " [", s.begin, ", ", s.end,
                                         ") overhangs ", open.back()->name, " [",
                                         open.back()->begin, ", ", open.back()->end, ")"));
    }
    open.push_back(&s);
  }
}

// The async id of a "b"/"e" event: "id", or id2's "local"/"global" (process-local ones are
// told apart from global ones).
inline std::string AsyncId(const nlohmann::json& e) {
  if (e.contains("id")) return e["id"].dump();
  if (e.contains("id2") && e["id2"].contains("local")) return "local:" + e["id2"]["local"].dump();
  if (e.contains("id2") && e["id2"].contains("global")) return e["id2"]["global"].dump();
  return "";
}

// Pairs begin/end events of one track in time order (file order among equal times); an end
// with no open begin, and a begin never ended, are violations.
inline std::vector<TraceSlice> PairBeginEnd(std::vector<const nlohmann::json*> events,
                                            char begin_ph, const std::string& track,
                                            std::vector<std::string>* violations) {
  std::stable_sort(events.begin(), events.end(),
                   [](const nlohmann::json* a, const nlohmann::json* b) {
                     return (*a)["ts"].get<int64_t>() < (*b)["ts"].get<int64_t>();
                   });
  std::vector<TraceSlice> slices, open;
  for (const nlohmann::json* e : events) {
    const int64_t ts = (*e)["ts"].get<int64_t>();
    if ((*e)["ph"].get<std::string>()[0] == begin_ph) {
      open.push_back({ts, ts, e->value("name", "")});
    } else if (open.empty()) {
      violations->push_back(absl::StrCat(track, ": end at ", ts, " with no begin"));
    } else {
      open.back().end = ts;
      slices.push_back(open.back());
      open.pop_back();
    }
  }
  for (const TraceSlice& s : open) {
    violations->push_back(absl::StrCat(track, ": ", s.name, " begun at ", s.begin, " never ends"));
  }
  return slices;
}

// Every violation of the nesting rule in `trace` ({"traceEvents": [...]}); also events whose
// ts/dur are not integers (the merged files' times are whole µs) or whose dur is negative.
inline std::vector<std::string> NestingViolations(const nlohmann::json& trace) {
  std::vector<std::string> violations;
  std::map<std::pair<int64_t, int64_t>, std::vector<TraceSlice>> thread_slices;
  std::map<std::pair<int64_t, int64_t>, std::vector<const nlohmann::json*>> thread_be;
  std::map<std::tuple<int64_t, std::string, std::string, std::string>,
           std::vector<const nlohmann::json*>>
      async;
  for (const nlohmann::json& e : trace.at("traceEvents")) {
    const std::string ph = e.value("ph", "");
    if (ph == "M" || ph == "C") continue;
    if (!e.contains("ts") || !e["ts"].is_number_integer()) {
      violations.push_back(absl::StrCat("no integer ts: ", e.dump()));
      continue;
    }
    const int64_t pid = e.value("pid", int64_t{0});
    const int64_t tid = e.value("tid", int64_t{0});
    const int64_t ts = e["ts"].get<int64_t>();
    if (ph == "X") {
      if (!e.contains("dur") || !e["dur"].is_number_integer() || e["dur"].get<int64_t>() < 0) {
        violations.push_back(absl::StrCat("X without a whole, non-negative dur: ", e.dump()));
        continue;
      }
      thread_slices[{pid, tid}].push_back({ts, ts + e["dur"].get<int64_t>(), e.value("name", "")});
    } else if (ph == "B" || ph == "E") {
      thread_be[{pid, tid}].push_back(&e);
    } else if (ph == "b" || ph == "e") {
      const std::string id = AsyncId(e);
      if (id.empty()) violations.push_back(absl::StrCat("async event without an id: ", e.dump()));
      async[{pid, e.value("cat", ""), e.value("name", ""), id}].push_back(&e);
    }
  }
  for (auto& [key, events] : thread_be) {
    const std::string track = absl::StrCat("pid ", key.first, " tid ", key.second);
    for (TraceSlice& s : PairBeginEnd(events, 'B', track, &violations)) {
      thread_slices[key].push_back(s);
    }
  }
  for (auto& [key, slices] : thread_slices) {
    CheckSlicesNest(std::move(slices), absl::StrCat("pid ", key.first, " tid ", key.second),
                    &violations);
  }
  for (auto& [key, events] : async) {
    const auto& [pid, cat, name, id] = key;
    const std::string track = absl::StrCat("pid ", pid, " async ", cat, "/", name, " id ", id);
    CheckSlicesNest(PairBeginEnd(events, 'b', track, &violations), track, &violations);
  }
  return violations;
}

}  // namespace fulcrum::testing
