#include "chief/chief_task.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "base/files.h"
#include "base/signals.h"
#include "base/status_macros.h"
#include "chief/checkpoints.h"
#include "chief/chief.h"
#include "chief/coordinator.h"
#include "chief/grpc_coordinator_service.h"
#include "chief/ps_tasks.h"
#include "chief/report.h"
#include "data/load.h"
#include "models/graph_def.h"
#include "nlohmann/json.hpp"
#include "ops/cpu/thread_pool.h"
#include "ops/optimizer.h"
#include "profiler/profiler.h"
#include "runtime/client/grpc_ps_client.h"
#include "runtime/cluster/shard_defs.h"
#include "runtime/config/run_dir.h"
#include "runtime/frames/proto_convert.h"
#include "runtime/frames/wire_frame.h"
#include "runtime/grpc/grpc_server.h"
#include "runtime/grpc/grpc_util.h"
#include "spdlog/spdlog.h"

namespace fulcrum::chief {
namespace {

// The model's graph for TensorBoard's graph tab, as a worker writes it but with the layers
// on the chief (which evaluates them); a graph that cannot be built is logged, not returned.
void SetModelGraph(const models::Model& model, const runtime::Placement& placement,
                   const runtime::TaskConfig& task, profiler::Profiler* prof) {
  absl::StatusOr<pb::tensorflow::GraphDef> graph = models::BuildGraphDef(
      model, models::OnPsTasks(&placement,
                               absl::StrCat("/job:", task.job_name, "/task:", task.task_index)));
  if (!graph.ok()) {
    spdlog::warn("TensorBoard graph: {}; the events file has none", graph.status().ToString());
    return;
  }
  prof->SetGraph(graph->SerializeAsString());
}

}  // namespace

std::string Join(const std::vector<int>& indices, const char* job) {
  std::vector<std::string> names;
  for (int i : indices) names.push_back(absl::StrCat(job, ":", i));
  return absl::StrJoin(names, ", ");
}

absl::Status Chief::Prepare() {
  FULCRUM_ASSIGN_OR_RETURN(evaluator_, Evaluator::Create(t_, c_.target_accuracy, &pool_));
  int64_t train_examples = 0;
  if (t_.train_steps == 0) {  // --epochs: the step count depends on the training set's size
    FULCRUM_ASSIGN_OR_RETURN(data::Dataset train,
                             data::LoadSplit(runtime::DataSource(t_), data::Split::kTrain));
    train_examples = train.size();
  }
  train_steps_ = runtime::GlobalTrainSteps(t_, c_, train_examples);
  for (const auto& v : evaluator_->model().variables()) {
    variable_infos_.push_back({v.name, v.shape, v.initializer});
  }
  FULCRUM_ASSIGN_OR_RETURN(
      placement_,
      runtime::PlaceVariables(variable_infos_, c_.task.cluster.num_tasks(runtime::kPsJob),
                              c_.placement, c_.partition_min_bytes));
  FULCRUM_RETURN_IF_ERROR(runtime::CheckEveryPsHoldsSomething(placement_, c_.partition_min_bytes));

  FindRunningJob();
  if (adopted_) {
    run_id_ = adopted_->run_id;
    run_dir_ = adopted_->run_dir;
    if (!t_.run_dir.empty() && std::filesystem::path(t_.run_dir) != run_dir_) {
      spdlog::warn("--run_dir={} differs from the running job's folder {}: using the job's",
                   t_.run_dir, run_dir_.string());
    }
  } else {
    run_id_ = absl::StrCat(t_.model, "-",
                           absl::FormatTime("%Y%m%d-%H%M%S", absl::Now(), absl::LocalTimeZone()));
    run_dir_ = t_.run_dir.empty() ? std::filesystem::path("runs") / run_id_
                                  : std::filesystem::path(t_.run_dir);
    // The chief owns the run's folder: a new job never replaces a finished run's records
    // unless told. Checked before any task learns the folder (Register) and before this
    // chief's profiler writes into it; an adopted job's folder is its own.
    FULCRUM_RETURN_IF_ERROR(runtime::CheckRunDirReusable(run_dir_, t_.overwrite));
  }
  FULCRUM_RETURN_IF_ERROR(MakeDirs(run_dir_ / c_.task.dir_name(), "--run_dir"));
  return absl::OkStatus();
}

void Chief::FindRunningJob() {
  const runtime::ClusterSpec& cluster = c_.task.cluster;
  for (int p = 0; p < cluster.num_tasks(runtime::kPsJob); ++p) {
    runtime::GrpcPsClient client(absl::StrCat("ps:", p), cluster.address(runtime::kPsJob, p),
                                 c_.security);
    pb::StatsResponse stats;
    // A ps that is not up yet (the usual start) refuses the connection at once.
    if (!client.Stats(&stats, absl::Seconds(2)).ok() || !stats.initialized()) continue;
    adopted_ = Adopted{stats.run_id(), stats.run_dir(), 0};
    spdlog::warn(
        "ps:{} already holds the variables of run {} (a chief before this one started "
        "it): this chief takes that job over",
        p, stats.run_id());
    return;
  }
}

absl::Status Chief::CreateVariables(std::vector<int>* restarted) {
  runtime::ShardDefOptions o;
  o.run_id = run_id_;
  o.run_dir = run_dir_.string();
  o.optimizer = t_.optimizer;
  o.mode = runtime::ModeToProto(c_.mode);
  o.replicas_to_aggregate = c_.replicas_to_aggregate;
  o.num_workers = c_.task.cluster.num_tasks(runtime::kWorkerJob);
  o.staleness = c_.staleness;
  o.staleness_aware_lr = c_.staleness_aware_lr;
  o.chunk_bytes = c_.chunk_bytes;
  o.seed = t_.seed;
  for (int p = 0; p < placement_.num_ps(); ++p) {
    pb::CreateVariablesRequest request =
        runtime::ShardDefinition(placement_, variable_infos_, p, o);
    if (ps_->replicates()) {
      // The replica first, from the same definition (so bit-identical), then the primary
      // that forwards every apply to it.
      FULCRUM_RETURN_IF_ERROR(ps_->CreateReplica(p, request));
      request.set_backup_task(ps_->backup_of(p));
    }
    shard_defs_.push_back(request);
    if (adopted_) {
      pb::StatsResponse stats;
      FULCRUM_RETURN_IF_ERROR(ps_->Stats(p, &stats, c_.step_timeout));
      if (!stats.initialized()) {
        request.set_hold_for_restore(true);
        restarted->push_back(p);
      }
    }
    pb::CreateVariablesResponse response;
    if (absl::Status s = ps_->CreateVariables(p, request, &response); !s.ok()) {
      if (adopted_ && absl::IsFailedPrecondition(s)) {
        return absl::InvalidArgumentError(
            absl::StrCat("chief: cannot take over run ", run_id_, ": ", s.message(),
                         " (start the chief with the flags of the job it takes over)"));
      }
      return s;
    }
    spdlog::info("ps:{} holds {} variable(s), {} bytes, in {} chunk(s)", p,
                 request.variables_size(), response.bytes_held(), response.num_chunks());
  }
  return absl::OkStatus();
}

absl::Status Chief::RestoreCheckpoint(bool restore) {
  CheckpointOptions o;
  o.dir = c_.checkpoint_dir;
  o.every_steps = c_.checkpoint_every_steps;
  o.every = c_.checkpoint_every;
  o.keep = c_.keep_checkpoints;
  o.sync = c_.mode == runtime::SyncMode::kSync;
  o.timeout = c_.step_timeout;
  checkpointer_ = std::make_unique<Checkpointer>(o, ps_.get(), run_id_, t_.model, shard_defs_);
  if (!checkpointer_->enabled()) return absl::OkStatus();
  FULCRUM_RETURN_IF_ERROR(ps_->CheckCheckpointsEnabled(c_.step_timeout));
  if (!restore) return absl::OkStatus();
  FULCRUM_ASSIGN_OR_RETURN(restored_, checkpointer_->RestoreLatest());
  if (restored_) {
    start_step_ = restored_->global_step;
  } else {
    spdlog::info("no checkpoint in {}: training starts from the initial values", c_.checkpoint_dir);
  }
  return absl::OkStatus();
}

absl::Status Chief::SaveCheckpoint(int64_t step, bool stopped) {
  const double seconds = absl::ToDoubleSeconds(absl::Now() - train_start_);
  const double rate = seconds > 0 ? static_cast<double>(step - start_step_) / seconds : 0.0;
  absl::StatusOr<int64_t> saved = checkpointer_->Save(step, rate, stopped, train_steps_);
  if (saved.ok()) return absl::OkStatus();
  // A ps without (or with another) --checkpoint_dir refuses every save: the flags are wrong.
  if (saved.status().code() == absl::StatusCode::kPermissionDenied) {
    return absl::InvalidArgumentError(
        absl::StrCat("checkpoint not saved: ", saved.status().message(),
                     " (give every task the same --checkpoint_dir)"));
  }
  spdlog::error("checkpoint at step {} not saved: {}", step, saved.status().ToString());
  checkpoint_errors_.push_back(std::string(saved.status().message()));
  return absl::OkStatus();
}

absl::StatusOr<Eval> Chief::Evaluate(const char* when) {
  std::vector<ops::Tensor>& values = evaluator_->values();
  runtime::TransferResult pulled;
  absl::Status pull = ps_->PullAll(c_.step_timeout, values, &pulled);
  if (absl::IsUnavailable(pull) && ps_->replicates()) {
    // --replicate_shards: a ps lost under the pull is replaced by its replica, then read.
    const absl::StatusOr<int64_t> polled = ps_->GlobalStep(c_.step_timeout);
    if (!polled.ok() && recovery_->PromoteLost(polled.status(), ps_->lost())) {
      pull = ps_->PullAll(c_.step_timeout, values, &pulled);
    }
  }
  FULCRUM_RETURN_IF_ERROR(pull);
  // The ps tasks keep hearing from the chief while the model runs (ps_ has one caller at a time).
  const absl::Duration ping = std::max(absl::Milliseconds(250), c_.heartbeat_timeout / 4);
  return evaluator_->Evaluate(
      when, pulled.global_step, absl::ToDoubleSeconds(absl::Now() - train_start_), train_steps_,
      ping, [&] { ps_->GlobalStep(std::min(ping, absl::Seconds(5))).status().IgnoreError(); },
      prof_.get());
}

absl::Status Chief::StartCoordinator() {
  coordinator_ =
      std::make_unique<Coordinator>(run_id_, run_dir_.string(), runtime::ConfigFingerprint(t_, c_),
                                    c_.task.cluster.num_tasks(runtime::kWorkerJob));
  service_ =
      std::make_unique<GrpcCoordinatorService>(coordinator_.get(), runtime::CallGuard(c_.security));
  FULCRUM_ASSIGN_OR_RETURN(runtime::StartedServer started,
                           runtime::StartGrpcServer(c_.task.task_name(), c_.task.address(),
                                                    {service_.get()}, c_.security));
  server_ = std::move(started.server);
  spdlog::info("{} listening on {}", c_.task.task_name(), c_.task.address());
  return absl::OkStatus();
}

absl::Status Chief::LocalWorkerStatus() const {
  if (!hooks_.local_worker) return absl::OkStatus();
  const absl::Status s = hooks_.local_worker();
  if (s.ok()) return s;
  return absl::Status(s.code(),
                      absl::StrCat("chief: worker:0 (in this process) failed: ", s.message()));
}

absl::Status Chief::WaitForWorkers(absl::Time deadline) {
  absl::Time next_log = absl::Now();
  while (true) {
    // Short waits, so that a failed worker of this process is seen at once.
    const std::vector<int> missing =
        coordinator_->WaitForWorkers(std::min(deadline, absl::Now() + absl::Seconds(1)));
    if (missing.empty()) return absl::OkStatus();
    FULCRUM_RETURN_IF_ERROR(LocalWorkerStatus());
    // A launcher stopping a failed start (a worker that exited on bad input) or Ctrl-C: stop
    // now rather than at the deadline.
    if (const int signal = StopSignal(); signal != 0) {
      return absl::CancelledError(absl::StrCat("chief: interrupted by ", SignalName(signal),
                                               " while waiting for ", Join(missing, "worker"),
                                               " to register"));
    }
    // A worker refused for its flags will not come back with others: give up at once.
    if (const std::string refused = coordinator_->refused(); !refused.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("chief: ", refused));
    }
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("chief: ", Join(missing, "worker"), " did not register within ",
                       absl::FormatDuration(c_.startup_timeout), " (--startup_timeout)"));
    }
    if (absl::Now() >= next_log) {
      spdlog::info("waiting for {} to register", Join(missing, "worker"));
      next_log = absl::Now() + kLogEvery;
    }
  }
}

