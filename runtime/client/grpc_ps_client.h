// runtime: PsClient over gRPC to one ps task. Asynchronous calls use gRPC's callback API,
// so a worker can have one call per chunk in flight on every PS at once.
// Every call is reported to an optional profiler::RpcObserver (bytes and time per RPC).
// Thread-safety: all methods are thread-safe; set_observer before the first call.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/mutex.h"
#include "profiler/rpc_observer.h"
#include "proto/ps.grpc.pb.h"
#include "runtime/client/call_tracker.h"
#include "runtime/client/ps_client.h"
#include "runtime/grpc/security.h"
#include "transport/data_channel.h"

namespace fulcrum::runtime {

class GrpcPsClient final : public PsClient {
 public:
  // `name` labels errors ("ps:0"); `address` is "host:port". With TLS in `security` (the
  // default: insecure) the server's certificate must name `name`.
  GrpcPsClient(std::string name, const std::string& address,
               const TransportSecurity& security = {});

  std::string target() const override { return target_; }
  const std::string& name() const { return name_; }
  // The peer as the profiler names it ("ps-0").
  const std::string& peer() const { return peer_; }
  // Not owned; null (the default) reports nothing.
  void set_observer(profiler::RpcObserver* observer) { observer_ = observer; }
  // Not owned; every call is registered there while in flight (the watchdog's "waiting for").
  void set_call_tracker(CallTracker* tracker) { tracker_ = tracker; }
  CallTracker* call_tracker() const { return tracker_; }
  profiler::RpcObserver* observer() const { return observer_; }
  // The channel (its own connection): other stubs on it share that connection.
  const std::shared_ptr<grpc::Channel>& channel() const { return channel_; }

  // The data calls: frames serialized from borrowed memory, sent on a transport::DataChannel
  // (gRPC on this channel, or the tcp data plane), and parsed into the reply's sink.
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

  // --data_plane=tcp: the data calls (Pull, Push, PushPull) go
  // over a tcp data-plane connection (transport/tcp_channel.h) instead of this channel. It is
  // opened through OpenDataPlane on the first such call and again on the first call after it failed
  // (a ps restarted); that call waits for it, within its own timeout. Set before the first call.
  void set_tcp_data_plane(bool on) { tcp_data_plane_ = on; }
  bool tcp_data_plane() const { return tcp_data_plane_; }
  // Opens the data-plane connection of `task` now (a worker does at start-up, so a ps without
  // the plane is found at once): FailedPrecondition when the ps serves none, Unavailable when
  // it cannot be reached.
  absl::Status OpenDataPlane(const std::string& task, absl::Duration timeout) {
    return DataChannelFor(task, timeout).status();
  }

  // --replicate_shards: the shard this client's control requests (Stats, SaveShard,
  // RestoreShard) address on its server (StatsRequest.shard): a client to a backup ps set to
  // the shard it keeps a replica of. Unset (the default): the server's own. Before the
  // first call.
  void set_shard(int shard) { shard_ = shard; }
  std::optional<int> shard() const { return shard_; }
  // --replicate_shards, ps to ps: one apply forwarded to the backup (ps/shard_replica.cc);
  // request and response must stay alive until `done` runs.
  void ReplicateAsync(const pb::ReplicateRequest* request, pb::ReplicateResponse* response,
                      absl::Duration timeout, Done done);
  // Chief to backup: serve the replica of request.shard from now on.
  absl::Status PromoteReplica(const pb::PromoteReplicaRequest& request,
                              pb::PromoteReplicaResponse* response, absl::Duration timeout);

  // Waits until the PS answers a Ping (the channel retries connecting meanwhile); false
  // after `timeout`, at once (logging why) when the PS refuses this client's credentials, or
  // within one probe once this process was asked to stop (base/signals.h).
  bool WaitUntilReady(absl::Duration timeout);
  // Sends `rounds` pings of `bytes` each way so HTTP/2 flow-control windows have grown
  // before the first real transfer (a fresh gRPC connection moves big messages ~5x slower).
  absl::Status Warm(int64_t bytes, int rounds, absl::Duration timeout);

 private:
  std::string name_;
  std::string peer_;
  std::string target_;
  profiler::RpcObserver* observer_ = nullptr;
  CallTracker* tracker_ = nullptr;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<pb::ParameterServer::Stub> stub_;
  std::shared_ptr<transport::DataChannel> grpc_data_;  // the data calls on channel_
  bool tcp_data_plane_ = false;
  std::optional<int> shard_;

  // The channel a data call of `task` goes on: grpc_data_, or with the tcp data plane the
  // live connection of `task` (a connection serves the task its ticket was issued to), opened
  // (again) when there is none or it failed.
  absl::StatusOr<std::shared_ptr<transport::DataChannel>> DataChannelFor(const std::string& task,
                                                                         absl::Duration timeout);
  // One data call of `task`: `body` on its channel, the reply parsed into *response.
  template <typename Reply>
  void SendData(transport::DataMethod method, const std::string& task, std::vector<Slice> body,
                Reply* response, absl::Duration timeout, Done done);
  Mutex data_mu_;
  std::map<std::string, std::shared_ptr<transport::DataChannel>> tcp_ ABSL_GUARDED_BY(data_mu_);
  // Failed connections, kept until this client goes: one may still be completing a call on
  // its own thread when it is replaced.
  std::vector<std::shared_ptr<transport::DataChannel>> retired_ ABSL_GUARDED_BY(data_mu_);
};

}  // namespace fulcrum::runtime
