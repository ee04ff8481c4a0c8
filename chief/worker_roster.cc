#include "chief/worker_roster.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/signals.h"
#include "base/status_macros.h"
#include "chief/chief.h"
#include "nlohmann/json.hpp"
#include "spdlog/spdlog.h"

namespace fulcrum::chief {

absl::Status WorkerRoster::OnSilent(const std::vector<int>& silent) {
  if (silent.empty()) return absl::OkStatus();
  // Async training, and sync training with backup workers while enough workers remain, goes
  // on without a dead worker; sync training that needs every worker cannot.
  const int workers = c_.task.cluster.num_tasks(runtime::kWorkerJob);
  const int alive = workers - static_cast<int>(silent.size());
  const bool can_go_on =
      alive > 0 && (c_.mode != runtime::SyncMode::kSync || alive >= c_.replicas_to_aggregate);
  if (!can_go_on) {
    return absl::UnavailableError(absl::StrCat("chief: ", Join(silent, "worker"), " silent for ",
                                               absl::FormatDuration(c_.heartbeat_timeout),
                                               " (--heartbeat_timeout)"));
  }
  for (const int w : silent) {
    if (lost_.insert(w).second) {
      spdlog::warn(
          "chief: worker:{} silent for {} (--heartbeat_timeout): training goes on with the {} "
          "other worker(s)",
          w, absl::FormatDuration(c_.heartbeat_timeout), alive);
    }
  }
  return absl::OkStatus();
}

absl::Status WorkerRoster::ReadSummaries(const std::map<int, std::string>& summaries, int64_t step,
                                         int64_t train_steps) {
  for (const auto& [w, text] : summaries) {
    if (!read_.insert(w).second) continue;  // each summary is parsed once
    const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object()) continue;
    if (!j.value("failed", false)) {
      const std::string why = j.value("stop_reason", std::string());
      // A worker stopped by a signal while this chief was not (not a Ctrl-C on the cluster).
      if (absl::StartsWith(why, "interrupted by") && StopSignal() == 0 && step < train_steps) {
        FULCRUM_RETURN_IF_ERROR(OnWorkerLeft(w, why, step));
      }
      continue;
    }
    const std::string failure =
        absl::StrCat("chief: worker:", w, " failed: ", j.value("error", std::string("?")));
    // A worker that failed on its own (its loss stopped being finite: the model diverged)
    // ends the run at once. One that timed out waiting for a step or a ps is a symptom:
    // the dead or stalled task behind it is named by the checks below.
    const std::string code = j.value("code", std::string());
    if (code != "DEADLINE_EXCEEDED" && code != "UNAVAILABLE") {
      return absl::InternalError(failure);
    }
    if (waited_failure_.empty()) waited_failure_ = failure;
  }
  return absl::OkStatus();
}

absl::Status WorkerRoster::OnWorkerLeft(int w, const std::string& why, int64_t step) {
  lost_.insert(w);
  const int workers = c_.task.cluster.num_tasks(runtime::kWorkerJob);
  const int alive = workers - static_cast<int>(lost_.size());
  const bool sync = c_.mode == runtime::SyncMode::kSync;
  if (alive <= 0 || (sync && alive < c_.replicas_to_aggregate)) {
    return absl::UnavailableError(absl::StrCat(
        "chief: worker:", w, " left the run (", why, ") at global step ", step, " and ",
        alive <= 0
            ? "no worker is left"
            : absl::StrCat("sync training needs ", c_.replicas_to_aggregate,
                           " workers a step (--replicas_to_aggregate), ", alive, " are left"),
        ": the run ends here", c_.recovers() ? " with a final checkpoint" : ""));
  }
  spdlog::warn(
      "chief: worker:{} left the run ({}) at global step {}: training goes on with the {} "
      "other worker(s)",
      w, why, step, alive);
  return absl::OkStatus();
}

bool WorkerRoster::ReleaseGone(const std::map<int, std::string>& summaries, PsTasks& ps) {
  if (c_.mode != runtime::SyncMode::kSsp) return false;
  bool released = false;
  std::map<int, std::string> gone;  // worker -> why
  for (const int w : lost_) {
    gone[w] = absl::StrCat("silent past --heartbeat_timeout=",
                           absl::FormatDuration(c_.heartbeat_timeout));
  }
  for (const auto& [w, text] : summaries) gone.emplace(w, "it reported its summary (done)");
  for (const auto& [w, why] : gone) {
    if (released_.contains(w)) continue;
    const std::string reason = absl::StrCat("worker:", w, ": ", why);
    if (absl::Status s = ps.ReleaseWorkers({w}, reason); !s.ok()) {
      spdlog::warn("chief: the ps tasks were not told to stop waiting for {} (retried): {}", reason,
                   s.ToString());
      return released;
    }
    released_.insert(w);
    released = true;
    spdlog::info("chief: ssp: the ps tasks no longer wait for {}", reason);
  }
  return released;
}

}  // namespace fulcrum::chief
