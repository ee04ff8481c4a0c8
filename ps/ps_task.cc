#include "ps/ps_task.h"

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/logging.h"
#include "base/status_macros.h"
#include "nlohmann/json.hpp"
#include "ps/service.h"
#include "ps/shard.h"
#include "spdlog/spdlog.h"

namespace fulcrum::ps {
namespace {

// How often the runner checks its timeouts while it waits for Shutdown.
constexpr absl::Duration kPollInterval = absl::Milliseconds(200);
// How long in-flight calls get to finish once the server shuts down.
constexpr absl::Duration kShutdownGrace = absl::Seconds(2);

// Writes the file next to its final name and renames it into place, so a crash never
// leaves a half-written summary.
absl::Status WriteFileAtomically(const std::filesystem::path& path, const std::string& text) {
  const std::filesystem::path tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    out.flush();
    if (!out) return absl::InternalError(absl::StrCat(tmp.string(), ": write failed"));
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) return absl::InternalError(absl::StrCat(path.string(), ": ", ec.message()));
  return absl::OkStatus();
}

nlohmann::json SummaryJson(const pb::StatsResponse& s) {
  nlohmann::json j;
  j["job"] = "ps";
  j["task_index"] = s.task_index();
  j["mode"] = s.mode() == pb::MODE_SYNC ? "sync" : s.mode() == pb::MODE_ASYNC ? "async" : "unknown";
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
  j["steps_applied"] = s.steps_applied();
  j["pulls"] = s.pulls();
  j["bytes_pushed"] = s.bytes_pushed();
  j["bytes_pulled"] = s.bytes_pulled();
  j["pull_wait_timeouts"] = s.pull_wait_timeouts();
  return j;
}

// Logs the final counters and writes <run_dir>/ps-<i>/summary.json.
absl::Status WriteSummary(Shard& shard, const runtime::TaskConfig& task,
                          const std::string& fallback_run_dir) {
  pb::StatsResponse stats;
  shard.Stats(&stats);
  spdlog::info(
      "{} final: global step {}, {} pushes received ({} applied, {} dropped, {} "
      "duplicate), {} chunk pulls, {} bytes pushed, {} bytes pulled, {} pull timeouts",
      shard.name(), stats.global_step(), stats.pushes_received(), stats.pushes_applied(),
      stats.pushes_dropped(), stats.pushes_duplicate(), stats.pulls(), stats.bytes_pushed(),
      stats.bytes_pulled(), stats.pull_wait_timeouts());
  std::string run_dir = shard.run_dir();
  if (run_dir.empty()) run_dir = fallback_run_dir;
  if (run_dir.empty()) {
    spdlog::warn(
        "{}: no run directory (neither the chief nor --run_dir gave one); "
        "summary.json not written",
        shard.name());
    return absl::OkStatus();
  }
  const std::filesystem::path dir = std::filesystem::path(run_dir) / task.dir_name();
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    return absl::UnavailableError(
        absl::StrCat(shard.name(), ": cannot create ", dir.string(), ": ", ec.message()));
  }
  FULCRUM_RETURN_IF_ERROR(
      WriteFileAtomically(dir / "summary.json", SummaryJson(stats).dump(2) + "\n"));
  spdlog::info("{}: summary in {}", shard.name(), (dir / "summary.json").string());
  return absl::OkStatus();
}

// Serves until Shutdown (OK) or a timeout (the error).
absl::Status Serve(Shard& shard, PsService& service, const runtime::ClusterOptions& cluster,
                   std::string* shutdown_reason) {
  const absl::Time start = absl::Now();
  bool announced = false;
  while (!service.WaitForShutdown(kPollInterval, shutdown_reason)) {
    const absl::Time now = absl::Now();
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
    }
    if (now - shard.last_contact() > cluster.heartbeat_timeout) {
      return absl::UnavailableError(absl::StrCat(shard.name(), ": chief silent for ",
                                                 absl::FormatDuration(cluster.heartbeat_timeout),
                                                 " (no RPC at all; see --heartbeat_timeout)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status RunPsTask(const runtime::ClusterOptions& cluster,
                       const runtime::TrainingOptions& training) {
  const runtime::TaskConfig& task = cluster.task;
  InitLogging(task.dir_name());
  Shard shard(task.task_index);
  PsService service(&shard);
  const std::string& address = task.address();
  FULCRUM_ASSIGN_OR_RETURN(std::unique_ptr<grpc::Server> server,
                           StartServer(&service, shard.name(), address, nullptr));
  spdlog::info("{} listening on {} (cluster spec from {})", shard.name(), address, task.source);

  std::string reason;
  absl::Status status = Serve(shard, service, cluster, &reason);
  if (status.ok()) {
    spdlog::info("{}: shutdown requested: {}", shard.name(),
                 reason.empty() ? "no reason given" : reason);
    status = WriteSummary(shard, task, training.run_dir);
  }
  // Wake every waiting pull so the handlers return, then stop the server.
  shard.Stop(status.ok() ? "shutdown" : std::string(status.message()));
  server->Shutdown(std::chrono::system_clock::now() + absl::ToChronoMilliseconds(kShutdownGrace));
  server->Wait();
  return status;
}

}  // namespace fulcrum::ps