absl::Status Chief::Train() {
  const absl::Time startup_deadline = process_start_ + c_.startup_timeout;
  FULCRUM_RETURN_IF_ERROR(ps_->WaitUntilReady(startup_deadline, c_.startup_timeout));
  ps_reached_ = true;
  std::vector<int> restarted;
  FULCRUM_RETURN_IF_ERROR(CreateVariables(&restarted));
  if (adopted_) {
    // The live ps tasks keep their state, unless one restarted while no chief watched.
    FULCRUM_RETURN_IF_ERROR(RestoreCheckpoint(/*restore=*/!restarted.empty()));
    if (!restarted.empty() && !restored_) {
      return absl::FailedPreconditionError(
          absl::StrCat("chief: ", Join(restarted, "ps"), " restarted but ",
                       c_.checkpoint_dir.empty() ? "no --checkpoint_dir was given"
                                                 : c_.checkpoint_dir + " holds no checkpoint",
                       " to restore it from; the job cannot go on"));
    }
    FULCRUM_ASSIGN_OR_RETURN(adopted_->at_step, ps_->GlobalStep(c_.step_timeout));
    start_step_ = adopted_->at_step;
    train_start_ = absl::Now();
    coordinator_->Adopt();
    spdlog::warn("chief: took over run {} at global step {} of {}; the workers go on", run_id_,
                 adopted_->at_step, train_steps_);
    StartWatchdog();
    return Monitor();
  }
  FULCRUM_RETURN_IF_ERROR(RestoreCheckpoint(/*restore=*/true));
  if (checkpointer_->enabled() && !restored_) {
    // ckpt-0: a ps lost before the first periodic save is restored from the initial values.
    if (absl::StatusOr<int64_t> saved = checkpointer_->SaveInitial(); !saved.ok()) {
      return absl::Status(saved.status().code(),
                          absl::StrCat("the initial checkpoint: ", saved.status().message()));
    }
  }
  ps_->Warm(c_.chunk_bytes);
  FULCRUM_RETURN_IF_ERROR(WaitForWorkers(startup_deadline));
  train_start_ = absl::Now();
  coordinator_->Start();
  spdlog::info("all {} task(s) ready: training starts",
               placement_.num_ps() + c_.task.cluster.num_tasks(runtime::kWorkerJob));
  StartWatchdog();
  return Monitor();
}

