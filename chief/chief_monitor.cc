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
                       " (--heartbeat_timeout): global step stuck at ", last_step, " of ",
                       train_steps_, stalest));
    }
  }
}

absl::Status Chief::OnPsLeaving(int64_t step) {
  const std::string& leaving = ps_->leaving();
  if (StopSignal() != 0 || saved_for_leaving_ == leaving) return absl::OkStatus();
  // --replicate_shards: its replica takes over now, as for a dead ps (the leaving ps is
  // fenced by its next forward and leaves).
  if (ps_->replicates() && !ps_->promoted(ps_->leaving_ps()) &&
      recovery_->PromoteLost(absl::UnavailableError(absl::StrCat(leaving, " is leaving the run")),
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
  if (recovery_->PromoteLost(cause, ps_->lost())) return false;
  if (!c_.recovers()) {
    return absl::Status(cause.code(),
                        absl::StrCat(cause.message(),
                                     " (with --checkpoint_dir the chief restores a restarted "
                                     "ps from the newest checkpoint)"));
  }
  FULCRUM_RETURN_IF_ERROR(recovery_->Restore(cause, *checkpointer_));
  saved_for_leaving_.clear();
  roster_.ForgetReleased();  // a restarted ps knows nothing of them: tell every ps again
  return true;
}

}  // namespace fulcrum::chief
