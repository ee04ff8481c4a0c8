// chief: the chief task's parts, internal to this library (its interface is RunChief,
// chief/chief_task.h). One Chief object runs the job (its evaluations are an Evaluator's,
// chief/evaluator.h; its workers a WorkerRoster's, chief/worker_roster.h; a lost ps's recovery
// a PsRecovery's, chief/ps_recovery.h); its methods live in three files:
// chief_task.cc (preparing, starting, training and ending the run), chief_monitor.cc (watching
// it: progress, evaluations, failed, lost and leaving tasks, ps recovery) and chief_report.cc
// (report.json, report.html, run_trace.json).
// Thread-safety: one thread, the chief's run loop.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "chief/checkpoints.h"
#include "chief/chief_task.h"
#include "chief/coordinator.h"
#include "chief/evaluator.h"
#include "chief/grpc_coordinator_service.h"
#include "chief/ps_recovery.h"
#include "chief/ps_tasks.h"
#include "chief/watchdog.h"
#include "chief/worker_roster.h"
#include "data/dataset_types.h"
#include "grpcpp/server.h"
#include "models/model.h"
#include "nlohmann/json.hpp"
#include "ops/cpu/thread_pool.h"
#include "ops/tensor.h"
#include "profiler/profiler.h"
#include "proto/ps.pb.h"
#include "runtime/cluster/placement.h"
#include "runtime/config/flags.h"

namespace fulcrum::chief {

using runtime::ClusterOptions;
using runtime::TrainingOptions;

// How often the monitor loop polls the ps tasks' global step.
inline constexpr absl::Duration kMonitorPoll = absl::Milliseconds(20);
// At the end of a run, how long a worker may be silent before it counts as dead.
inline constexpr absl::Duration kEndSilence = absl::Seconds(5);
// How often the wait for registrations is logged.
inline constexpr absl::Duration kLogEvery = absl::Seconds(5);

// "worker:0, worker:2" for indices {0, 2} of `job`.
std::string Join(const std::vector<int>& indices, const char* job);

// Everything the chief owns during a run.
class Chief {
 public:
  Chief(const TrainingOptions& t, const ClusterOptions& c, const runtime::ProfileFlags& profile,
        const ChiefHooks& hooks)
      : t_(t), c_(c), profile_(profile), hooks_(hooks), pool_(t.threads) {}

  absl::Status Run();

