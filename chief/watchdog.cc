#include "chief/watchdog.h"

#include <optional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace fulcrum::chief {
namespace {

// A live worker beats every second: this much silence means it is stopped or hung.
constexpr absl::Duration kSilent = absl::Seconds(3);

}  // namespace

Watchdog::Watchdog(const Coordinator* coordinator, const runtime::CallTracker* chief_calls,
                   Options options)
    : coordinator_(coordinator),
      chief_calls_(chief_calls),
      watch_([this](profiler::StallWatch& watch, absl::Time now) { Look(watch, now); },
             std::move(options)) {}

void Watchdog::Look(profiler::StallWatch& watch, absl::Time now) const {
  const std::vector<Coordinator::WorkerView> workers = coordinator_->Workers();
  const std::optional<runtime::CallTracker::InFlight> chief_call = chief_calls_->Oldest();
  const absl::Duration threshold = watch.Threshold();
  for (size_t w = 0; w < workers.size(); ++w) {
    const Coordinator::WorkerView& v = workers[w];
    const std::string task = absl::StrCat("worker:", w);
    if (v.done || v.last_seen == absl::InfinitePast()) {  // finished, or not heard from yet
      watch.Moved(task, now);
      continue;
    }
    const absl::Duration at = watch.Progress(task, v.local_step, now);
    if (at <= threshold) continue;
    std::string what = absl::StrCat("stuck at local step ", v.local_step, " for ",
                                    profiler::WatchSeconds(at), ", ");
    if (now - v.last_seen > kSilent) {
      absl::StrAppend(&what, "no heartbeat for ", profiler::WatchSeconds(now - v.last_seen),
                      " (the process is stopped, e.g. SIGSTOP, or hung)");
    } else if (!v.waiting_for.empty()) {
      absl::StrAppend(&what, "waiting for ", v.waiting_for, " for ",
                      profiler::WatchSeconds(absl::Milliseconds(v.waiting_ms)));
    } else {
      absl::StrAppend(&what, "in its own computation (no call in flight)");
    }
    watch.Stuck(task, what, now - at, now);
  }
  // A ps: the chief's own oldest call to it (a Stats, every poll) that has not come back.
  std::string stuck_ps;
  if (chief_call && chief_call->age > threshold) {
    const size_t on = chief_call->what.rfind(" on ");
    stuck_ps = on == std::string::npos ? chief_call->what : chief_call->what.substr(on + 4);
    watch.Stuck(stuck_ps,
                absl::StrCat("has not answered the chief's ", chief_call->what.substr(0, on),
                             " for ", profiler::WatchSeconds(chief_call->age)),
                now - chief_call->age, now);
  }
  for (const std::string& task : watch.StuckTasks()) {
    if (absl::StartsWith(task, "ps:") && task != stuck_ps) watch.Moved(task, now);
  }
}

}  // namespace fulcrum::chief
