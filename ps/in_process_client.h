// ps: PsClient that calls a Shard in the same process, no network: the same frames as the
// other transports, handed over without serializing them. The contract tests run over it and
// over GrpcPsClient (gRPC and tcp) alike. Asynchronous calls run inline on the calling thread and
// call `done` before returning; the timeout bounds a pull's wait as a gRPC deadline would. Shutdown
// only records that it was asked for (there is no server to stop). Thread-safety: all methods are
// thread-safe (the shard is).
#pragma once

#include <atomic>
#include <string>

#include "ps/shard.h"
#include "runtime/client/ps_client.h"

namespace fulcrum::ps {

class InProcessPsClient final : public runtime::PsClient {
 public:
  // `shard` must outlive the client.
  explicit InProcessPsClient(Shard* shard) : shard_(shard) {}

  std::string target() const override;

  // The frames are handed to the shard as they are, without serializing them.
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

  // True once Shutdown was called.
  bool shutdown_requested() const { return shutdown_requested_.load(); }

 private:
  Shard* const shard_;
  std::atomic<bool> shutdown_requested_{false};
};

}  // namespace fulcrum::ps
