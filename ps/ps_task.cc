#include "ps/ps_task.h"

#include <algorithm>
#include <filesystem>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/files.h"
#include "base/logging.h"
#include "base/malloc.h"
#include "base/net.h"
#include "base/signals.h"
#include "base/status_macros.h"
#include "nlohmann/json.hpp"
#include "profiler/profiler.h"
#include "ps/service.h"
#include "ps/shard.h"
#include "runtime/cluster/shard_defs.h"
#include "runtime/grpc/grpc_server.h"
#include "spdlog/spdlog.h"
#include "transport/tcp_server.h"

namespace fulcrum::ps {
namespace {

// How often the runner checks its timeouts while it waits for Shutdown.
constexpr absl::Duration kPollInterval = absl::Milliseconds(200);
// How long in-flight calls get to finish once the server shuts down.
constexpr absl::Duration kShutdownGrace = absl::Seconds(2);

nlohmann::json SummaryJson(const pb::StatsResponse& s) {
  nlohmann::json j;
  j["job"] = "ps";
  j["task_index"] = s.task_index();
  // A ps the chief never initialised has no mode yet.
  j["mode"] = s.mode() == pb::MODE_UNSPECIFIED ? "unknown" : runtime::ModeName(s.mode());
  j["global_step"] = s.global_step();
  j["bytes_held"] = s.bytes_held();
  j["num_chunks"] = s.num_chunks();
  nlohmann::json vars = nlohmann::json::array();
  for (const pb::VariableStats& v : s.variables()) {
    vars.push_back({{"name", v.name()}, {"bytes", v.bytes()}});
  }
  j["variables"] = std::move(vars);
  j["pushes_received"] = s.pushes_received();
  j["pushes_applied"] = s.pushes_applied();
  j["pushes_dropped"] = s.pushes_dropped();
  j["pushes_duplicate"] = s.pushes_duplicate();
  j["pushes_nonfinite"] = s.pushes_nonfinite();
  j["pushes_absurd"] = s.pushes_absurd();
  j["pushes_empty_refused"] = s.pushes_empty_refused();
  j["steps_applied"] = s.steps_applied();
  j["pulls"] = s.pulls();
  j["bytes_pushed"] = s.bytes_pushed();
  j["bytes_pulled"] = s.bytes_pulled();
  j["pull_wait_timeouts"] = s.pull_wait_timeouts();
  j["apply_ms"] = static_cast<double>(s.apply_us()) / 1000.0;
  j["request_wait_ms"] = static_cast<double>(s.wait_us()) / 1000.0;
  if (s.backup_task() >= 0) {  // --replicate_shards
    j["replication"] = {{"backup", absl::StrCat("ps:", s.backup_task())},
                        {"forwards", s.replica_forwards()},
                        {"forward_ms", static_cast<double>(s.replica_forward_us()) / 1000.0},
                        {"lost", s.replication_lost()}};
  }
  if (s.has_straggler()) {  // sync: who held the steps back at the end (ps/straggler.h)
    const pb::StragglerStats& st = s.straggler();
    j["straggler"] = {
        {"worker", st.worker() >= 0 ? nlohmann::json(absl::StrCat("worker:", st.worker()))
                                    : nlohmann::json(nullptr)},
        {"held_back_ms", st.held_back_ms()},
        {"since_step", st.since_step()},
        {"steps_named", st.steps_named()}};
  }
  if (s.mode() == pb::MODE_SSP) {
    j["staleness"] = s.staleness();
    j["worker_clocks"] = std::vector<int64_t>(s.worker_clocks().begin(), s.worker_clocks().end());
    j["released_workers"] =
        std::vector<int>(s.released_workers().begin(), s.released_workers().end());
    j["ssp_wait_timeouts"] = s.ssp_wait_timeouts();
  }
  return j;
}

// Logs the final counters, adds the profile's figures and writes
// <run_dir>/ps-<i>/summary.json (when there is a run directory); returns the summary's text.
absl::StatusOr<std::string> WriteSummary(Shard& shard, const ReplicaSet& replicas,
                                         profiler::Profiler& prof, const runtime::TaskConfig& task,
                                         const std::string& run_dir, absl::Time start) {
  pb::StatsResponse stats;
  shard.Stats(&stats);
  replicas.AddStats(&stats);
  spdlog::info(
      "{} final: global step {}, {} pushes received ({} applied, {} dropped, {} "
      "duplicate), {} chunk pulls, {} bytes pushed, {} bytes pulled, {} pull timeouts",
      shard.name(), stats.global_step(), stats.pushes_received(), stats.pushes_applied(),
      stats.pushes_dropped(), stats.pushes_duplicate(), stats.pulls(), stats.bytes_pushed(),
      stats.bytes_pulled(), stats.pull_wait_timeouts());
  nlohmann::json j = SummaryJson(stats);
  // The replicas this ps kept, with the counters of those it served once promoted.
  nlohmann::json kept = nlohmann::json::array();
  for (const auto& [index, replica] : replicas.replicas()) {
    pb::StatsResponse r;
    replica->LocalStats(&r);
    const bool promoted =
        std::find(stats.replicas_promoted().begin(), stats.replicas_promoted().end(), index) !=
        stats.replicas_promoted().end();
    kept.push_back({{"shard", absl::StrCat("ps:", index)},
                    {"promoted", promoted},
                    {"global_step", r.global_step()},
                    {"steps_applied", r.steps_applied()},
                    {"pushes_received", r.pushes_received()},
                    {"pushes_applied", r.pushes_applied()},
                    {"pushes_dropped", r.pushes_dropped()}});
  }
  if (!kept.empty()) j["replicas_kept"] = std::move(kept);
  if (shard.saves() > 0) {  // the in-memory phase of the saves, which training waited for
    j["checkpoint"] = {{"saves", shard.saves()},
                       {"pause_ms", absl::ToDoubleMilliseconds(shard.checkpoint_pause())},
                       {"pause_ms_max", absl::ToDoubleMilliseconds(shard.checkpoint_pause_max())}};
  }
  j["wall_seconds"] = absl::ToDoubleSeconds(absl::Now() - start);
  FULCRUM_RETURN_IF_ERROR(prof.Finish(&j));
  const std::string text = j.dump(2) + "\n";
  if (run_dir.empty()) {
    spdlog::warn(
        "{}: no run directory (neither the chief nor --run_dir gave one); "
        "summary.json not written",
        shard.name());
    return text;
  }
  const std::filesystem::path dir = std::filesystem::path(run_dir) / task.dir_name();
  FULCRUM_RETURN_IF_ERROR(MakeDirs(dir, "run directory"));
  FULCRUM_RETURN_IF_ERROR(WriteFileAtomically(dir / "summary.json", text));
  spdlog::info("{}: summary in {}", shard.name(), (dir / "summary.json").string());
  return text;
}

// The shard's progress as a profiler record.
profiler::PsRecord Progress(const Shard& shard) {
  pb::StatsResponse s;
  shard.LocalStats(&s);
  profiler::PsRecord r;
  r.unix_us = profiler::NowUnixMicros();
  r.global_step = s.global_step();
  r.pushes_received = s.pushes_received();
  r.pushes_applied = s.pushes_applied();
  r.pushes_dropped = s.pushes_dropped();
  r.pulls = s.pulls();
  r.bytes_pushed = s.bytes_pushed();
  r.bytes_pulled = s.bytes_pulled();
  r.apply_ms = static_cast<double>(s.apply_us()) / 1000.0;
  r.wait_ms = static_cast<double>(s.wait_us()) / 1000.0;
  if (s.has_straggler()) {
    r.straggler_worker = s.straggler().worker();
    r.straggler_held_back_ms = s.straggler().held_back_ms();
  }
  return r;
}

// Serves until Shutdown (OK) or a timeout (the error).
// How long a signalled ps keeps serving, waiting for the chief's Shutdown or checkpoint.
constexpr absl::Duration kSignalGrace = absl::Seconds(10);
// How often the allocator's free memory is looked at, and how much of it may grow unreturned
// (malloc is tuned to keep what a step frees; a burst of large requests must not stay).
constexpr absl::Duration kTrimInterval = absl::Seconds(2);
constexpr int64_t kFreeSlack = int64_t{128} << 20;

// A stop signal (SIGTERM from a drained node, Ctrl-C on the whole cluster) as the serving
// loop sees it: the ps says it is leaving and serves on until the chief either ends the run
// (Stop, then Shutdown: a whole-cluster Ctrl-C) or saved a checkpoint for it, or the grace
// period passed. It then leaves without ending training (Shard::Leave): its workers wait for
// it as for a killed ps, never taking its exit for the end of the run.
class SignalWatch {
 public:
  // True when the loop should return now; *reason says why.
  bool Done(Shard& shard, std::string* reason) {
    const int signal = StopSignal();
    if (signal == 0) return false;
    if (deadline_ == absl::InfiniteFuture()) {
      deadline_ = absl::Now() + (shard.initialized() ? kSignalGrace : absl::ZeroDuration());
      saves_ = shard.saves();
      if (shard.initialized()) shard.SetLeaving(absl::StrCat("stopped by ", SignalName(signal)));
    }
    const bool saved = shard.initialized() && !shard.stopped() && shard.saves() > saves_;
    if (!saved && absl::Now() < deadline_) return false;
    *reason = absl::StrCat("interrupted by ", SignalName(signal));
    if (shard.initialized() && !shard.stopped()) {
      shard.Leave();
      *reason = absl::StrCat("left the run (stopped by ", SignalName(signal), ") ",
                             saved ? "after the chief saved a checkpoint"
                                   : "without a checkpoint: the chief did not save one in time");
    }
    return true;
  }

