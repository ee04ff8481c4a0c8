// chief: watching a run (chief/chief.h): the global step, evaluations, the workers (through the
// roster, chief/worker_roster.h), leaving and lost ps tasks and their recovery from the newest
// checkpoint.
#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/signals.h"
#include "base/status_macros.h"
#include "chief/chief.h"
#include "spdlog/spdlog.h"

namespace fulcrum::chief {

absl::Status Chief::Monitor() {
  int64_t next_eval = c_.eval_every > 0 ? c_.eval_every : train_steps_ + 1;
  int64_t last_step = -1;
  absl::Time last_progress = absl::Now();
  while (true) {
    absl::SleepFor(kMonitorPoll);
    if (const int signal = StopSignal(); signal != 0) {
      // A worker that failed on its own before the signal came failed the run: a launcher
      // stops every task once one fails, and the signal is its consequence, not the cause.
      FULCRUM_RETURN_IF_ERROR(
          roster_.ReadSummaries(coordinator_->summaries(), last_step, train_steps_));
      // Ends the run as at train_steps: workers stop, the final evaluation, every task's
      // summary and the report are written.
      stop_reason_ = absl::StrCat("interrupted by ", SignalName(signal));
      spdlog::warn("chief: {}: stopping the run", stop_reason_);
      return absl::OkStatus();
    }
    FULCRUM_RETURN_IF_ERROR(LocalWorkerStatus());
    absl::StatusOr<int64_t> polled = ps_->GlobalStep(c_.step_timeout);
    if (!polled.ok()) {
      FULCRUM_ASSIGN_OR_RETURN(const bool restored, OnPsLost(polled.status()));
      if (restored) last_step = -1;
      last_progress = absl::Now();
      continue;
    }
    const int64_t step = *polled;
    if (!ps_->leaving().empty()) FULCRUM_RETURN_IF_ERROR(OnPsLeaving(step));
    const absl::Time now = absl::Now();
    if (step > last_step) {
      last_step = step;
      last_progress = now;
    }
    if (step >= next_eval && step < train_steps_) {
      FULCRUM_ASSIGN_OR_RETURN(Eval e, Evaluate("eval at"));
      next_eval = (e.global_step / c_.eval_every + 1) * c_.eval_every;
      if (evaluator_->time_to_target()) {
        stop_reason_ = absl::StrCat("reached target accuracy ", c_.target_accuracy);
        return absl::OkStatus();
      }
    }
    if (step >= train_steps_) {
      stop_reason_ = absl::StrCat("reached train_steps ", train_steps_);
      return absl::OkStatus();
    }
    if (checkpointer_->Due(step, now)) {
      FULCRUM_RETURN_IF_ERROR(SaveCheckpoint(step, /*stopped=*/false));
      last_progress = absl::Now();  // the save's wait is not a stall of the workers
    }
    const std::map<int, std::string> summaries = coordinator_->summaries();
    FULCRUM_RETURN_IF_ERROR(roster_.ReadSummaries(summaries, step, train_steps_));
    if (summaries.size() == static_cast<size_t>(c_.task.cluster.num_tasks(runtime::kWorkerJob))) {
      if (!roster_.waited_failure().empty()) {
        return absl::InternalError(roster_.waited_failure());
      }
      stop_reason_ = "every worker finished";
      return absl::OkStatus();
    }
    FULCRUM_RETURN_IF_ERROR(roster_.OnSilent(coordinator_->SilentWorkers(c_.heartbeat_timeout)));
    // The others were held for a released worker: the stall so far is not theirs.
    if (roster_.ReleaseGone(summaries, *ps_)) last_progress = absl::Now();
    if (now - last_progress > c_.heartbeat_timeout) {
      // A worker that died just after its last heartbeat is not "silent" yet when the step
      // stalls: name the one heard from least recently, the likely cause.
      std::string stalest;
      if (const auto [index, age] = coordinator_->StalestWorker(); index >= 0) {
        stalest =
            absl::StrCat("; worker:", index, " last heard ",
                         absl::FormatDuration(absl::Trunc(age, absl::Milliseconds(100))), " ago");
      }
      return absl::DeadlineExceededError(
          absl::StrCat("chief: no progress for ", absl::FormatDuration(c_.heartbeat_timeout),
                       ": global step stuck at ", last_step, " of ", train_steps_, stalest));
    }
  }
}

absl::Status Chief::OnPsLeaving(int64_t step) {
  const std::string& leaving = ps_->leaving();
  if (StopSignal() != 0 || saved_for_leaving_ == leaving) return absl::OkStatus();
  // --replicate_shards: its replica takes over now, as for a dead ps (the leaving ps is
  // fenced by its next forward and leaves).
  if (ps_->replicates() && !ps_->promoted(ps_->leaving_ps()) &&
      PromoteLost(absl::UnavailableError(absl::StrCat(leaving, " is leaving the run")),
                  ps_->leaving_ps())) {
    saved_for_leaving_ = leaving;
    return absl::OkStatus();
  }
  if (!c_.recovers()) {
    return absl::UnavailableError(absl::StrCat(
        "chief: ", leaving, " is leaving the run at global step ", step,
        "; without --checkpoint_dir its shard cannot be kept, so the run ends here (with "
        "--checkpoint_dir the chief saves a checkpoint and restores the ps once it is back)"));
  }
  spdlog::warn("chief: {} is leaving the run: saving a checkpoint at global step {} for it",
               leaving, step);
  FULCRUM_RETURN_IF_ERROR(SaveCheckpoint(step, /*stopped=*/false));
  saved_for_leaving_ = leaving;
  return absl::OkStatus();
}

absl::StatusOr<bool> Chief::OnPsLost(const absl::Status& cause) {
  if (PromoteLost(cause, ps_->lost())) return false;
  if (!c_.recovers()) {
    return absl::Status(cause.code(),
                        absl::StrCat(cause.message(),
                                     " (with --checkpoint_dir the chief restores a restarted "
                                     "ps from the newest checkpoint)"));
  }
  FULCRUM_RETURN_IF_ERROR(RecoverPs(cause));
  saved_for_leaving_.clear();
  roster_.ForgetReleased();  // a restarted ps knows nothing of them: tell every ps again
  return true;
}

bool Chief::PromoteLost(const absl::Status& cause, int p) {
  if (!ps_->replicates() || p < 0 || ps_->promoted(p)) return false;
  const int b = ps_->backup_of(p);
  const absl::Time start = absl::Now();
  absl::StatusOr<int64_t> step = ps_->Promote(p, std::string(cause.message()));
  if (!step.ok()) {
    spdlog::error("chief: {}; its replica on ps:{} cannot take over: {}",
                  std::string(cause.message()), b, std::string(step.status().message()));
    return false;
  }
  const double ms = absl::ToDoubleMilliseconds(absl::Now() - start);
  spdlog::warn(
      "chief: {}: its replica on ps:{} serves ps:{}'s shard from global step {} on (nothing "
      "rolled back; promoted in {:.1f} ms)",
      std::string(cause.message()), b, p, *step, ms);
  promotions_.push_back({{"shard", absl::StrCat("ps:", p)},
                         {"served_by", absl::StrCat("ps:", b)},
                         {"global_step", *step},
                         {"cause", std::string(cause.message())},
                         {"promote_ms", ms},
                         {"unix_us", absl::ToUnixMicros(absl::Now())}});
  return true;
}

absl::Status Chief::RecoverPs(const absl::Status& cause) {
  const absl::Time start = absl::Now();
  const absl::Time deadline = start + c_.recovery_timeout;
  spdlog::warn(
      "{}: waiting up to {} (--recovery_timeout) for it to answer again (restart it with the "
      "same flags); then every ps is restored from the newest checkpoint in {}",
      std::string(cause.message()), absl::FormatDuration(c_.recovery_timeout), c_.checkpoint_dir);
  const int num_ps = ps_->size();
  std::vector<pb::StatsResponse> stats(static_cast<size_t>(num_ps));
  for (int p = 0; p < num_ps;) {
    if (const int signal = StopSignal(); signal != 0) {
      return absl::CancelledError(absl::StrCat("chief: interrupted by ", SignalName(signal),
                                               " while waiting for ps:", p, " to come back"));
    }
    // Polls every ps (an answer is each live one's sign that the chief is alive).
    absl::Status s;
    for (p = 0; p < num_ps; ++p) {
      s = ps_->Stats(p, &stats[static_cast<size_t>(p)],
                     std::min(absl::Seconds(2), c_.step_timeout));
      if (!s.ok()) break;
    }
    if (p == num_ps) break;
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat("chief: ps:", p, " did not come back within ",
                                                      absl::FormatDuration(c_.recovery_timeout),
                                                      " (--recovery_timeout): ", s.message()));
    }
    absl::SleepFor(absl::Milliseconds(500));
  }
  std::vector<int> restarted;
  for (int p = 0; p < num_ps; ++p) {
    if (!stats[static_cast<size_t>(p)].initialized()) restarted.push_back(p);
  }
  if (restarted.empty()) {
    spdlog::info(
        "chief: every ps answers again with its variables (it was stalled, not "
        "restarted): training goes on");
    return absl::OkStatus();
  }
  for (const int p : restarted) {
    pb::CreateVariablesRequest request = shard_defs_[static_cast<size_t>(p)];
    request.set_hold_for_restore(true);
    pb::CreateVariablesResponse response;
    FULCRUM_RETURN_IF_ERROR(ps_->CreateVariables(p, request, &response));
  }
  FULCRUM_ASSIGN_OR_RETURN(std::optional<Restored> restored, checkpointer_->RestoreLatest());
  if (!restored) {
    return absl::FailedPreconditionError(absl::StrCat(
        "chief: ", Join(restarted, "ps"), " restarted but ", c_.checkpoint_dir,
        " holds no checkpoint to restore it from; the run cannot go on (save earlier with "
        "--checkpoint_every_steps or --checkpoint_every_secs)"));
  }
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  spdlog::warn(
      "chief: {} restarted; every ps restored from {} (global step {}) after {:.1f} s: "
      "training goes on",
      Join(restarted, "ps"), restored->folder, restored->global_step, seconds);
  recoveries_.push_back({{"ps", restarted},
                         {"restored_from", restored->folder},
                         {"restored_step", restored->global_step},
                         {"refused", restored->refused},
                         {"seconds", seconds}});
  return absl::OkStatus();
}

}  // namespace fulcrum::chief
