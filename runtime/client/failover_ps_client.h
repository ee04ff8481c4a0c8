// runtime: --replicate_shards on the client side. A FailoverPsClient stands for one shard
// whose replica lives on another ps (ps/replicas.h): calls go to the primary until it fails
// with Unavailable (killed, gone); the next data call then tries the backup, whose requests
// name the shard (PullRequest.shard, set by ShardedVariables; the backup client's own
// set_shard for control calls). The backup answers them only once the chief promoted the
// replica (Unavailable before): the first answer moves this client to the backup for good;
// a refusal sends the next call to the primary again (it may have been a blip, or the chief
// restores it). The chief moves its clients with Promote() after promoting.
// Thread-safety: every method may be called from many threads at once; the clients must be
// thread-safe and outlive this.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "runtime/client/grpc_ps_client.h"
#include "runtime/client/ps_client.h"
#include "runtime/cluster/cluster_spec.h"
#include "runtime/grpc/security.h"

namespace fulcrum::runtime {

class FailoverPsClient final : public PsClient {
 public:
  // `shard` names it in logs ("ps:0"); `backup` talks to the ps that keeps its replica.
  FailoverPsClient(std::string shard, PsClient* primary, PsClient* backup)
      : shard_(std::move(shard)), primary_(primary), backup_(backup) {}

  // The backup serves the shard from now on.
  void Promote();
  bool promoted() const { return promoted_.load(std::memory_order_acquire); }
  // Where calls go now.
  PsClient* current() const;

  std::string target() const override { return current()->target(); }
  void PullAsync(const pb::PullRequest* request, PullReply* response, absl::Duration timeout,
                 Done done) override;
  void PushAsync(const PushFrame* request, PushReply* response, absl::Duration timeout,
                 Done done) override;
  void PushPullAsync(const PushFrame* request, PushReply* response, absl::Duration timeout,
                     Done done) override;

  absl::Status CreateVariables(const pb::CreateVariablesRequest& request,
                               pb::CreateVariablesResponse* response,
                               absl::Duration timeout) override;
  absl::Status SaveShard(const pb::SaveShardRequest& request, pb::SaveShardResponse* response,
                         absl::Duration timeout) override;
  absl::Status RestoreShard(const pb::RestoreShardRequest& request,
                            pb::RestoreShardResponse* response, absl::Duration timeout) override;
  absl::Status Stats(pb::StatsResponse* response, absl::Duration timeout) override;
  absl::Status Stop(const std::string& reason, absl::Duration timeout) override;
  using PsClient::Shutdown;
  absl::Status Shutdown(const std::string& reason, absl::Duration timeout,
                        std::string* summary_json) override;
  absl::Status Ping(const pb::PingRequest& request, pb::PingResponse* response,
                    absl::Duration timeout) override;
  absl::Status ReleaseWorkers(const pb::ReleaseWorkersRequest& request,
                              absl::Duration timeout) override;

 private:
  // The client for the next data call, and `done` wrapped to learn from its outcome.
  PsClient* PickForData() const;
  Done Learn(PsClient* used, Done done);

  const std::string shard_;
  PsClient* const primary_;
  PsClient* const backup_;
  std::atomic<bool> promoted_{false};
  std::atomic<bool> try_backup_{false};
};

// The clients a worker or the chief moves a model through: with --replicate_shards one
// FailoverPsClient per ps (primary: the given client; backup: a client to ps (p + 1) mod n
// addressed to shard p, with the primary's observer, call tracker and data plane), without
// it the given clients themselves.
struct RoutedPsClients {
  std::vector<std::unique_ptr<GrpcPsClient>> backups;
  std::vector<std::unique_ptr<FailoverPsClient>> failover;  // empty without replication
  std::vector<PsClient*> routed;                            // by ps index
};
RoutedPsClients RoutePsClients(const std::vector<GrpcPsClient*>& primaries,
                               const ClusterSpec& cluster, const TransportSecurity& security,
                               bool replicate);

}  // namespace fulcrum::runtime
