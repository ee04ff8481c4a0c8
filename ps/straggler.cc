#include "ps/straggler.h"

#include <algorithm>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "spdlog/spdlog.h"

namespace fulcrum::ps {
namespace {

// Steps kept open at most: older incomplete ones (a worker that left) are forgotten.
constexpr size_t kMaxOpenSteps = 64;

double Median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2.0;
}

}  // namespace

StragglerDetector::StragglerDetector(std::string name, int64_t per_step)
    : name_(std::move(name)), per_step_(per_step) {}

void StragglerDetector::OnAccepted(const std::string& task, int64_t step, int chunks,
                                   absl::Time now) {
  absl::string_view rest = task;
  int worker = -1;
  if (chunks <= 0 || !absl::ConsumePrefix(&rest, "worker:") || !absl::SimpleAtoi(rest, &worker) ||
      worker < 0) {
    return;
  }
  MutexLock lock(&mu_);
  Arrivals& a = open_[step];
  a.last[worker] = std::max(a.last.count(worker) ? a.last[worker] : absl::InfinitePast(), now);
  a.chunks += chunks;
  if (a.chunks >= per_step_) {
    const Arrivals done = std::move(a);
    open_.erase(step);
    Complete(step, done);
  }
  while (open_.size() > kMaxOpenSteps) open_.erase(open_.begin());
}

void StragglerDetector::Complete(int64_t step, const Arrivals& arrivals) {
  if (arrivals.last.size() < 2) return;  // one contributor: nobody to wait for
  Outcome o;
  o.done = absl::InfinitePast();
  absl::Time second = absl::InfinitePast();  // the arrival before the last
  for (const auto& [worker, t] : arrivals.last) {
    if (t > o.done) {
      second = o.done;
      o.done = t;
      o.last_worker = worker;
    } else if (t > second) {
      second = t;
    }
  }
  o.lead_ms = absl::ToDoubleMilliseconds(o.done - second);
  window_.push_back(o);
  while (window_.size() > static_cast<size_t>(kWindow)) window_.pop_front();
  Judge(step);
}

void StragglerDetector::Judge(int64_t step) {
  std::map<int, std::vector<double>> leads;  // by last worker
  std::vector<double> intervals;
  for (size_t i = 0; i < window_.size(); ++i) {
    leads[window_[i].last_worker].push_back(window_[i].lead_ms);
    if (i > 0) {
      intervals.push_back(absl::ToDoubleMilliseconds(window_[i].done - window_[i - 1].done));
    }
  }
  int named = -1;
  double held_back = 0.0;
  for (const auto& [worker, w_leads] : leads) {
    const double lead = Median(w_leads);
    if (static_cast<int>(w_leads.size()) >= kMinLast && lead >= kMinLeadMs &&
        lead >= kMinLeadShare * Median(intervals)) {
      named = worker;
      held_back = lead;
    }
  }
  if (named != current_.worker) {
    if (named >= 0) {
      spdlog::warn(
          "{}: worker:{} holds the sync steps back: its gradients came last in {} of the last {} "
          "steps, a median {:.1f} ms after the others' (step {})",
          name_, named, leads[named].size(), window_.size(), held_back, step);
    } else {
      spdlog::info("{}: worker:{} no longer holds the sync steps back (step {})", name_,
                   current_.worker, step);
    }
    current_.since_step = named >= 0 ? step : -1;
  }
  current_.worker = named;
  current_.held_back_ms = held_back;
  if (named >= 0) ++current_.steps_named;
}

Straggler StragglerDetector::Current() const {
  MutexLock lock(&mu_);
  return current_;
}

}  // namespace fulcrum::ps
