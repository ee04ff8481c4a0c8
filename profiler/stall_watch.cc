#include "profiler/stall_watch.h"

#include <algorithm>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "base/thread_name.h"
#include "spdlog/spdlog.h"

namespace fulcrum::profiler {
namespace {

// The per-step times the median is taken over.
constexpr size_t kStepHistory = 64;

// What an episode's description says the task does, without the figures that grow.
std::string Kind(const std::string& what) {
  for (const char* kind : {"no heartbeat", "waiting for", "own computation", "not answered"}) {
    if (what.find(kind) != std::string::npos) return kind;
  }
  return what;
}

}  // namespace

std::string WatchSeconds(absl::Duration d) {
  return absl::StrFormat("%.1f s", absl::ToDoubleSeconds(d));
}

StallWatch::StallWatch(Look look, Options options)
    : look_(std::move(look)), options_(std::move(options)), thread_([this] { Loop(); }) {}

StallWatch::~StallWatch() {
  {
    MutexLock lock(&mu_);
    done_ = true;
  }
  cv_.SignalAll();
  thread_.join();
}

void StallWatch::Loop() {
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

void StallWatch::Check(absl::Time now) {
  look_(*this, now);
  if (!options_.on_stuck) return;
  std::vector<std::pair<std::string, double>> stuck;
  {
    MutexLock lock(&mu_);
    for (const auto& [task, index] : open_) {
      stuck.emplace_back(task, absl::ToDoubleSeconds(now - episodes_[index].start));
    }
  }
  for (const auto& [task, seconds] : stuck) options_.on_stuck(task, seconds);
}

absl::Duration StallWatch::ThresholdLocked() const {
  if (step_seconds_.empty()) return options_.min_interval;
  std::vector<double> sorted = step_seconds_;
  std::nth_element(sorted.begin(), sorted.begin() + sorted.size() / 2, sorted.end());
  return std::max(options_.min_interval, absl::Seconds(5 * sorted[sorted.size() / 2]));
}

absl::Duration StallWatch::Threshold() const {
  MutexLock lock(&mu_);
  return ThresholdLocked();
}

absl::Duration StallWatch::Progress(const std::string& task, int64_t step, absl::Time now) {
  bool moved = false;
  {
    MutexLock lock(&mu_);
    Position& p = positions_[task];
    if (step == p.step) return now - p.since;
    if (p.step >= 0 && step > p.step) {
      step_seconds_.push_back(absl::ToDoubleSeconds(now - p.since) /
                              static_cast<double>(step - p.step));
      if (step_seconds_.size() > kStepHistory) step_seconds_.erase(step_seconds_.begin());
    }
    p = {step, now};
    moved = open_.contains(task);
  }
  if (moved) Moved(task, now);
  return absl::ZeroDuration();
}

void StallWatch::Stuck(const std::string& task, const std::string& what, absl::Time since,
                       absl::Time now) {
  MutexLock lock(&mu_);
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
               what, WatchSeconds(ThresholdLocked()));
}

void StallWatch::Moved(const std::string& task, absl::Time now) {
  {
    MutexLock lock(&mu_);
    if (!open_.contains(task)) return;
    ClearLocked(task, now);
  }
  if (options_.on_stuck) options_.on_stuck(task, 0);
}

void StallWatch::ClearLocked(const std::string& task, absl::Time now) {
  auto it = open_.find(task);
  Episode& e = episodes_[it->second];
  e.ongoing = false;
  e.last = now;
  spdlog::info("watchdog: {} moves again after {}", task, WatchSeconds(now - e.start));
  open_.erase(it);
}

std::vector<std::string> StallWatch::StuckTasks() const {
  MutexLock lock(&mu_);
  std::vector<std::string> out;
  for (const auto& [task, index] : open_) out.push_back(task);
  return out;
}

nlohmann::json StallWatch::Report() const {
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

}  // namespace fulcrum::profiler
