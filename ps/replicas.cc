#include "ps/replicas.h"

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "base/status_macros.h"
#include "spdlog/spdlog.h"

namespace fulcrum::ps {
namespace {

// One forward over gRPC: its messages and outcome live until both the call and the waiter
// are done with them (a waiter past its deadline leaves the call to finish alone).
struct ForwardCall {
  pb::ReplicateRequest request;
  pb::ReplicateResponse response;
  absl::Notification done;
  absl::Status status;
};

class GrpcPending final : public Replicator::Pending {
 public:
  explicit GrpcPending(std::shared_ptr<ForwardCall> call) : call_(std::move(call)) {}
  absl::Status Wait() override {
    // The call's own deadline is kForwardTimeout; the slack covers its callback.
    if (!call_->done.WaitForNotificationWithTimeout(kForwardTimeout + absl::Seconds(5))) {
      return absl::DeadlineExceededError("the backup did not answer the forward");
    }
    return call_->status;
  }

 private:
  std::shared_ptr<ForwardCall> call_;
};

}  // namespace

std::unique_ptr<Replicator::Pending> GrpcReplicator::Start(pb::ReplicateRequest request) {
  auto call = std::make_shared<ForwardCall>();
  call->request = std::move(request);
  client_->ReplicateAsync(&call->request, &call->response, kForwardTimeout, [call](absl::Status s) {
    call->status = std::move(s);
    call->done.Notify();
  });
  return std::make_unique<GrpcPending>(call);
}

absl::Status ReplicaSet::CreateVariables(const pb::CreateVariablesRequest& request,
                                         pb::CreateVariablesResponse* response) {
  if (!request.as_replica()) {
    if (request.has_backup_task() && !own_->initialized()) {
      if (request.backup_task() == own_->task_index()) {
        return absl::InvalidArgumentError(
            absl::StrCat(own_->name(), ": CreateVariables: backup_task ", request.backup_task(),
                         " is this ps itself (a replica must live on another ps)"));
      }
      FULCRUM_ASSIGN_OR_RETURN(std::unique_ptr<Replicator> link, link_(request.backup_task()));
      own_->set_replicator(std::move(link));
    }
    return own_->CreateVariables(request, response);
  }
  const int shard = request.task_index();
  if (shard == own_->task_index()) {
    return absl::InvalidArgumentError(absl::StrCat(own_->name(),
                                                   ": CreateVariables: a replica of ps:", shard,
                                                   " cannot live on ps:", shard, " itself"));
  }
  Shard* replica;
  {
    MutexLock lock(&mu_);
    std::unique_ptr<Shard>& slot = replicas_[shard];
    if (slot == nullptr) {
      slot = std::make_unique<Shard>(shard);
      configure_(*slot);
    }
    replica = slot.get();
  }
  pb::CreateVariablesRequest def = request;
  def.set_as_replica(false);
  def.clear_backup_task();
  // A replica writes nothing under the run directory: the primary's records are there.
  return replica->CreateVariables(def, response);
}

absl::Status ReplicaSet::Replicate(const pb::ReplicateRequest& request) {
  Shard* replica = nullptr;
  {
    MutexLock lock(&mu_);
    const auto it = replicas_.find(request.shard());
    if (it == replicas_.end()) {
      return absl::FailedPreconditionError(absl::StrCat(
          own_->name(), ": Replicate: this ps keeps no replica of ps:", request.shard()));
    }
    if (promoted_.contains(request.shard())) {
      return absl::AbortedError(absl::StrCat(own_->name(), " serves ps:", request.shard(),
                                             "'s shard now (the chief took ps:", request.shard(),
                                             " for dead)"));
    }
    replica = it->second.get();
  }
  return replica->ApplyReplicated(request);
}

absl::StatusOr<int64_t> ReplicaSet::Promote(int shard, const std::string& reason) {
  Shard* replica = nullptr;
  {
    MutexLock lock(&mu_);
    const auto it = replicas_.find(shard);
    if (it == replicas_.end() || !it->second->initialized()) {
      return absl::FailedPreconditionError(
          absl::StrCat(own_->name(), ": PromoteReplica: this ps keeps no replica of ps:", shard));
    }
    replica = it->second.get();
    if (promoted_.insert(shard).second) {
      spdlog::warn("{} serves the replica of ps:{} from now on ({})", own_->name(), shard, reason);
    }
  }
  pb::StatsResponse stats;
  replica->LocalStats(&stats);
  return stats.global_step();
}

absl::StatusOr<Shard*> ReplicaSet::Route(std::optional<int> shard, const char* method) {
  if (!shard || *shard == own_->task_index()) return own_;
  FULCRUM_ASSIGN_OR_RETURN(Shard * replica, Replica(*shard, method));
  MutexLock lock(&mu_);
  if (!promoted_.contains(*shard)) {
    return absl::UnavailableError(absl::StrCat(own_->name(), ": ", method, " for ps:", *shard,
                                               ": the replica here is not promoted (ps:", *shard,
                                               " is alive as far as the chief knows)"));
  }
  return replica;
}

absl::StatusOr<Shard*> ReplicaSet::Replica(int shard, const char* method) {
  MutexLock lock(&mu_);
  const auto it = replicas_.find(shard);
  if (it == replicas_.end()) {
    return absl::InvalidArgumentError(absl::StrCat(own_->name(), ": ", method, " for ps:", shard,
                                                   ": this ps holds no replica of that shard"));
  }
  return it->second.get();
}

void ReplicaSet::StopAll(const std::string& reason) {
  own_->Stop(reason);
  for (const auto& [shard, replica] : replicas()) replica->Stop(reason);
}

void ReplicaSet::AddStats(pb::StatsResponse* stats) const {
  MutexLock lock(&mu_);
  for (const auto& [shard, replica] : replicas_) {
    stats->add_replicas_held(shard);
    if (promoted_.contains(shard)) stats->add_replicas_promoted(shard);
  }
}

std::map<int, Shard*> ReplicaSet::replicas() const {
  std::map<int, Shard*> out;
  MutexLock lock(&mu_);
  for (const auto& [shard, replica] : replicas_) out[shard] = replica.get();
  return out;
}

}  // namespace fulcrum::ps