void Chief::WaitForSummaries(bool ok) {
  // A failed run waits briefly: live workers answer the stop within a heartbeat, the failed
  // ones send nothing.
  const absl::Time deadline =
      absl::Now() + (ok ? c_.step_timeout + absl::Seconds(10) : absl::Seconds(5));
  // At the end a live worker still beats every second: one silent for kEndSilence is gone
  // (killed), and the run does not wait --heartbeat_timeout for it.
  const absl::Duration gone_after = std::min(c_.heartbeat_timeout, kEndSilence);
  std::vector<int> missing;
  while (true) {
    missing = coordinator_->WaitForSummaries(std::min(deadline, absl::Now() + absl::Seconds(1)));
    if (missing.empty() || absl::Now() >= deadline) break;
    const std::vector<int> silent = coordinator_->SilentWorkers(gone_after);
    const bool only_dead_missing = std::all_of(missing.begin(), missing.end(), [&](int w) {
      return std::find(silent.begin(), silent.end(), w) != silent.end();
    });
    if (only_dead_missing) break;
    ps_->GlobalStep(absl::Seconds(1)).status().IgnoreError();
  }
  if (!missing.empty()) {
    spdlog::warn("no summary from {}", Join(missing, "worker"));
    for (const int w : coordinator_->SilentWorkers(gone_after)) roster_.MarkLost(w);
  }
}

