#include "chief/chief_task.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "base/files.h"
#include "base/signals.h"
#include "base/status_macros.h"
#include "chief/checkpoints.h"
#include "chief/coordinator.h"
#include "chief/grpc_coordinator_service.h"
#include "chief/ps_tasks.h"
#include "chief/report.h"
#include "chief/report_html.h"
#include "data/load.h"
#include "data/pipeline.h"
#include "models/evaluate.h"
#include "models/registry.h"
#include "nlohmann/json.hpp"
#include "ops/cpu/thread_pool.h"
#include "ops/optimizer.h"
#include "profiler/profiler.h"
#include "profiler/trace_merge.h"
#include "runtime/grpc_ps_client.h"
#include "runtime/grpc_server.h"
#include "runtime/grpc_util.h"
#include "runtime/proto_convert.h"
#include "runtime/run_dir.h"
#include "runtime/shard_defs.h"
#include "runtime/wire_frame.h"
#include "spdlog/spdlog.h"

namespace fulcrum::chief {
namespace {

using runtime::ClusterOptions;
using runtime::TrainingOptions;

// How often the monitor loop polls the ps tasks' global step.
constexpr absl::Duration kMonitorPoll = absl::Milliseconds(20);
// At the end of a run, how long a worker may be silent before it counts as dead.
constexpr absl::Duration kEndSilence = absl::Seconds(5);
// How often the wait for registrations is logged.
constexpr absl::Duration kLogEvery = absl::Seconds(5);

struct Eval {
  int64_t global_step = 0;
  double seconds = 0.0;  // since the start of training
  std::optional<double> accuracy;
  double loss = 0.0;
};

std::string Join(const std::vector<int>& indices, const char* job) {
  std::vector<std::string> names;
  for (int i : indices) names.push_back(absl::StrCat(job, ":", i));
  return absl::StrJoin(names, ", ");
}

// <run_dir>/run_trace.json: every task's trace.json the chief can read there, merged
// (profiler/trace_merge.h). Tasks whose trace is elsewhere (another host's run directory)
// are logged; the run does not fail for its trace.
void WriteRunTrace(const runtime::ClusterSpec& cluster, const std::filesystem::path& run_dir) {
  std::vector<profiler::TraceTask> tasks;
  for (const auto& [job, addresses] : cluster.jobs()) {
    for (int i = 0; i < static_cast<int>(addresses.size()); ++i) tasks.push_back({job, i});
  }
  // Without a chief job, worker 0 runs chief:0 (TensorFlow 1.x's layout), with its own folder;
  // first, as in a spec with a chief.
  if (!cluster.has_chief_job()) tasks.insert(tasks.begin(), {runtime::kChiefJob, 0});
  const std::filesystem::path out = run_dir / "run_trace.json";
  absl::StatusOr<profiler::TraceMergeResult> merged =
      profiler::MergeRunTrace(run_dir.string(), tasks, out.string());
  if (!merged.ok()) {
    spdlog::warn("{} not written: {}", out.string(), merged.status().ToString());
    return;
  }
  for (const auto& [task, why] : merged->missing) {
    spdlog::warn("{}: no trace of {} ({}/trace.json: {})", out.string(), task, task, why);
  }
  spdlog::info("run trace: {} ({} of {} task(s), {} events)", out.string(), merged->merged.size(),
               tasks.size(), merged->events);
}

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
  // ssp mode: tells the ps tasks not to wait any more for the workers that reported their
  // summary (finished or failed) or were lost, once each (again after a ps recovery). A ps
  // that does not answer is retried at the next poll. True when a worker was released now.
  bool ReleaseGoneWorkers(const std::map<int, std::string>& summaries);
  // A ps stopped answering (`cause`): waits up to --recovery_timeout for every ps to answer,
  // recreates the variables of a restarted one (held until restored) and restores every ps
  // from the newest checkpoint. OK once training can go on; the error otherwise.
  absl::Status RecoverPs(const absl::Status& cause);
  // A ps said it is leaving (a signal): with checkpoints, one is saved at once for it (it
  // leaves after it, and RecoverPs restores it once it is back); without, the run ends here
  // as failed, naming it. OK too when this chief was signalled itself (Ctrl-C on the cluster).
  absl::Status OnPsLeaving(int64_t step);
  // Reads the workers' summaries not read yet: a worker that failed on its own ends the run;
  // one stopped by a signal (not the cluster's Ctrl-C) left it (OnWorkerLeft).
  absl::Status ReadSummaries(const std::map<int, std::string>& summaries, int64_t step);
  // Worker `w` left the run (`why`): training goes on without it where the mode allows (async,
  // ssp, sync with enough backup workers); else the run ends at once, naming it.
  absl::Status OnWorkerLeft(int w, const std::string& why, int64_t step);
  absl::StatusOr<Eval> Evaluate(const char* when);
  // After Train with the ps tasks reached: stops every task, evaluates once more, gathers
  // the summaries, shuts the ps tasks down and writes the report (when `status` is OK).
  absl::Status Finish(absl::Status status);
  // Waits for the workers' summaries (a failed run's too: the report keeps what the
  // survivors recorded), but not for dead workers, which send none; keeps calling the ps
  // tasks meanwhile so that they do not take the chief for dead. `ok`: the run succeeded.
  void WaitForSummaries(bool ok);
  absl::Status WriteReport(const std::string& stop_reason);
  nlohmann::json RunJson(const std::string& stop_reason) const;