 private:
  absl::Status Prepare();
  // Serves the coordinator on this task's address.
  absl::Status StartCoordinator();
  // Reaches the ps tasks, creates the variables, waits for the workers, starts and watches
  // the run until it should stop (OK, with stop_reason_) or fails.
  absl::Status Train();
  // Creates every ps's variables. Adopting a running job, the same call checks that each ps
  // holds this chief's definition (a repeat is a no-op) and a ps that holds nothing (it
  // restarted meanwhile) is created held until restored; their indices go to *restarted.
  absl::Status CreateVariables(std::vector<int>* restarted);
  // Restores the newest intact checkpoint of --checkpoint_dir (a resumed job), if any, when
  // `restore`; sets up the checkpoints either way.
  absl::Status RestoreCheckpoint(bool restore);
  // A restarted chief: asks each ps (briefly) whether it already holds a job's variables;
  // if one does, sets adopted_ (its run id and folder), and the chief takes that job over
  // instead of starting a new one.
  void FindRunningJob();
  // Saves a checkpoint now (the run goes on, or `stopped`); see chief/checkpoints.h.
  absl::Status SaveCheckpoint(int64_t step, bool stopped);
  absl::Status WaitForWorkers(absl::Time deadline);
  // The error of a failed worker in this process (ChiefHooks), as the chief's; OK otherwise.
  absl::Status LocalWorkerStatus() const;
  absl::Status Monitor();
  // The last poll lost a ps (`cause`): its replica is promoted (false), or every ps is
  // restored from the newest checkpoint (true: the global step went back), or the error
  // that ends the run (no checkpoints, or the recovery failed).
  absl::StatusOr<bool> OnPsLost(const absl::Status& cause);
  // A ps said it is leaving (a signal): with checkpoints, one is saved at once for it (it
  // leaves after it, and PsRecovery::Restore restores it once it is back); without, the run ends
  // here as failed, naming it. OK too when this chief was signalled itself (Ctrl-C on the cluster).
  absl::Status OnPsLeaving(int64_t step);
  // Pulls every variable (a lost ps replaced by its replica first) and evaluates them.
  absl::StatusOr<Eval> Evaluate(const char* when);
  // After Train with the ps tasks reached: stops every task, evaluates once more, gathers
  // the summaries, shuts the ps tasks down and writes the report (when `status` is OK).
  absl::Status Finish(absl::Status status);
  // Waits for the workers' summaries (a failed run's too: the report keeps what the
  // survivors recorded), but not for dead workers, which send none; keeps calling the ps
  // tasks meanwhile so that they do not take the chief for dead. `ok`: the run succeeded.
  void WaitForSummaries(bool ok);
  absl::Status WriteReport(const std::string& stop_reason);
  // The what-if predictions (chief/whatif.h) of a report with its cluster tables, or why not.
  void AddWhatIf(nlohmann::json* report) const;
  // The watchdog from the start of training to its end (Finish stops it, keeping its report).
  void StartWatchdog();
  void StopWatchdog();
  nlohmann::json RunJson(const std::string& stop_reason) const;
  // RunJson's parts: the replica set and promotions (null without --replicate_shards), the
  // run's outcome (final evaluation, times, examples/sec, every evaluation) and the
  // checkpoints (null without --checkpoint_dir).
  nlohmann::json ReplicationJson() const;
  void AddResultJson(nlohmann::json* out) const;
  nlohmann::json CheckpointJson() const;

  const TrainingOptions& t_;
  const ClusterOptions& c_;
  const runtime::ProfileFlags& profile_;
  const ChiefHooks& hooks_;
  ops::ThreadPool pool_;
  std::unique_ptr<profiler::Profiler> prof_;
  std::vector<std::string> ps_summaries_;  // by ps index; "" when a ps gave none
  WorkerRoster roster_{c_};                // which workers are still in the run
  bool failed_ = false;                    // the run ended in an error (the report says which)
  absl::Time process_start_ = absl::Now();
  absl::Time train_start_;
  absl::Time train_end_;
  int64_t train_steps_ = 0;
  std::unique_ptr<Evaluator> evaluator_;                // the test set, the model, every evaluation
  std::vector<runtime::VariableInfo> variable_infos_;   // model order, as placed
  std::vector<pb::CreateVariablesRequest> shard_defs_;  // by ps index
  std::unique_ptr<Checkpointer> checkpointer_;
  std::optional<Restored> restored_;  // what a resumed job started from
  struct Adopted {
    std::string run_id;
    std::string run_dir;
    int64_t at_step = 0;
  };
  std::optional<Adopted> adopted_;  // the running job a restarted chief took over
  int64_t start_step_ = 0;          // the global step training started at
  std::vector<std::string> checkpoint_errors_;
  std::string saved_for_leaving_;  // the leaving ps a checkpoint was saved for
  runtime::Placement placement_;
  std::filesystem::path run_dir_;
  std::string run_id_;
  // Destroyed in reverse: the server before the service and the logic it calls.
  std::unique_ptr<Coordinator> coordinator_;
  std::unique_ptr<GrpcCoordinatorService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<PsTasks> ps_;
  std::unique_ptr<PsRecovery> recovery_;  // made with ps_
  std::unique_ptr<Watchdog> watchdog_;  // while training runs (after ps_: it reads ps_'s calls)
  nlohmann::json watchdog_report_;      // its report, kept when it stops (null: never ran)
  bool ps_reached_ = false;
  std::string stop_reason_;
};

}  // namespace fulcrum::chief
