#include "chief/ps_tasks.h"

#include <algorithm>
#include <limits>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "base/signals.h"
#include "base/status_macros.h"
#include "runtime/grpc/grpc_util.h"
#include "spdlog/spdlog.h"

namespace fulcrum::chief {
namespace {

// How long one readiness probe of a ps waits, and how often the waiting is logged.
constexpr absl::Duration kReadyProbe = absl::Milliseconds(500);
constexpr absl::Duration kLogEvery = absl::Seconds(5);

}  // namespace

PsTasks::PsTasks(const runtime::ClusterSpec& cluster, const runtime::Placement& placement,
                 int64_t chunk_bytes, const std::string& caller, profiler::RpcObserver* observer,
                 const runtime::TransportSecurity& security, bool replicate) {
  std::vector<runtime::GrpcPsClient*> clients;
  for (int p = 0; p < cluster.num_tasks(runtime::kPsJob); ++p) {
    clients_.push_back(std::make_unique<runtime::GrpcPsClient>(
        absl::StrCat("ps:", p), cluster.address(runtime::kPsJob, p), security));
    clients_.back()->set_observer(observer);
    clients_.back()->set_call_tracker(&calls_);
    clients.push_back(clients_.back().get());
  }
  routed_ = runtime::RoutePsClients(clients, cluster, security, replicate);
  sharded_ =
      std::make_unique<runtime::ShardedVariables>(placement, chunk_bytes, routed_.routed, caller);
}

absl::Status PsTasks::CreateReplica(int p, const pb::CreateVariablesRequest& definition) {
  pb::CreateVariablesRequest request = definition;
  request.set_as_replica(true);
  request.clear_backup_task();
  pb::CreateVariablesResponse response;
  FULCRUM_RETURN_IF_ERROR(Remote(clients_[static_cast<size_t>(backup_of(p))]->CreateVariables(
      request, &response, control_timeout_)));
  spdlog::info("ps:{} keeps a replica of ps:{} ({} bytes)", backup_of(p), p, response.bytes_held());
  return absl::OkStatus();
}

absl::StatusOr<int64_t> PsTasks::Promote(int p, const std::string& reason) {
  const int b = backup_of(p);
  pb::PromoteReplicaRequest request;
  request.set_shard(p);
  request.set_reason(reason);
  pb::PromoteReplicaResponse response;
  FULCRUM_RETURN_IF_ERROR(Remote(
      clients_[static_cast<size_t>(b)]->PromoteReplica(request, &response, control_timeout_)));
  routed_.failover[static_cast<size_t>(p)]->Promote();
  return response.global_step();
}

absl::Status PsTasks::Remote(absl::Status status) {
  return runtime::RemoteFailure(std::move(status));
}

absl::Status PsTasks::WaitUntilReady(absl::Time deadline, absl::Duration startup_timeout) {
  std::vector<bool> ready(clients_.size(), false);
  absl::Time next_log = absl::Now();
  while (true) {
    std::vector<std::string> missing;        // "ps:1"
    std::vector<std::string> missing_where;  // "ps:1 at host:port"
    for (size_t p = 0; p < clients_.size(); ++p) {
      if (!ready[p]) ready[p] = clients_[p]->WaitUntilReady(kReadyProbe);
      if (ready[p]) continue;
      missing.push_back(clients_[p]->name());
      missing_where.push_back(absl::StrCat(clients_[p]->name(), " at ", clients_[p]->target()));
    }
    if (missing.empty()) return absl::OkStatus();
    if (const int signal = StopSignal(); signal != 0) {
      return absl::CancelledError(absl::StrCat("chief: interrupted by ", SignalName(signal),
                                               " while waiting for ",
                                               absl::StrJoin(missing_where, ", ")));
    }
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("chief: ", absl::StrJoin(missing, ", "), " did not answer within ",
                       absl::FormatDuration(startup_timeout), " (--startup_timeout)"));
    }
    if (absl::Now() >= next_log) {
      spdlog::info("waiting for {}", absl::StrJoin(missing_where, ", "));
      next_log = absl::Now() + kLogEvery;
    }
  }
}

absl::Status PsTasks::CreateVariables(int ps, const pb::CreateVariablesRequest& request,
                                      pb::CreateVariablesResponse* response) {
  return Remote(
      clients_[static_cast<size_t>(ps)]->CreateVariables(request, response, control_timeout_));
}

void PsTasks::Warm(int64_t bytes) {
  for (auto& client : clients_) client->Warm(bytes, 2, control_timeout_).IgnoreError();
}

absl::StatusOr<int64_t> PsTasks::GlobalStep(absl::Duration timeout) {
  int64_t step = std::numeric_limits<int64_t>::max();
  leaving_.clear();
  leaving_ps_ = -1;
  lost_ = -1;
  for (int p = 0; p < size(); ++p) {
    pb::StatsResponse stats;
    if (absl::Status s = Remote(shard(p).Stats(&stats, timeout)); !s.ok()) {
      lost_ = p;
      return absl::UnavailableError(absl::StrCat(
          "chief lost ps:", p, ": no answer to Stats within ", absl::FormatDuration(timeout),
          " (--step_timeout; the ps is dead, stopped or stalled): ", s.message()));
    }
    // A ps restarted between two polls answers, but without its variables.
    if (!stats.initialized()) {
      lost_ = p;  // as good as dead: its replica, if any, takes over
      return absl::UnavailableError(
          absl::StrCat("chief lost ps:", p, ": it answers but holds no variables (it restarted)"));
    }
    step = std::min(step, stats.global_step());
    if (!stats.leaving().empty() && leaving_.empty()) {
      leaving_ = absl::StrCat("ps:", p, " (", stats.leaving(), ")");
      leaving_ps_ = p;
    }
  }
  return step;
}