void Chief::StartWatchdog() {
  Watchdog::Options o;
  o.min_interval = c_.watchdog_min;
  o.on_stuck = [prof = prof_.get()](const std::string& task, double seconds) {
    prof->RecordWatchdog(task, seconds);
  };
  watchdog_ = std::make_unique<Watchdog>(coordinator_.get(), &ps_->calls(), std::move(o));
}

void Chief::StopWatchdog() {
  if (watchdog_ == nullptr) return;
  watchdog_->Check(absl::Now());  // the tasks as they are at the end
  watchdog_report_ = watchdog_->Report();
  watchdog_.reset();
}

absl::Status Chief::Finish(absl::Status status) {
  StopWatchdog();  // the end's own waits are not stalls
  const std::string stop_reason = status.ok() ? stop_reason_ : std::string(status.message());
  // The workers hear whether the run failed before the ps tasks tell them training ended.
  coordinator_->RequestStop(stop_reason, /*failed=*/!status.ok());
  ps_->StopAll(stop_reason);
  if (status.ok()) {
    spdlog::info("stopping: {}", stop_reason_);
    if (t_.eval) {  // --eval=false: no final evaluation
      absl::StatusOr<Eval> final_eval = Evaluate("final");
      if (!final_eval.ok()) status = final_eval.status();
    }
  }
  // The final checkpoint: the state the ps tasks stopped in, whether the run finished, was
  // interrupted or failed (as long as every ps still answers); none when training never
  // began (a failed start must not leave a checkpoint newer than what it could not restore).
  if (checkpointer_ != nullptr && checkpointer_->enabled() && train_start_ != absl::Time()) {
    absl::StatusOr<int64_t> step = ps_->GlobalStep(c_.step_timeout);
    if (!step.ok()) {
      spdlog::error("no final checkpoint: {}", step.status().ToString());
      checkpoint_errors_.push_back(std::string(step.status().message()));
    } else if (absl::Status s = SaveCheckpoint(*step, /*stopped=*/true); !s.ok() && status.ok()) {
      status = s;
    }
  }
  WaitForSummaries(status.ok());
  // The ps tasks answer the shutdown with their summaries, which the report gathers.
  ps_summaries_ = ps_->ShutdownAll(status.ok() ? "run finished" : std::string(status.message()));
  if (!status.ok()) {
    // The run failed; the report still records it (stop_reason is the error, failed: true),
    // and the chief exits with the failure.
    failed_ = true;
    // A failed run never replaces an earlier run's records in a reused --run_dir.
    if (std::filesystem::exists(run_dir_ / "report.json") ||
        runtime::IsFinalSummary(run_dir_ / c_.task.dir_name() / "summary.json")) {
      spdlog::warn("not writing the failed run's report over the earlier one in {}",
                   run_dir_.string());
    } else if (absl::Status s = WriteReport(stop_reason); !s.ok()) {
      spdlog::warn("no report for the failed run: {}", s.ToString());
    } else {
      spdlog::info("report of the failed run: {}", (run_dir_ / "report.json").string());
    }
    return status;
  }
  return WriteReport(stop_reason_);  // it ends with the run's headline
}

