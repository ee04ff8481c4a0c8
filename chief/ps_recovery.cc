#include "chief/ps_recovery.h"

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/signals.h"
#include "base/status_macros.h"
#include "chief/chief.h"
#include "spdlog/spdlog.h"

namespace fulcrum::chief {

bool PsRecovery::PromoteLost(const absl::Status& cause, int p) {
  if (!ps_.replicates() || p < 0 || ps_.promoted(p)) return false;
  const int b = ps_.backup_of(p);
  const absl::Time start = absl::Now();
  absl::StatusOr<int64_t> step = ps_.Promote(p, std::string(cause.message()));
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

absl::Status PsRecovery::Restore(const absl::Status& cause, Checkpointer& checkpointer) {
  const absl::Time start = absl::Now();
  const absl::Time deadline = start + c_.recovery_timeout;
  spdlog::warn(
      "{}: waiting up to {} (--recovery_timeout) for it to answer again (restart it with the "
      "same flags); then every ps is restored from the newest checkpoint in {}",
      std::string(cause.message()), absl::FormatDuration(c_.recovery_timeout), c_.checkpoint_dir);
  const int num_ps = ps_.size();
  std::vector<pb::StatsResponse> stats(static_cast<size_t>(num_ps));
  for (int p = 0; p < num_ps;) {
    if (const int signal = StopSignal(); signal != 0) {
      return absl::CancelledError(absl::StrCat("chief: interrupted by ", SignalName(signal),
                                               " while waiting for ps:", p, " to come back"));
    }
    // Polls every ps (an answer is each live one's sign that the chief is alive).
    absl::Status s;
    for (p = 0; p < num_ps; ++p) {
      s = ps_.Stats(p, &stats[static_cast<size_t>(p)], std::min(absl::Seconds(2), c_.step_timeout));
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
    FULCRUM_RETURN_IF_ERROR(ps_.CreateVariables(p, request, &response));
  }
  FULCRUM_ASSIGN_OR_RETURN(std::optional<Restored> restored, checkpointer.RestoreLatest());
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
