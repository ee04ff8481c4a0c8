#include "chief/watchdog.h"

#include <algorithm>
#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "base/thread_name.h"
#include "spdlog/spdlog.h"

namespace fulcrum::chief {
namespace {

// A live worker beats every second: this much silence means it is stopped or hung.
constexpr absl::Duration kSilent = absl::Seconds(3);
// The per-step times the median is taken over.
constexpr size_t kStepHistory = 64;

std::string Seconds(absl::Duration d) { return absl::StrFormat("%.1f s", absl::ToDoubleSeconds(d)); }

// What an episode's description says the task does, without the figures that grow.
std::string Kind(const std::string& what) {
  for (const char* kind : {"no heartbeat", "waiting for", "own computation", "not answered"}) {
    if (what.find(kind) != std::string::npos) return kind;
  }
  return what;
}

}  // namespace

Watchdog::Watchdog(const Coordinator* coordinator, const runtime::CallTracker* chief_calls,
                   Options options)
    : coordinator_(coordinator),
      chief_calls_(chief_calls),
      options_(std::move(options)),
      thread_([this] { Loop(); }) {}

Watchdog::~Watchdog() {
  {
    MutexLock lock(&mu_);
    done_ = true;
  }
  cv_.SignalAll();
  thread_.join();
}

void Watchdog::Loop() {
  SetCurrentThreadName("fulcrum-watchdog");
  while (true) {
    {
      MutexLock lock(&mu_);
      const absl::Time until = absl::Now() + options_.poll;
      while (!done_ && cv_.WaitUntil(&mu_, until)) {
      }
      if (done_) return;
    }
    Check(absl::Now());
  }
}

absl::Duration Watchdog::ThresholdLocked() const {
  if (step_seconds_.empty()) return options_.min_interval;
  std::vector<double> sorted = step_seconds_;
  std::nth_element(sorted.begin(), sorted.begin() + sorted.size() / 2, sorted.end());
  return std::max(options_.min_interval, absl::Seconds(5 * sorted[sorted.size() / 2]));
}

absl::Duration Watchdog::Threshold() const {
  MutexLock lock(&mu_);
  return ThresholdLocked();
}

void Watchdog::Check(absl::Time now) {
  const std::vector<Coordinator::WorkerView> workers = coordinator_->Workers();
  const std::optional<runtime::CallTracker::InFlight> chief_call = chief_calls_->Oldest();
  MutexLock lock(&mu_);
  progress_.resize(workers.size());
  const absl::Duration threshold = ThresholdLocked();
  for (size_t w = 0; w < workers.size(); ++w) {
    const Coordinator::WorkerView& v = workers[w];
    const std::string task = absl::StrCat("worker:", w);
    Progress& p = progress_[w];
    if (v.done || v.last_seen == absl::InfinitePast()) {  // finished, or not heard from yet
      Clear(task, now);
      continue;
    }
    if (v.local_step != p.step) {
      if (p.step >= 0 && v.local_step > p.step) {
        step_seconds_.push_back(absl::ToDoubleSeconds(now - p.since) /
                                static_cast<double>(v.local_step - p.step));
        if (step_seconds_.size() > kStepHistory) step_seconds_.erase(step_seconds_.begin());
      }
      p = {v.local_step, now};
      Clear(task, now);
      continue;
    }
    if (now - p.since <= threshold) continue;
    std::string what = absl::StrCat("stuck at local step ", v.local_step, " for ",
                                    Seconds(now - p.since), ", ");
    if (now - v.last_seen > kSilent) {
      absl::StrAppend(&what, "no heartbeat for ", Seconds(now - v.last_seen),
                      " (the process is stopped, e.g. SIGSTOP, or hung)");
    } else if (!v.waiting_for.empty()) {
      absl::StrAppend(&what, "waiting for ", v.waiting_for, " for ",
                      Seconds(absl::Milliseconds(v.waiting_ms)));
    } else {
      absl::StrAppend(&what, "in its own computation (no call in flight)");
    }
    Note(task, what, p.since, now);
  }
  // A ps: the chief's own oldest call to it (a Stats, every poll) that has not come back.
  std::string stuck_ps;
  if (chief_call && chief_call->age > threshold) {
    const size_t on = chief_call->what.rfind(" on ");
    stuck_ps = on == std::string::npos ? chief_call->what : chief_call->what.substr(on + 4);
    Note(stuck_ps,
         absl::StrCat("has not answered the chief's ", chief_call->what.substr(0, on), " for ",
                      Seconds(chief_call->age)),
         now - chief_call->age, now);
  }
  for (const auto& [task, index] : std::map<std::string, size_t>(open_)) {
    if (absl::StartsWith(task, "ps:") && task != stuck_ps) Clear(task, now);
  }
  if (options_.on_stuck) {
    for (const auto& [task, index] : open_) {
      options_.on_stuck(task, absl::ToDoubleSeconds(now - episodes_[index].start));
    }
  }
}

void Watchdog::Note(const std::string& task, const std::string& what, absl::Time since,
                    absl::Time now) {
  if (auto it = open_.find(task); it != open_.end()) {
    Episode& e = episodes_[it->second];
    // Said again when its kind changes (a waiting worker that stops beating), not as it ages.
    const bool changed = Kind(e.what) != Kind(what);
    e.what = what;
    e.last = now;
    if (changed) spdlog::warn("watchdog: {} {}", task, what);
    return;
  }
  open_[task] = episodes_.size();
  episodes_.push_back({task, what, since, now, true});
  spdlog::warn("watchdog: {} {} (threshold {} = max(5 x the median step, --watchdog_secs))", task,
               what, Seconds(ThresholdLocked()));
}

void Watchdog::Clear(const std::string& task, absl::Time now) {
  auto it = open_.find(task);
  if (it == open_.end()) return;
  Episode& e = episodes_[it->second];
  e.ongoing = false;
  e.last = now;
  spdlog::info("watchdog: {} moves again after {}", task, Seconds(now - e.start));
  open_.erase(it);
  if (options_.on_stuck) options_.on_stuck(task, 0);
}

nlohmann::json Watchdog::Report() const {
  MutexLock lock(&mu_);
  nlohmann::json episodes = nlohmann::json::array();
  for (const Episode& e : episodes_) {
    episodes.push_back({{"task", e.task},
                        {"what", e.what},
                        {"start_unix_s", absl::ToDoubleSeconds(e.start - absl::UnixEpoch())},
                        {"seconds", absl::ToDoubleSeconds(e.last - e.start)},
                        {"ongoing", e.ongoing}});
  }
  return {{"threshold_seconds", absl::ToDoubleSeconds(ThresholdLocked())},
          {"episodes", std::move(episodes)}};
}

}  // namespace fulcrum::chief