absl::Status Chief::Run() {
  runtime::SetKeepaliveTimeout(c_.step_timeout);  // a ps stalled for less is waited for
  c_.security.LogMode(c_.task.task_name());
  FULCRUM_RETURN_IF_ERROR(Prepare());
  FULCRUM_ASSIGN_OR_RETURN(prof_,
                           profiler::Profiler::Start(runtime::ProfilerOptionsFor(
                               profile_, &c_.task.cluster, c_.task.job_name, c_.task.task_index,
                               (run_dir_ / c_.task.dir_name()).string())));
  spdlog::info("run {} in {}: {} {} over {} ps and {} worker(s), {} global steps", run_id_,
               run_dir_.string(), runtime::ModeName(c_.mode), t_.model, placement_.num_ps(),
               c_.task.cluster.num_tasks(runtime::kWorkerJob), train_steps_);
  spdlog::info("placement ({}):\n{}", runtime::PlacementName(c_.placement), placement_.Table());
  SetModelGraph(evaluator_->model(), placement_, c_.task, prof_.get());
  FULCRUM_RETURN_IF_ERROR(StartCoordinator());
  ps_ = std::make_unique<PsTasks>(c_.task.cluster, placement_, c_.chunk_bytes, c_.task.task_name(),
                                  prof_.get(), c_.security, c_.replicate_shards);
  ps_->set_control_timeout(std::max(absl::Seconds(30), c_.step_timeout));
  recovery_ = std::make_unique<PsRecovery>(c_, *ps_, shard_defs_);
  absl::Status status = Train();
  train_end_ = absl::Now();
  if (!ps_reached_) {
    coordinator_->RequestStop(std::string(status.message()), /*failed=*/!status.ok());
    server_->Shutdown(runtime::DeadlineIn(absl::Seconds(1)));
    return status;
  }
  status = Finish(std::move(status));
  server_->Shutdown(runtime::DeadlineIn(absl::Seconds(2)));
  return status;
}

absl::Status RunChief(const TrainingOptions& training, const ClusterOptions& cluster,
                      const runtime::ProfileFlags& profile, const ChiefHooks& hooks) {
  Chief chief(training, cluster, profile, hooks);
  return chief.Run();
}

}  // namespace fulcrum::chief