  const TrainingOptions& t_;
  const ClusterOptions& c_;
  const runtime::ProfileFlags& profile_;
  const ChiefHooks& hooks_;
  ops::ThreadPool pool_;
  std::unique_ptr<profiler::Profiler> prof_;
  std::vector<std::string> ps_summaries_;  // by ps index; "" when a ps gave none
  std::set<int> lost_workers_;             // silent workers the run went on without
  std::set<int> released_workers_;         // ssp: workers every ps was told not to wait for
  bool failed_ = false;                    // the run ended in an error (the report says which)
  absl::Time process_start_ = absl::Now();
  absl::Time train_start_;
  absl::Time train_end_;
  data::Dataset test_;
  int64_t train_steps_ = 0;
  std::unique_ptr<models::Model> model_;
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
  nlohmann::json recoveries_ = nlohmann::json::array();  // each ps recovery, for the report
  std::set<int> summaries_read_;  // workers whose summary Monitor has looked at
  std::string waited_failure_;    // the first worker that failed waiting for another task
  std::string saved_for_leaving_;  // the leaving ps a checkpoint was saved for
  runtime::Placement placement_;
  std::filesystem::path run_dir_;
  std::string run_id_;
  // Destroyed in reverse: the server before the service and the logic it calls.
  std::unique_ptr<Coordinator> coordinator_;
  std::unique_ptr<GrpcCoordinatorService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<PsTasks> ps_;
  std::vector<ops::Tensor> values_;
  std::vector<Eval> evals_;
  std::optional<double> time_to_target_;
  bool ps_reached_ = false;
  std::string stop_reason_;
};

absl::Status Chief::Prepare() {
  const data::SourceOptions source = runtime::DataSource(t_);
  FULCRUM_ASSIGN_OR_RETURN(test_, data::LoadSplit(source, data::Split::kTest));
  // The model and evaluation see the test set through the pipeline's evaluation transform
  // (the workers' models are built for the same example shape: worker/setup.cc).
  data::PipelineOptions pipeline;
  pipeline.kind = t_.input_pipeline;
  pipeline.crop_size = t_.crop_size;
  FULCRUM_RETURN_IF_ERROR(data::ApplyEvalPipeline(pipeline, &test_));
  int64_t train_examples = 0;
  if (t_.train_steps == 0) {  // --epochs: the step count depends on the training set's size
    FULCRUM_ASSIGN_OR_RETURN(data::Dataset train, data::LoadSplit(source, data::Split::kTrain));
    train_examples = train.size();
  }
  train_steps_ = runtime::GlobalTrainSteps(t_, c_, train_examples);

  const auto& dims = test_.images.shape().dims();
  FULCRUM_ASSIGN_OR_RETURN(model_, models::CreateBuiltinModel(t_.model,
                                                              {.input_size = test_.example_size(),
                                                               .num_classes = test_.num_classes,
                                                               .width = t_.model_width,
                                                               .input_shape = std::vector<int64_t>(
                                                                   dims.begin() + 1, dims.end())},
                                                              &pool_));
  for (const auto& v : model_->variables()) {
    variable_infos_.push_back({v.name, v.shape, v.initializer});
    values_.push_back(ops::Tensor::Zeros(v.shape));
  }
  FULCRUM_ASSIGN_OR_RETURN(
      placement_,
      runtime::PlaceVariables(variable_infos_, c_.task.cluster.num_tasks(runtime::kPsJob),
                              c_.placement, c_.partition_min_bytes));

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
  runtime::TransferResult pulled;
  FULCRUM_RETURN_IF_ERROR(ps_->PullAll(c_.step_timeout, values_, &pulled));
  // The evaluation runs on a thread of its own while this one keeps calling the ps tasks
  // (ps_ has one caller at a time): an evaluation longer than --heartbeat_timeout (a large
  // test set, a slow or CPU-capped host) must not make them take the chief for dead.
  absl::StatusOr<models::EvalResult> evaluated = absl::UnknownError("evaluation did not run");
  absl::Notification evaluated_done;
  std::thread evaluation([&] {
    evaluated = models::EvaluateDataset(*model_, test_, values_, t_.eval_batch_size);
    evaluated_done.Notify();
  });
  const absl::Duration ping = std::max(absl::Milliseconds(250), c_.heartbeat_timeout / 4);
  while (!evaluated_done.WaitForNotificationWithTimeout(ping)) {
    ps_->GlobalStep(std::min(ping, absl::Seconds(5))).status().IgnoreError();
  }
  evaluation.join();
  FULCRUM_ASSIGN_OR_RETURN(models::EvalResult r, std::move(evaluated));
  Eval e;
  e.global_step = pulled.global_step;
  e.seconds = absl::ToDoubleSeconds(absl::Now() - train_start_);
  e.loss = r.loss_sum / static_cast<double>(std::max<int64_t>(1, r.examples));
  if (model_->has_accuracy()) {
    e.accuracy =
        static_cast<double>(r.correct) / static_cast<double>(std::max<int64_t>(1, r.examples));
    spdlog::info("{} global step {}/{}: test accuracy {:.4f}, test loss {:.4f} ({:.1f} s)", when,
                 e.global_step, train_steps_, *e.accuracy, e.loss, e.seconds);
  } else {
    spdlog::info("{} global step {}/{}: test loss {:.5f} ({:.1f} s)", when, e.global_step,
                 train_steps_, e.loss, e.seconds);
  }
  evals_.push_back(e);
  profiler::EvalRecord record;
  record.unix_us = profiler::NowUnixMicros();
  record.global_step = e.global_step;
  record.accuracy = e.accuracy ? *e.accuracy : -1.0;
  record.loss = e.loss;
  prof_->RecordEval(record);
  if (c_.target_accuracy > 0 && e.accuracy && *e.accuracy >= c_.target_accuracy &&
      !time_to_target_) {
    time_to_target_ = e.seconds;
  }
  return e;
}

absl::Status Chief::Monitor() {
  int64_t next_eval = c_.eval_every > 0 ? c_.eval_every : train_steps_ + 1;
  int64_t last_step = -1;
  absl::Time last_progress = absl::Now();
  while (true) {
    absl::SleepFor(kMonitorPoll);
    if (const int signal = StopSignal(); signal != 0) {
      // Ends the run as at train_steps: workers stop, the final evaluation, every task's
      // summary and the report are written.
      stop_reason_ = absl::StrCat("interrupted by ", SignalName(signal));
      spdlog::warn("chief: {}: stopping the run", stop_reason_);
      return absl::OkStatus();
    }
    FULCRUM_RETURN_IF_ERROR(LocalWorkerStatus());
    absl::StatusOr<int64_t> polled = ps_->GlobalStep(c_.step_timeout);
    if (!polled.ok()) {
      if (!c_.recovers()) {
        return absl::Status(polled.status().code(),
                            absl::StrCat(polled.status().message(),
                                         " (with --checkpoint_dir the chief restores a restarted "
                                         "ps from the newest checkpoint)"));
      }
      FULCRUM_RETURN_IF_ERROR(RecoverPs(polled.status()));
      saved_for_leaving_.clear();
      released_workers_.clear();  // a restarted ps knows nothing of them: tell every ps again
      last_step = -1;
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
      if (time_to_target_) {
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
    FULCRUM_RETURN_IF_ERROR(ReadSummaries(summaries, step));
    if (summaries.size() == static_cast<size_t>(c_.task.cluster.num_tasks(runtime::kWorkerJob))) {
      if (!waited_failure_.empty()) return absl::InternalError(waited_failure_);
      stop_reason_ = "every worker finished";
      return absl::OkStatus();
    }
    if (const auto silent = coordinator_->SilentWorkers(c_.heartbeat_timeout); !silent.empty()) {
      // Async training, and sync training with backup workers while enough workers remain,
      // goes on without a dead worker; sync training that needs every worker cannot.
      const int workers = c_.task.cluster.num_tasks(runtime::kWorkerJob);
      const int alive = workers - static_cast<int>(silent.size());
      const bool can_go_on =
          alive > 0 && (c_.mode != runtime::SyncMode::kSync || alive >= c_.replicas_to_aggregate);
      if (!can_go_on) {
        return absl::UnavailableError(
            absl::StrCat("chief: ", Join(silent, "worker"), " silent for ",
                         absl::FormatDuration(c_.heartbeat_timeout), " (--heartbeat_timeout)"));
      }
      for (const int w : silent) {
        if (lost_workers_.insert(w).second) {
          spdlog::warn(
              "chief: worker:{} silent for {} (--heartbeat_timeout): training goes on "
              "with the {} other worker(s)",
              w, absl::FormatDuration(c_.heartbeat_timeout), alive);
        }
      }
    }
    // The others were held for a released worker: the stall so far is not theirs.
    if (ReleaseGoneWorkers(summaries)) last_progress = absl::Now();
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

absl::Status Chief::ReadSummaries(const std::map<int, std::string>& summaries, int64_t step) {
  for (const auto& [w, text] : summaries) {
    if (!summaries_read_.insert(w).second) continue;  // each summary is parsed once
    const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object()) continue;
    if (!j.value("failed", false)) {
      const std::string why = j.value("stop_reason", std::string());
      // A worker stopped by a signal while this chief was not (not a Ctrl-C on the cluster).
      if (absl::StartsWith(why, "interrupted by") && StopSignal() == 0 && step < train_steps_) {
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

absl::Status Chief::OnWorkerLeft(int w, const std::string& why, int64_t step) {
  lost_workers_.insert(w);
  const int workers = c_.task.cluster.num_tasks(runtime::kWorkerJob);
  const int alive = workers - static_cast<int>(lost_workers_.size());
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

bool Chief::ReleaseGoneWorkers(const std::map<int, std::string>& summaries) {
  if (c_.mode != runtime::SyncMode::kSsp) return false;
  bool released = false;
  std::map<int, std::string> gone;  // worker -> why
  for (const int w : lost_workers_) {
    gone[w] = absl::StrCat("silent past --heartbeat_timeout=",
                           absl::FormatDuration(c_.heartbeat_timeout));
  }
  for (const auto& [w, text] : summaries) gone.emplace(w, "it reported its summary (done)");
  for (const auto& [w, why] : gone) {
    if (released_workers_.contains(w)) continue;
    const std::string reason = absl::StrCat("worker:", w, ": ", why);
    if (absl::Status s = ps_->ReleaseWorkers({w}, reason); !s.ok()) {
      spdlog::warn("chief: the ps tasks were not told to stop waiting for {} (retried): {}", reason,
                   s.ToString());
      return released;
    }
    released_workers_.insert(w);
    released = true;
    spdlog::info("chief: ssp: the ps tasks no longer wait for {}", reason);
  }
  return released;
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

nlohmann::json Chief::RunJson(const std::string& stop_reason) const {
  nlohmann::json j;
  const int num_workers = c_.task.cluster.num_tasks(runtime::kWorkerJob);
  const bool sync = c_.mode == runtime::SyncMode::kSync;
  j["run_id"] = run_id_;
  j["mode"] = runtime::ModeName(c_.mode);
  j["async_pull"] = runtime::AsyncPullName(c_);
  j["staleness_aware_lr"] = c_.staleness_aware_lr;
  j["model"] = t_.model;
  j["dataset"] = t_.dataset;
  j["optimizer"] = ops::OptimizerName(t_.optimizer.kind);
  j["learning_rate"] = runtime::ExactDecimal(t_.optimizer.learning_rate);
  runtime::AddTrainingSettings(t_, &j);
  j["num_parameters"] = model_->num_parameters();
  j["batch_size"] = t_.batch_size;
  j["seed"] = t_.seed;
  j["placement"] = runtime::PlacementName(c_.placement);
  j["wire_dtype"] = runtime::WireDtypeName(c_.wire_dtype);
  j["num_ps"] = placement_.num_ps();
  j["num_workers"] = num_workers;
  j["replicas_to_aggregate"] =
      sync ? nlohmann::json(c_.replicas_to_aggregate) : nlohmann::json(nullptr);
  j["staleness"] =
      c_.mode == runtime::SyncMode::kSsp ? nlohmann::json(c_.staleness) : nlohmann::json(nullptr);
  // ssp: workers the ps tasks were told not to wait for any more (done, failed or lost).
  j["ssp_released_workers"] =
      c_.mode == runtime::SyncMode::kSsp
          ? nlohmann::json(std::vector<int>(released_workers_.begin(), released_workers_.end()))
          : nlohmann::json(nullptr);
  j["train_steps"] = train_steps_;
  j["stop_reason"] = stop_reason;
  // Workers that went silent past --heartbeat_timeout while the run went on without them.
  j["workers_lost"] = std::vector<int>(lost_workers_.begin(), lost_workers_.end());
  // Each time ps tasks restarted and every ps went back to a checkpoint.
  j["ps_recoveries"] = recoveries_;
  // A chief restarted during the run took it over at this step.
  j["adopted"] = adopted_
                     ? nlohmann::json{{"run_id", adopted_->run_id}, {"at_step", adopted_->at_step}}
                     : nlohmann::json(nullptr);
  // A failed run has no final evaluation (and maybe none at all).
  j["failed"] = failed_;
  // Its evaluations so far stay in `evals`; none of them is the final one.
  const Eval last = evals_.empty() ? Eval{} : evals_.back();
  const bool final_eval = !evals_.empty() && !failed_;
  j["global_step"] = final_eval ? nlohmann::json(last.global_step) : nlohmann::json(nullptr);
  j["final_test_accuracy"] =
      final_eval && last.accuracy ? nlohmann::json(*last.accuracy) : nlohmann::json(nullptr);
  j["final_test_loss"] = final_eval ? nlohmann::json(last.loss) : nlohmann::json(nullptr);
  j["target_accuracy"] =
      c_.target_accuracy > 0 ? nlohmann::json(c_.target_accuracy) : nlohmann::json(nullptr);
  j["time_to_target_accuracy_seconds"] =
      time_to_target_ ? nlohmann::json(*time_to_target_) : nlohmann::json(nullptr);
  const double train_seconds = absl::ToDoubleSeconds(train_end_ - train_start_);
  j["train_seconds"] = train_seconds;
  j["wall_seconds"] = absl::ToDoubleSeconds(absl::Now() - process_start_);
  // Examples the applied updates of this run consumed (a resumed run counts from the step it
  // resumed at): one batch per async step, replicas_to_aggregate batches per sync step.
  const int64_t per_step = t_.batch_size * (sync ? c_.replicas_to_aggregate : 1);
  j["examples_per_sec"] =
      train_seconds > 0
          ? static_cast<double>((last.global_step - start_step_) * per_step) / train_seconds
          : 0.0;
  nlohmann::json evals = nlohmann::json::array();
  for (const Eval& e : evals_) {
    evals.push_back(
        {{"global_step", e.global_step},
         {"seconds", e.seconds},
         {"test_accuracy", e.accuracy ? nlohmann::json(*e.accuracy) : nlohmann::json(nullptr)},
         {"test_loss", e.loss}});
  }
  j["evals"] = evals;
  nlohmann::json placement = nlohmann::json::array();
  for (const auto& shard : placement_.shards) {
    for (const auto& v : shard) {
      placement.push_back({{"variable", v.name}, {"ps", v.ps}, {"bytes", v.bytes()}});
    }
  }
  j["placement_table"] = placement;
  nlohmann::json checkpoint = nullptr;
  if (!c_.checkpoint_dir.empty()) {
    checkpoint = {
        {"dir", c_.checkpoint_dir},
        {"saves", checkpointer_ ? checkpointer_->saves() : 0},
        {"last_step", checkpointer_ && checkpointer_->last_saved_step() >= 0
                          ? nlohmann::json(checkpointer_->last_saved_step())
                          : nlohmann::json(nullptr)},
        {"resumed_from", restored_ ? nlohmann::json(restored_->folder) : nlohmann::json(nullptr)},
        {"resumed_from_step",
         restored_ ? nlohmann::json(restored_->global_step) : nlohmann::json(nullptr)},
        {"refused", restored_ ? restored_->refused : std::vector<std::string>()},
        {"errors", checkpoint_errors_}};
  }
  j["checkpoint"] = checkpoint;
  j["placement_imbalance"] = placement_.imbalance();
  return j;
}

absl::Status Chief::WriteReport(const std::string& stop_reason) {
  nlohmann::json j = RunJson(stop_reason);
  // The chief's own summary: the run figures and its profile.
  nlohmann::json own = j;
  own["job"] = c_.task.job_name;
  own["task_index"] = c_.task.task_index;
  FULCRUM_RETURN_IF_ERROR(prof_->Finish(&own));
  FULCRUM_RETURN_IF_ERROR(
      WriteFileAtomically(run_dir_ / c_.task.dir_name() / "summary.json", own.dump(2) + "\n"));

  nlohmann::json ps = nlohmann::json::array();
  int64_t received = 0, applied = 0, dropped = 0;
  // A task that sent no summary is named in "vanished_tasks"; what it left on disk, if the
  // chief can read its folder, stands in for its summary.
  std::vector<std::string> vanished;
  const absl::Time since = adopted_ ? absl::InfinitePast() : process_start_;
  auto left = [&](const std::string& job, int index) {
    vanished.push_back(absl::StrCat(job, ":", index));
    return LeftSummary(run_dir_ / absl::StrCat(job, "-", index), since);
  };
  for (size_t p = 0; p < ps_summaries_.size(); ++p) {
    nlohmann::json s = nlohmann::json::parse(ps_summaries_[p], nullptr, false);
    if (s.is_discarded() || !s.is_object()) {
      s = left("ps", static_cast<int>(p));
      spdlog::warn("no summary from ps:{}{}", p,
                   s.is_null() ? "" : "; its records on disk stand in");
      if (s.is_null()) continue;
    }
    received += s.value("pushes_received", int64_t{0});
    applied += s.value("pushes_applied", int64_t{0});
    dropped += s.value("pushes_dropped", int64_t{0});
    ps.push_back(std::move(s));
  }
  j["ps"] = ps;
  j["pushes_received"] = received;
  j["pushes_applied"] = applied;
  j["pushes_dropped"] = dropped;
  nlohmann::json workers = nlohmann::json::array();
  double worker_rate = 0.0;
  const std::map<int, std::string> sent = coordinator_->summaries();
  for (const auto& [index, text] : sent) {
    nlohmann::json w = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (w.is_discarded()) continue;
    if (w.contains("examples_per_sec") && w["examples_per_sec"].is_number()) {
      worker_rate += w["examples_per_sec"].get<double>();
    }
    workers.push_back(std::move(w));
  }
  for (int w = 0; w < c_.task.cluster.num_tasks(runtime::kWorkerJob); ++w) {
    if (sent.count(w) != 0) continue;
    nlohmann::json s = left("worker", w);
    if (!s.is_null()) workers.push_back(std::move(s));
  }
  j["vanished_tasks"] = vanished;
  j["workers"] = workers;
  j["workers_examples_per_sec"] = worker_rate;  // sum of the workers' steady-state rates
  j["chief"] = own;
  AddClusterTables(&j);
  FULCRUM_RETURN_IF_ERROR(WriteFileAtomically(run_dir_ / "report.json", j.dump(2) + "\n"));
  // report.html is a view of report.json (chief/report_html.h): a run whose page cannot be
  // drawn still succeeded, and report.json keeps every figure.
  if (absl::Status html = WriteReportHtml(run_dir_ / "report.json", run_dir_ / "report.html");
      !html.ok()) {
    spdlog::warn("report.html not written ({}); report.json has every figure", html.ToString());
  }
  if (prof_->enabled()) WriteRunTrace(c_.task.cluster, run_dir_);
  return absl::OkStatus();
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
    for (const int w : coordinator_->SilentWorkers(gone_after)) lost_workers_.insert(w);
  }
}

absl::Status Chief::Finish(absl::Status status) {
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
  FULCRUM_RETURN_IF_ERROR(WriteReport(stop_reason_));
  spdlog::info("report: {} and report.html", (run_dir_ / "report.json").string());
  return absl::OkStatus();
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
  FULCRUM_RETURN_IF_ERROR(StartCoordinator());
  ps_ = std::make_unique<PsTasks>(c_.task.cluster, placement_, c_.chunk_bytes, c_.task.task_name(),
                                  prof_.get(), c_.security);
  ps_->set_control_timeout(std::max(absl::Seconds(30), c_.step_timeout));
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

}  // namespace

absl::Status RunChief(const TrainingOptions& training, const ClusterOptions& cluster,
                      const runtime::ProfileFlags& profile, const ChiefHooks& hooks) {
  Chief chief(training, cluster, profile, hooks);
  return chief.Run();
}

}  // namespace fulcrum::chief