 private:
  absl::Time deadline_ = absl::InfiniteFuture();
  int64_t saves_ = 0;
};

absl::Status Serve(Shard& shard, PsService& service, profiler::Profiler& prof,
                   const runtime::ClusterOptions& cluster, const std::string& fallback_run_dir,
                   std::string* shutdown_reason) {
  const absl::Time start = absl::Now();
  bool announced = false;
  absl::Time next_record = start, next_trim = start + kTrimInterval;
  const absl::Duration poll = std::min(kPollInterval, prof.options().interval);
  SignalWatch signals;
  while (!service.WaitForShutdown(poll, shutdown_reason)) {
    // The summary is written either way.
    if (signals.Done(shard, shutdown_reason)) return absl::OkStatus();
    const absl::Time now = absl::Now();
    if (now >= next_trim) {
      if (const int64_t held = ReturnFreeMemoryAbove(kFreeSlack); held > 0) {
        spdlog::info("{}: gave {} MiB of freed memory back to the kernel", shard.name(),
                     held >> 20);
      }
      next_trim = now + kTrimInterval;
    }
    if (!shard.initialized()) {
      if (now - start > cluster.startup_timeout) {
        return absl::DeadlineExceededError(absl::StrCat(
            shard.name(), ": no chief contact in ", absl::FormatDuration(cluster.startup_timeout),
            " (CreateVariables never arrived; see --startup_timeout)"));
      }
      continue;
    }
    if (!announced) {
      spdlog::info("{}: variables created; serving", shard.name());
      announced = true;
      std::string run_dir = shard.run_dir();
      if (run_dir.empty()) run_dir = fallback_run_dir;
      if (!run_dir.empty()) {
        FULCRUM_RETURN_IF_ERROR(
            prof.SetTaskDir((std::filesystem::path(run_dir) / cluster.task.dir_name()).string()));
      }
    }
    if (prof.enabled() && now >= next_record) {
      prof.RecordPs(Progress(shard));
      next_record = now + prof.options().interval;
    }
    if (now - shard.last_contact() > cluster.heartbeat_timeout) {
      return absl::UnavailableError(absl::StrCat(shard.name(), ": chief silent for ",
                                                 absl::FormatDuration(cluster.heartbeat_timeout),
                                                 " (no RPC at all; see --heartbeat_timeout)"));
    }
  }
  return absl::OkStatus();
}

// The settings every shard of this ps gets, its own and the replicas it keeps.
void ConfigureShard(const runtime::ClusterOptions& cluster, Shard& shard) {
  const runtime::ClusterSpec& spec = cluster.task.cluster;
  // Only the spec's chief and workers may pull and push.
  absl::flat_hash_set<std::string> known;
  for (const char* job : {runtime::kChiefJob, runtime::kWorkerJob}) {
    for (int i = 0; i < spec.num_tasks(job); ++i) known.insert(absl::StrCat(job, ":", i));
  }
  // Without a chief job, worker 0 runs chief:0 in-process (TensorFlow 1.x's layout).
  if (!spec.has_chief_job()) known.insert("chief:0");
  shard.set_known_tasks(std::move(known));
  shard.set_checkpoint_root(cluster.checkpoint_dir, /*refuse_all=*/cluster.checkpoint_dir.empty());
  shard.set_nonfinite_policy(cluster.nonfinite_skip ? NonFinitePolicy::kSkip
                                                    : NonFinitePolicy::kError);
}

// --replicate_shards: the replicas this ps keeps and its own shard's link to its backup.
std::unique_ptr<ReplicaSet> MakeReplicaSet(const runtime::ClusterOptions& cluster, Shard& shard) {
  const runtime::ClusterSpec& spec = cluster.task.cluster;
  return std::make_unique<ReplicaSet>(
      &shard,
      [&cluster, &spec](int backup) -> absl::StatusOr<std::unique_ptr<Replicator>> {
        if (backup < 0 || backup >= spec.num_tasks(runtime::kPsJob)) {
          return absl::InvalidArgumentError(
              absl::StrCat("backup_task ", backup, ": the cluster spec has ",
                           spec.num_tasks(runtime::kPsJob), " ps task(s)"));
        }
        auto client = std::make_unique<runtime::GrpcPsClient>(
            absl::StrCat("ps:", backup), spec.address(runtime::kPsJob, backup), cluster.security);
        return std::make_unique<GrpcReplicator>(std::move(client), backup);
      },
      [&cluster](Shard& replica) { ConfigureShard(cluster, replica); });
}

}  // namespace

absl::Status RunPsTask(const runtime::ClusterOptions& cluster,
                       const runtime::TrainingOptions& training,
                       const runtime::ProfileFlags& profile) {
  const absl::Time start = absl::Now();
  const runtime::TaskConfig& task = cluster.task;
  InitLogging(task.dir_name());
  cluster.security.LogMode(task.task_name());
  FULCRUM_ASSIGN_OR_RETURN(std::unique_ptr<profiler::Profiler> prof,
                           profiler::Profiler::Start(runtime::ProfilerOptionsFor(
                               profile, &task.cluster, task.job_name, task.task_index, "")));
  Shard shard(task.task_index);
  ConfigureShard(cluster, shard);
  PsService service(&shard, prof.get(), runtime::CallGuard(cluster.security));
  const std::unique_ptr<ReplicaSet> replicas = MakeReplicaSet(cluster, shard);
  service.set_replicas(replicas.get());
  const std::string& address = task.address();
  std::unique_ptr<transport::TcpDataServer> data_plane;
  if (cluster.tcp_data_plane) {
    FULCRUM_ASSIGN_OR_RETURN(data_plane, StartDataPlane(&service, shard.name(), HostOf(address)));
    spdlog::info("{}: tcp data plane on {}:{}", shard.name(), HostOf(address), data_plane->port());
  }
  // A sync server takes a thread per running call, and in sync mode every worker may have a
  // Pull per chunk blocked until its step completes: gRPC grows the pool on demand up to the
  // resource quota's thread limit, which stays at its default (unbounded).
  FULCRUM_ASSIGN_OR_RETURN(
      runtime::StartedServer started,
      runtime::StartGrpcServer(shard.name(), address, {&service}, cluster.security));
  std::unique_ptr<grpc::Server> server = std::move(started.server);
  spdlog::info("{} listening on {} (cluster spec from {})", shard.name(), address, task.source);

  std::string reason;
  absl::Status status = Serve(shard, service, *prof, cluster, training.run_dir, &reason);
  if (status.ok()) {
    spdlog::info("{}: shutdown requested: {}", shard.name(),
                 reason.empty() ? "no reason given" : reason);
    if (prof->enabled()) prof->RecordPs(Progress(shard));
    std::string run_dir = shard.run_dir();
    if (run_dir.empty()) run_dir = training.run_dir;
    absl::StatusOr<std::string> summary =
        WriteSummary(shard, *replicas, *prof, task, run_dir, start);
    // The chief's Shutdown call waits for this text (the report gathers every task's).
    service.SetShutdownSummary(summary.ok() ? *summary : std::string());
    status = summary.status();
  }
  // A Shutdown call that waits for the summary must not wait for one that will not come.
  if (!status.ok()) service.SetShutdownSummary("");
  // Wake every waiting pull so the handlers return, then stop the server.
  // (A ps that left, on a signal, ends nothing: its workers wait for it to come back.)
  if (!shard.left()) replicas->StopAll(status.ok() ? "shutdown" : std::string(status.message()));
  server->Shutdown(std::chrono::system_clock::now() + absl::ToChronoMilliseconds(kShutdownGrace));
  server->Wait();
  if (data_plane != nullptr) data_plane->Shutdown();
  return status;
}

}  // namespace fulcrum::ps