absl::Status PsTasks::Stats(int ps, pb::StatsResponse* stats, absl::Duration timeout) {
  return Remote(shard(ps).Stats(stats, timeout));
}

absl::Status PsTasks::CheckCheckpointsEnabled(absl::Duration timeout) {
  for (int p = 0; p < size(); ++p) {
    pb::StatsResponse stats;
    FULCRUM_RETURN_IF_ERROR(Remote(shard(p).Stats(&stats, timeout)));
    if (!stats.checkpoints_enabled()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--checkpoint_dir is given to the chief but ps:", p,
                       " was started without it: give every task the same --checkpoint_dir"));
    }
  }
  return absl::OkStatus();
}

absl::Status PsTasks::PullAll(absl::Duration timeout, std::span<ops::Tensor> values,
                              runtime::TransferResult* result) {
  return Remote(sharded_->PullAll(/*min_step=*/0, timeout, values, result));
}

absl::Status PsTasks::SaveShards(const std::vector<pb::SaveShardRequest>& requests,
                                 std::vector<pb::SaveShardResponse>* responses,
                                 absl::Duration timeout) {
  responses->assign(clients_.size(), pb::SaveShardResponse());
  std::vector<absl::Status> results(clients_.size());
  {
    std::vector<std::jthread> threads;
    for (size_t p = 0; p < clients_.size(); ++p) {
      threads.emplace_back([&, p] {
        results[p] = shard(static_cast<int>(p)).SaveShard(requests[p], &(*responses)[p], timeout);
      });
    }
  }
  for (const absl::Status& s : results) {
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status PsTasks::RestoreShard(int ps, const pb::RestoreShardRequest& request,
                                   pb::RestoreShardResponse* response, absl::Duration timeout) {
  if (replicates() && !promoted(ps)) {
    // The replica first (a restarted primary takes no push before its own restore), to the
    // same state, or its forwards would no longer line up.
    pb::RestoreShardRequest replica = request;
    replica.set_shard(ps);
    pb::RestoreShardResponse ignored;
    if (absl::Status s =
            clients_[static_cast<size_t>(backup_of(ps))]->RestoreShard(replica, &ignored, timeout);
        !s.ok()) {
      spdlog::warn(
          "chief: the replica of ps:{} on ps:{} was not restored ({}): its forwards will not "
          "line up and ps:{} goes on without a replica",
          ps, backup_of(ps), s.ToString(), ps);
    }
  }
  FULCRUM_RETURN_IF_ERROR(shard(ps).RestoreShard(request, response, timeout));
  return absl::OkStatus();
}

absl::Status PsTasks::ReleaseWorkers(const std::vector<int>& workers, const std::string& reason) {
  pb::ReleaseWorkersRequest request;
  for (const int w : workers) request.add_workers(w);
  request.set_reason(reason);
  for (int p = 0; p < size(); ++p) {
    FULCRUM_RETURN_IF_ERROR(Remote(shard(p).ReleaseWorkers(request, control_timeout_)));
  }
  return absl::OkStatus();
}

void PsTasks::StopAll(const std::string& reason) {
  for (size_t p = 0; p < clients_.size(); ++p) {
    if (promoted(static_cast<int>(p))) continue;  // dead; its backup's Stop covers its shard
    if (absl::Status s = Remote(clients_[p]->Stop(reason, control_timeout_)); !s.ok()) {
      spdlog::warn("stopping ps:{}: {}", p, s.ToString());
    }
  }
}

std::vector<std::string> PsTasks::ShutdownAll(const std::string& reason) {
  std::vector<std::string> summaries(clients_.size());
  for (size_t p = 0; p < clients_.size(); ++p) {
    if (promoted(static_cast<int>(p))) {
      // Its replica served the shard since it died; a launcher may have restarted it
      // (local_cluster.sh --restart), holding no variables: it ends with the run too, or it
      // would wait out --startup_timeout and fail the launch. Its summary is not the shard's.
      std::string ignored;
      const absl::Status s =
          clients_[p]->Shutdown(absl::StrCat(reason, " (its shard was served by its replica on ps:",
                                             backup_of(static_cast<int>(p)), ")"),
                                std::min(control_timeout_, absl::Seconds(2)), &ignored);
      if (s.ok())
        spdlog::info("chief: shut down the restarted ps:{} (its replica held its shard)", p);
      continue;
    }
    absl::Status s = Remote(clients_[p]->Shutdown(reason, control_timeout_, &summaries[p]));
    if (!s.ok()) spdlog::warn("shutting down ps:{}: {}", p, s.ToString());
  }
  return summaries;
}

}  // namespace fulcrum::chief
