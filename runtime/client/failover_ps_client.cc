#include "runtime/client/failover_ps_client.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"

namespace fulcrum::runtime {

void FailoverPsClient::Promote() {
  if (!promoted_.exchange(true, std::memory_order_acq_rel)) {
    spdlog::warn("{} is served by its replica at {} from now on", shard_, backup_->target());
  }
}

PsClient* FailoverPsClient::current() const { return promoted() ? backup_ : primary_; }

PsClient* FailoverPsClient::PickForData() const {
  if (promoted() || try_backup_.load(std::memory_order_acquire)) return backup_;
  return primary_;
}

PsClient::Done FailoverPsClient::Learn(PsClient* used, Done done) {
  return [this, used, done = std::move(done)](absl::Status s) mutable {
    if (!promoted()) {
      if (used == primary_) {
        if (absl::IsUnavailable(s)) try_backup_.store(true, std::memory_order_release);
      } else if (s.ok()) {
        Promote();
      } else {
        try_backup_.store(false, std::memory_order_release);
      }
    }
    done(std::move(s));
  };
}

void FailoverPsClient::PullAsync(const pb::PullRequest* request, PullReply* response,
                                 absl::Duration timeout, Done done) {
  PsClient* c = PickForData();
  c->PullAsync(request, response, timeout, Learn(c, std::move(done)));
}

void FailoverPsClient::PushAsync(const PushFrame* request, PushReply* response,
                                 absl::Duration timeout, Done done) {
  PsClient* c = PickForData();
  c->PushAsync(request, response, timeout, Learn(c, std::move(done)));
}

void FailoverPsClient::PushPullAsync(const PushFrame* request, PushReply* response,
                                     absl::Duration timeout, Done done) {
  PsClient* c = PickForData();
  c->PushPullAsync(request, response, timeout, Learn(c, std::move(done)));
}

absl::Status FailoverPsClient::CreateVariables(const pb::CreateVariablesRequest& request,
                                               pb::CreateVariablesResponse* response,
                                               absl::Duration timeout) {
  return current()->CreateVariables(request, response, timeout);
}

absl::Status FailoverPsClient::SaveShard(const pb::SaveShardRequest& request,
                                         pb::SaveShardResponse* response, absl::Duration timeout) {
  return current()->SaveShard(request, response, timeout);
}

absl::Status FailoverPsClient::RestoreShard(const pb::RestoreShardRequest& request,
                                            pb::RestoreShardResponse* response,
                                            absl::Duration timeout) {
  return current()->RestoreShard(request, response, timeout);
}

absl::Status FailoverPsClient::Stats(pb::StatsResponse* response, absl::Duration timeout) {
  return current()->Stats(response, timeout);
}

absl::Status FailoverPsClient::Stop(const std::string& reason, absl::Duration timeout) {
  return current()->Stop(reason, timeout);
}

absl::Status FailoverPsClient::Shutdown(const std::string& reason, absl::Duration timeout,
                                        std::string* summary_json) {
  return current()->Shutdown(reason, timeout, summary_json);
}

absl::Status FailoverPsClient::Ping(const pb::PingRequest& request, pb::PingResponse* response,
                                    absl::Duration timeout) {
  return current()->Ping(request, response, timeout);
}

absl::Status FailoverPsClient::ReleaseWorkers(const pb::ReleaseWorkersRequest& request,
                                              absl::Duration timeout) {
  return current()->ReleaseWorkers(request, timeout);
}

RoutedPsClients RoutePsClients(const std::vector<GrpcPsClient*>& primaries,
                               const ClusterSpec& cluster, const TransportSecurity& security,
                               bool replicate) {
  RoutedPsClients out;
  const int n = static_cast<int>(primaries.size());
  for (int p = 0; p < n; ++p) {
    GrpcPsClient* primary = primaries[static_cast<size_t>(p)];
    if (!replicate || n < 2) {
      out.routed.push_back(primary);
      continue;
    }
    const int b = (p + 1) % n;
    auto backup = std::make_unique<GrpcPsClient>(absl::StrCat("ps:", b), cluster.address(kPsJob, b),
                                                 security);
    backup->set_shard(p);
    backup->set_observer(primary->observer());
    backup->set_call_tracker(primary->call_tracker());
    backup->set_tcp_data_plane(primary->tcp_data_plane());
    out.failover.push_back(
        std::make_unique<FailoverPsClient>(absl::StrCat("ps:", p), primary, backup.get()));
    out.backups.push_back(std::move(backup));
    out.routed.push_back(out.failover.back().get());
  }
  return out;
}

}  // namespace fulcrum::runtime
