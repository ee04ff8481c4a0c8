// chief: the chief's handle on the ps tasks of the cluster, one GrpcPsClient each plus the
// ShardedVariables the evaluation pulls through. Every answer of a ps passes through
// runtime::RemoteFailure here, in one place: an error a ps reports is a failure of the run
// (exit 1), never bad input of the chief, whatever its code.
// Thread-safety: one caller at a time (the chief's run loop).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "ops/tensor.h"
#include "profiler/rpc_observer.h"
#include "proto/ps.pb.h"
#include "runtime/client/call_tracker.h"
#include "runtime/client/failover_ps_client.h"
#include "runtime/client/grpc_ps_client.h"
#include "runtime/client/sharded_variables.h"
#include "runtime/cluster/cluster_spec.h"
#include "runtime/cluster/placement.h"

namespace fulcrum::chief {

class PsTasks {
 public:
  // Clients for every ps of `cluster`, reporting to `observer` (not owned, may be null);
  // `placement` (copied by the ShardedVariables) places the model's variables on them;
  // `caller` names the chief in requests ("chief:0"); `security` secures the channels.
  // With `replicate` (--replicate_shards) ps p's shard has a replica on ps (p + 1) mod n,
  // which serves it once Promote(p) was called.
  PsTasks(const runtime::ClusterSpec& cluster, const runtime::Placement& placement,
          int64_t chunk_bytes, const std::string& caller, profiler::RpcObserver* observer,
          const runtime::TransportSecurity& security, bool replicate = false);

  int size() const { return static_cast<int>(clients_.size()); }
  // The deadline of CreateVariables, Stop, Shutdown and the warm-up pings (default 30 s; the
  // chief sets the larger of that and --step_timeout).
  void set_control_timeout(absl::Duration timeout) { control_timeout_ = timeout; }

  // Waits until every ps answers a ping, logging the missing ones every few seconds.
  // DeadlineExceeded naming them (and `startup_timeout`, the flag's value) once `deadline`
  // passed.
  absl::Status WaitUntilReady(absl::Time deadline, absl::Duration startup_timeout);
  // Creates ps `ps`'s variables (the chief's one CreateVariables per ps and run).
  absl::Status CreateVariables(int ps, const pb::CreateVariablesRequest& request,
                               pb::CreateVariablesResponse* response);
  // Grows every connection's flow-control windows for `bytes`-sized transfers; best effort.
  void Warm(int64_t bytes);
  // The cluster's global step: the slowest ps's (a sync step is complete once every ps
  // applied it). Unavailable naming the ps that did not answer within `timeout` (the
  // chief passes --step_timeout: a ps stalled for less than that is waited for). The calls
  // are also the ps tasks' sign that the chief is alive. Unavailable too for a ps that
  // answers without its variables (it restarted since the last poll).
  absl::StatusOr<int64_t> GlobalStep(absl::Duration timeout);
  // The first ps that said it is leaving the run in the last GlobalStep ("ps:0 (stopped by
  // SIGTERM)"); empty when none.
  const std::string& leaving() const { return leaving_; }
  int leaving_ps() const { return leaving_ps_; }  // its index (-1: none)
  // The chief's calls to the ps tasks in flight (thread-safe: the watchdog reads it).
  const runtime::CallTracker& calls() const { return calls_; }
  // The ps whose Stats failed in the last GlobalStep (-1: none).
  int lost() const { return lost_; }

  // --replicate_shards.
  bool replicates() const { return !routed_.failover.empty(); }
  // The ps keeping ps p's replica.
  int backup_of(int p) const { return (p + 1) % size(); }
  bool promoted(int p) const {
    return replicates() && routed_.failover[static_cast<size_t>(p)]->promoted();
  }
  // Creates ps p's replica on its backup from ps p's definition.
  absl::Status CreateReplica(int p, const pb::CreateVariablesRequest& definition);
  // Has ps p's backup serve its shard from now on (ps p is dead); the replica's global step.
  // FailedPrecondition when the backup keeps no replica (or is promoted for it already, or
  // is itself dead: Unavailable), naming both.
  absl::StatusOr<int64_t> Promote(int p, const std::string& reason);

  // One ps's Stats (the chief's recovery asks each ps whether it restarted).
  absl::Status Stats(int ps, pb::StatsResponse* stats, absl::Duration timeout);
  // OK when every ps accepts checkpoints (was given a --checkpoint_dir); InvalidArgument naming
  // the first that was not.
  absl::Status CheckCheckpointsEnabled(absl::Duration timeout);
  // Reads every variable into `values` (model order), as a worker's pull does.
  absl::Status PullAll(absl::Duration timeout, std::span<ops::Tensor> values,
                       runtime::TransferResult* result);
  // Saves every ps's shard at once (one thread per ps: in sync mode each save may wait for a
  // step that needs the others' progress), requests[p] to ps p; fills responses by ps index.
  // The first failure, naming the ps (a ps's own error keeps its code: PermissionDenied for
  // a path outside its --checkpoint_dir, DeadlineExceeded, ...).
  absl::Status SaveShards(const std::vector<pb::SaveShardRequest>& requests,
                          std::vector<pb::SaveShardResponse>* responses, absl::Duration timeout);
  // Restores ps `ps`'s shard; the ps's status as it answered (DataLoss for a corrupt file,
  // NotFound for a missing one). With replication its replica is restored first from the same
  // file (a failure there is logged: the shard then goes on without a replica).
  absl::Status RestoreShard(int ps, const pb::RestoreShardRequest& request,
                            pb::RestoreShardResponse* response, absl::Duration timeout);
  // ssp mode: tells every ps not to wait for `workers` any more (finished, failed or gone).
  // The first failure, naming the ps; safe to repeat.
  absl::Status ReleaseWorkers(const std::vector<int>& workers, const std::string& reason);
  // Tells every ps that training ended (pulls waiting for a step are released); failures
  // are logged, not returned: the chief stops what it can reach.
  void StopAll(const std::string& reason);
  // Asks every ps to exit; returns the summary each answered with, by ps index ("" for a ps
  // that gave none; the failure is logged).
  std::vector<std::string> ShutdownAll(const std::string& reason);

 private:
  // A ps's answer as the chief sees it: runtime::RemoteFailure of `status`.
  static absl::Status Remote(absl::Status status);

  absl::Duration control_timeout_ = absl::Seconds(30);
  runtime::CallTracker calls_;  // declared first: it outlives the clients and their calls
  std::vector<std::unique_ptr<runtime::GrpcPsClient>> clients_;
  runtime::RoutedPsClients routed_;  // by shard: the primary, or its failover
  std::unique_ptr<runtime::ShardedVariables> sharded_;
  std::string leaving_;
  int lost_ = -1;
  int leaving_ps_ = -1;
  // Where ps p's shard is served now (its own ps, or its promoted replica).
  runtime::PsClient& shard(int p) { return *routed_.routed[static_cast<size_t>(p)]; }
};

}  // namespace fulcrum::chief
