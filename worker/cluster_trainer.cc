#include "worker/cluster_trainer.h"

#include <algorithm>
#include <filesystem>
#include <memory>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/files.h"
#include "base/signals.h"
#include "base/status_macros.h"
#include "data/batcher.h"
#include "data/load.h"
#include "nlohmann/json.hpp"
#include "ops/cpu/thread_pool.h"
#include "profiler/profiler.h"
#include "runtime/client/coordinator_client.h"
#include "runtime/client/failover_ps_client.h"
#include "runtime/client/grpc_ps_client.h"
#include "runtime/client/sharded_variables.h"
#include "runtime/frames/wire_frame.h"
#include "runtime/grpc/grpc_util.h"
#include "spdlog/spdlog.h"
#include "worker/heartbeat.h"
#include "worker/replicas.h"
#include "worker/run_stats.h"
#include "worker/setup.h"
#include "worker/sharded_variable_store.h"
#include "worker/train_loop.h"

ABSL_FLAG(double, test_backward_delay_ms, 0,
          "For tests: every step's backward pass sleeps this many milliseconds before its first "
          "gradients go out, making this worker a straggler (0: off).");

namespace fulcrum::worker {
namespace {

// --test_backward_delay_ms, checked.
absl::StatusOr<absl::Duration> TestBackwardDelay() {
  const double ms = absl::GetFlag(FLAGS_test_backward_delay_ms);
  if (!(ms >= 0 && ms <= 60'000)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--test_backward_delay_ms=", ms, ": expected 0 to 60000 milliseconds"));
  }
  return absl::Milliseconds(ms);
}

using runtime::ClusterOptions;
using runtime::TrainingOptions;

pb::TaskId MyTask(const ClusterOptions& c) {
  pb::TaskId id;
  id.set_job(c.task.job_name);
  id.set_index(c.task.task_index);
  return id;
}

// Names the flag behind a start-up deadline that passed.
absl::Status WithStartupHint(absl::Status s, const ClusterOptions& c) {
  if (s.code() != absl::StatusCode::kDeadlineExceeded) return s;
  return absl::DeadlineExceededError(absl::StrCat(
      s.message(), " (--startup_timeout=", absl::FormatDuration(c.startup_timeout), ")"));
}

// Registers with the chief (which checks our flags against its own), makes this task's
// folder of the run directory, points the profiler there and waits for the start.
absl::StatusOr<std::filesystem::path> JoinRun(runtime::CoordinatorClient& chief,
                                              const TrainingOptions& t, const ClusterOptions& c,
                                              absl::Time deadline, profiler::Profiler* prof) {
  absl::StatusOr<pb::RegisterTaskResponse> registered =
      chief.Register(runtime::ConfigFingerprint(t, c), deadline);
  if (!registered.ok()) return WithStartupHint(registered.status(), c);
  const std::filesystem::path task_dir =
      std::filesystem::path(registered->run_dir()) / c.task.dir_name();
  FULCRUM_RETURN_IF_ERROR(MakeDirs(task_dir, "run directory"));
  FULCRUM_RETURN_IF_ERROR(prof->SetTaskDir(task_dir.string()));
  FULCRUM_RETURN_IF_ERROR(WithStartupHint(chief.WaitForStart(deadline), c));
  return task_dir;
}

// Reaches one ps: it answers, its flow-control windows are grown, its data plane is open.
// A ps lost meanwhile (Unavailable: killed, restarting) is tried again until `deadline`.
absl::Status ConnectOnePs(const ClusterOptions& c, absl::Time deadline, runtime::GrpcPsClient& ps) {
  while (true) {
    if (!ps.WaitUntilReady(std::max(absl::Seconds(1), deadline - absl::Now()))) {
      if (const int signal = StopSignal(); signal != 0) {
        return absl::CancelledError(absl::StrCat(c.task.task_name(), ": interrupted by ",
                                                 SignalName(signal), " while waiting for ",
                                                 ps.name(), " at ", ps.target()));
      }
      return absl::DeadlineExceededError(absl::StrCat(c.task.task_name(), ": ", ps.name(), " at ",
                                                      ps.target(), " did not answer"));
    }
    absl::Status s = runtime::RemoteFailure(ps.Warm(c.chunk_bytes, 2, c.step_timeout));
    if (s.ok() && c.tcp_data_plane) {
      ps.set_tcp_data_plane(true);
      // FailedPrecondition (exit 2) when that ps runs with --data_plane=grpc.
      s = ps.OpenDataPlane(c.task.task_name(), c.step_timeout);
    }
    if (!absl::IsUnavailable(s) || absl::Now() >= deadline) return s;
    spdlog::warn("{}: {}; trying again", ps.name(), std::string(s.message()));
    absl::SleepFor(absl::Milliseconds(500));
  }
}

// One client per PS task, each answering and warmed up (flow-control windows grown).
absl::StatusOr<std::vector<std::unique_ptr<runtime::GrpcPsClient>>> ConnectPs(
    const ClusterOptions& c, absl::Time deadline, profiler::Profiler* prof,
    runtime::CallTracker* calls) {
  std::vector<std::unique_ptr<runtime::GrpcPsClient>> ps;
  for (int p = 0; p < c.task.cluster.num_tasks(runtime::kPsJob); ++p) {
    ps.push_back(std::make_unique<runtime::GrpcPsClient>(
        absl::StrCat("ps:", p), c.task.cluster.address(runtime::kPsJob, p), c.security));
    ps.back()->set_observer(prof);
    ps.back()->set_call_tracker(calls);
    FULCRUM_RETURN_IF_ERROR(ConnectOnePs(c, deadline, *ps.back()));
  }
  return ps;
}

// Tells the chief that this worker failed (a diverged model ends the whole run at once),
// instead of leaving it to notice --heartbeat_timeout of silence. The records so far are
// written first (steps.csv, samples.csv, trace.json), so that the report the failure triggers
// finds this task's trace too; the failure summary stays as is.
absl::Status ReportFailure(const ClusterOptions& c, profiler::Profiler& prof,
                           runtime::CoordinatorClient& chief, const absl::Status& failure) {
  nlohmann::json failed = {{"job", c.task.job_name},
                           {"task_index", c.task.task_index},
                           {"failed", true},
                           {"code", absl::StatusCodeToString(failure.code())},
                           {"error", std::string(failure.message())}};
  nlohmann::json profile = nlohmann::json::object();
  if (absl::Status s = prof.Finish(&profile); !s.ok()) {
    spdlog::warn("the profiler's files were not written: {}", s.ToString());
  }
  if (absl::Status s = chief.ReportSummary(failed.dump(2) + "\n"); !s.ok()) {
    spdlog::warn("the chief was not told of the failure: {}", s.ToString());
  }
  return failure;
}

// Ends the loop when the chief asks (cleanly) or has gone silent (an error).
TrainLoop::StopCheck ChiefStopCheck(const Heartbeat& heartbeat, const ClusterOptions& c) {
  return [&heartbeat, &c](int64_t, std::string* stop_reason) -> absl::Status {
    if (heartbeat.should_stop() && heartbeat.run_failed()) {
      return absl::AbortedError(absl::StrCat(
          c.task.task_name(), ": the chief ended the run as failed: ", heartbeat.stop_reason()));
    } else if (heartbeat.should_stop()) {
      *stop_reason = "the chief asked to stop";
    } else if (heartbeat.chief_lost()) {
      return absl::UnavailableError(absl::StrCat(c.task.task_name(), ": chief:0 silent for ",
                                                 absl::FormatDuration(c.heartbeat_timeout),
                                                 " (--heartbeat_timeout)"));
    }
    return absl::OkStatus();
  };
}

// A loop that ended before the target (the ps tasks or the chief said training ended) asks the
// chief how the run ends: a run the chief ended as failed fails this worker too, never "done".
absl::StatusOr<TrainLoopResult> ConfirmOutcome(absl::StatusOr<TrainLoopResult> ran,
                                               Heartbeat& heartbeat, int64_t train_steps,
                                               const ClusterOptions& c) {
  if (!ran.ok() || ran->global_step >= train_steps) return ran;
  heartbeat.PollNow();
  if (!heartbeat.run_failed()) return ran;
  return absl::AbortedError(absl::StrCat(c.task.task_name(),
                                         ": the chief ended the run as failed at global step ",
                                         ran->global_step, ": ", heartbeat.stop_reason()));
}

// The summary keys of a cluster worker other than the run figures (worker/run_stats.h).
nlohmann::json SummaryJson(const TrainingOptions& t, const ClusterOptions& c,
                           const TrainLoopResult& trained, const TransferTotals& moved) {
  nlohmann::json j;
  j["job"] = c.task.job_name;
  j["task_index"] = c.task.task_index;
  j["mode"] = runtime::ModeName(c.mode);
  j["wire_dtype"] = runtime::WireDtypeName(c.wire_dtype);
  j["data_plane"] = c.tcp_data_plane ? "tcp" : "grpc";
  j["staleness"] =
      c.mode == runtime::SyncMode::kSsp ? nlohmann::json(c.staleness) : nlohmann::json(nullptr);
  j["overlap"] = c.overlap && !c.pull_before_step;  // the schedule it ran
  j["async_pull"] = runtime::AsyncPullName(c);
  j["staleness_aware_lr"] = c.staleness_aware_lr;
  j["model"] = t.model;
  j["devices"] = DeviceNames(t);
  j["tf32"] = t.tf32;
  j["batch_size"] = t.batch_size;
  j["local_steps"] = trained.steps.size();
  j["last_global_step"] = trained.global_step;
  j["stop_reason"] = trained.stop_reason;
  j["pushes"] = moved.pushes;
  j["pushes_dropped"] = moved.dropped;
  j["pushes_duplicate"] = moved.duplicates;
  j["rpc_retries"] = moved.retries;
  j["ps_recoveries"] = moved.recoveries;
  // The pushes the ps tasks acknowledged since they were last restored (all when never): the
  // restored ps tasks' pushes_applied is the sum of these over the workers.
  j["pushes_since_recovery"] = moved.pushes - moved.pushes_at_recovery;
  j["staleness_mean"] = nullptr;  // sync, or no step applied
  j["staleness_histogram"] = nullptr;
  if (moved.staleness_steps > 0) {
    j["staleness_mean"] =
        static_cast<double>(moved.staleness_sum) / static_cast<double>(moved.staleness_steps);
    // Steps by staleness 0, 1, ..., the last entry counting that many or more.
    j["staleness_histogram"] = moved.staleness_histogram;
  }
  j["bytes_pushed"] = moved.bytes_sent;
  j["bytes_pulled"] = moved.bytes_received;
  return j;
}

// The model's variables placed over the ps tasks, as the chief places them.
absl::StatusOr<runtime::Placement> PlaceModel(const models::Model& model, const ClusterOptions& c) {
  std::vector<runtime::VariableInfo> infos;
  for (const auto& v : model.variables()) infos.push_back({v.name, v.shape, v.initializer});
  return runtime::PlaceVariables(infos, c.task.cluster.num_tasks(runtime::kPsJob), c.placement,
                                 c.partition_min_bytes);
}

// The store's read schedule and, with checkpoints or replicas, its recovery: while a dead ps
// is restarted and restored (or its replica promoted), the chief's word still ends the wait.
void ConfigureStore(const ClusterOptions& c, Heartbeat& heartbeat, ShardedVariableStore* store) {
  store->set_pull_before_step(c.pull_before_step);
  store->set_reads_at_step_start(c.reads_at_step_start);
  if (c.recovers() || c.replicate_shards) {
    store->EnableRecovery(c.recovery_timeout,
                          [check = ChiefStopCheck(heartbeat, c)](std::string* stop_reason) {
                            return check(0, stop_reason);
                          });
  }
}

// Writes the worker's summary (the run figures added) and hands it to the chief.
absl::Status ReportRun(const TrainLoopResult& trained, const TransferTotals& moved,
                       profiler::Profiler* prof, nlohmann::json* summary,
                       const std::filesystem::path& task_dir,
                       runtime::GrpcCoordinatorClient& chief) {
  const RunStats stats = ComputeRunStats(trained.steps, trained.wall_seconds);
  FULCRUM_ASSIGN_OR_RETURN(const std::string text,
                           WriteSummary(prof, stats, summary, task_dir / "summary.json"));
  spdlog::info(
      "done after {} local steps (global step {}): {}; {:.0f} examples/sec, "
      "{} of {} pushes dropped as stale",
      trained.steps.size(), trained.global_step, trained.stop_reason, stats.examples_per_sec,
      moved.dropped, moved.pushes);
  return chief.ReportSummary(text);
}

void LogSchedule(const TrainingOptions& t, const ClusterOptions& c, int64_t train_steps,
                 int64_t chunks, bool overlap) {
  spdlog::info("training: {} {} to global step {}, batch {}, {} chunk(s) on {} ps, {}",
               runtime::ModeName(c.mode), t.model, train_steps, t.batch_size, chunks,
               c.task.cluster.num_tasks(runtime::kPsJob),
               overlap     ? "transfers overlapped with compute"
               : c.overlap ? "sequential transfers (--async_pull=before_step)"
                           : "sequential transfers");
}

}  // namespace

absl::Status RunClusterWorker(const TrainingOptions& t, const ClusterOptions& c,
                              const runtime::ProfileFlags& profile) {
  const absl::Time process_start = absl::Now();
  const absl::Time startup_deadline = process_start + c.startup_timeout;
  runtime::SetKeepaliveTimeout(c.step_timeout);  // a ps stalled for less is waited for
  c.security.LogMode(c.task.task_name());
  FULCRUM_RETURN_IF_ERROR(ComputeDevices(t).status());
  FULCRUM_ASSIGN_OR_RETURN(const absl::Duration backward_delay, TestBackwardDelay());
  // The profiler samples from the start; its files go to the task's folder once the chief
  // has said where the run directory is.
  FULCRUM_ASSIGN_OR_RETURN(std::unique_ptr<profiler::Profiler> prof,
                           profiler::Profiler::Start(runtime::ProfilerOptionsFor(
                               profile, &c.task.cluster, c.task.job_name, c.task.task_index, "")));
  FULCRUM_ASSIGN_OR_RETURN(data::Dataset train,
                           data::LoadSplit(runtime::DataSource(t), data::Split::kTrain));
  FULCRUM_ASSIGN_OR_RETURN(std::unique_ptr<Replicas> replicas,
                           Replicas::Create(t, train, c.task.task_index));
  models::Model* model = &replicas->model();
  std::vector<ops::Shape> shapes;
  for (const auto& v : model->variables()) shapes.push_back(v.shape);
  FULCRUM_ASSIGN_OR_RETURN(const runtime::Placement placement, PlaceModel(*model, c));
  SetModelGraph(*model, &placement,
                absl::StrCat("/job:", c.task.job_name, "/task:", c.task.task_index), prof.get());
  FULCRUM_ASSIGN_OR_RETURN(
      data::Batcher batcher,
      data::Batcher::Create(
          &train,
          BatcherOptionsFor(t, c.task.task_index, c.task.cluster.num_tasks(runtime::kWorkerJob))));
  const int64_t train_steps = runtime::GlobalTrainSteps(t, c, train.size());

  runtime::GrpcCoordinatorClient::Options chief_options;
  // The summary waits for a chief that restarts (and takes the job over) as heartbeats do.
  chief_options.report = std::max(chief_options.report, c.heartbeat_timeout);
  chief_options.security = c.security;
  runtime::GrpcCoordinatorClient chief(MyTask(c), c.task.cluster.coordinator_address(),
                                       chief_options);
  chief.set_observer(prof.get());
  FULCRUM_ASSIGN_OR_RETURN(const std::filesystem::path task_dir,
                           JoinRun(chief, t, c, startup_deadline, prof.get()));
  runtime::CallTracker calls;  // what this worker waits for, in its heartbeats
  auto ps = ConnectPs(c, startup_deadline, prof.get(), &calls);
  if (!ps.ok()) return ReportFailure(c, *prof, chief, ps.status());
  std::vector<runtime::GrpcPsClient*> primaries;
  for (const auto& client : *ps) primaries.push_back(client.get());
  // --replicate_shards: each shard's calls move to its replica once the chief promoted it.
  const runtime::RoutedPsClients clients =
      runtime::RoutePsClients(primaries, c.task.cluster, c.security, c.replicate_shards);
  runtime::ShardedVariables sharded(placement, c.chunk_bytes, clients.routed, c.task.task_name());
  sharded.set_wire_dtype(c.wire_dtype);
  Heartbeat heartbeat(&chief, c.heartbeat_timeout, absl::Seconds(1), &calls);
  // ssp: a worker held for a slower one waits long enough for the chief to declare a dead one
  // gone (silent for --heartbeat_timeout) and release it; a live one is never held that long.
  const absl::Duration step_wait =
      c.mode == runtime::SyncMode::kSsp ? c.step_timeout + c.heartbeat_timeout : c.step_timeout;
  ShardedVariableStore store(&sharded, shapes, c.mode, step_wait, &model->backend());
  ConfigureStore(c, heartbeat, &store);
  // --async_pull=before_step reads every value before the step begins: nothing is left for
  // the next forward pass to overlap, so it runs the sequential schedule.
  const bool overlap = c.overlap && !c.pull_before_step;
  LogSchedule(t, c, train_steps, sharded.num_chunks(), overlap);
  TrainLoop loop({.target_global_steps = train_steps,
                  .log_every = t.log_every,
                  .log_global_step = true,
                  .overlap = overlap,
                  .prefetch = t.prefetch,
                  .backward_delay = backward_delay},
                 model, std::move(batcher), &store, replicas->pool());
  loop.set_replicas(replicas.get());
  loop.set_stop_check(ChiefStopCheck(heartbeat, c));
  loop.set_step_sink([&](const profiler::StepRecord& r) {
    prof->RecordStep(r);
    heartbeat.set_step(r.step);
  });
  absl::StatusOr<TrainLoopResult> ran = ConfirmOutcome(loop.Run(), heartbeat, train_steps, c);
  if (!ran.ok()) return ReportFailure(c, *prof, chief, ran.status());
  nlohmann::json summary = SummaryJson(t, c, *ran, store.totals());
  summary["wall_seconds"] = absl::ToDoubleSeconds(absl::Now() - process_start);
  summary["kernels"] = KernelsJson(model->backend().kernel_choices());
  return ReportRun(*ran, store.totals(), prof.get(), &summary, task_dir, chief);
}

}  // namespace fulcrum::worker
