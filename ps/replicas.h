// ps: --replicate_shards on the ps side. Shard i's replica lives on ps (i + 1) mod n, its
// backup: the chief creates it there (CreateVariablesRequest.as_replica) from the same
// definition, so it starts bit-identical, and the primary forwards every apply to it
// (ps/shard_replica.cc). When the chief finds ps i dead it promotes the replica: from then on
// the backup serves requests that name shard i (PullRequest.shard, ...), and refuses further
// forwards, so a primary that was only cut off stops serving (it is fenced).
//
// ReplicaSet is one ps task's view: its own shard, the replicas it keeps, which of them it
// serves, and the link from its own shard to its backup (GrpcReplicator).
// Thread-safety: every method may be called from many threads at once; replica shards are
// never removed, so a routed Shard* stays valid for the set's life.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "base/mutex.h"
#include "proto/ps.pb.h"
#include "ps/shard.h"
#include "runtime/client/grpc_ps_client.h"

namespace fulcrum::ps {

// How long a primary waits for its backup to apply one forward before it goes on alone.
inline constexpr absl::Duration kForwardTimeout = absl::Seconds(10);

// Forwards a primary's applies over gRPC to its backup ps.
class GrpcReplicator final : public Replicator {
 public:
  // `client` talks to ps `backup_task`.
  GrpcReplicator(std::unique_ptr<runtime::GrpcPsClient> client, int backup_task)
      : client_(std::move(client)), backup_task_(backup_task) {}
  std::unique_ptr<Pending> Start(pb::ReplicateRequest request) override;
  int backup_task() const override { return backup_task_; }

 private:
  std::unique_ptr<runtime::GrpcPsClient> client_;
  const int backup_task_;
};

class ReplicaSet {
 public:
  // The link from the own shard to ps `backup_task`; InvalidArgument for a task the cluster
  // does not have.
  using LinkFactory = std::function<absl::StatusOr<std::unique_ptr<Replicator>>(int backup_task)>;
  // Gives a new replica shard the own shard's settings (known tasks, checkpoint root, ...).
  using Configure = std::function<void(Shard& replica)>;
  // `own` is this ps's shard (not owned).
  ReplicaSet(Shard* own, LinkFactory link, Configure configure)
      : own_(own), link_(std::move(link)), configure_(std::move(configure)) {}

  Shard& own() { return *own_; }
  // CreateVariables as the chief sent it: into a replica (as_replica; created on first use)
  // or into the own shard, whose forwards then go to request.backup_task().
  absl::Status CreateVariables(const pb::CreateVariablesRequest& request,
                               pb::CreateVariablesResponse* response);
  // A forward from the primary of request.shard(): Aborted once that replica is promoted
  // (the primary is fenced), FailedPrecondition for a shard this ps keeps no replica of.
  absl::Status Replicate(const pb::ReplicateRequest& request);
  // Serves the replica of `shard` from now on; its global step. FailedPrecondition when this
  // ps keeps no replica of it (or it was never created).
  absl::StatusOr<int64_t> Promote(int shard, const std::string& reason);
  // The shard a request addresses: the own one for no shard or the own index, a promoted
  // replica; Unavailable for a replica not promoted (its primary is alive as far as the
  // chief knows: the caller should try the primary again); InvalidArgument otherwise.
  absl::StatusOr<Shard*> Route(std::optional<int> shard, const char* method);
  // The replica of `shard`, promoted or not (the chief restores every copy of a shard);
  // InvalidArgument naming `method` when this ps keeps none.
  absl::StatusOr<Shard*> Replica(int shard, const char* method);
  // Stops every replica too (training ended).
  void StopAll(const std::string& reason);
  // Adds the replicas held and promoted to `stats`.
  void AddStats(pb::StatsResponse* stats) const;
  // The replica shards (for their summaries), by shard index.
  std::map<int, Shard*> replicas() const;

 private:
  Shard* const own_;
  LinkFactory link_;
  Configure configure_;
  mutable Mutex mu_;
  std::map<int, std::unique_ptr<Shard>> replicas_ ABSL_GUARDED_BY(mu_);
  std::set<int> promoted_ ABSL_GUARDED_BY(mu_);
};

}  // namespace fulcrum::ps
