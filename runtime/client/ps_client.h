// runtime: the client side of the PS contract (proto/ps.proto), one interface with two
// implementations: GrpcPsClient (runtime/client/grpc_ps_client.h) talks to a ps process over gRPC
// (its data calls over gRPC or the tcp data plane); the tests' in-process client
// (tests/testing/in_process_ps_client.h) hands the same frames to a shard in the same process.
// The same contract tests run over all three.
// Thread-safety: every method may be called from many threads at once.
#pragma once

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "proto/ps.pb.h"
#include "runtime/frames/wire_frame.h"

namespace fulcrum::runtime {

class PsClient {
 public:
  // Runs exactly once when an asynchronous call ends, on an unspecified thread.
  using Done = std::function<void(absl::Status)>;

  virtual ~PsClient() = default;

  // Where the calls go ("localhost:2222", or "in-process ps:0").
  virtual std::string target() const = 0;

  // The data path, on the zero-copy frames of runtime/frames/wire_frame.h (the only form the PS
  // speaks): request and response must stay alive, and a request's payload slices (which
  // borrow the caller's memory) unchanged, until `done` runs. Each reply chunk's payload goes
  // to response->sink while the reply is parsed (without a sink: decoded into
  // response->floats); a sink's error is response->error and the call's status. `timeout`
  // bounds the whole call, any wait on the PS included.
  using PushFrame = OutFrame<pb::PushRequest>;
  using PullReply = InFrame<pb::PullResponse>;
  using PushReply = InFrame<pb::PushResponse>;
  virtual void PullAsync(const pb::PullRequest* request, PullReply* response,
                         absl::Duration timeout, Done done) = 0;
  // A push's reply carries no chunks (only the header).
  virtual void PushAsync(const PushFrame* request, PushReply* response, absl::Duration timeout,
                         Done done) = 0;
  virtual void PushPullAsync(const PushFrame* request, PushReply* response, absl::Duration timeout,
                             Done done) = 0;

  // Blocking control path.
  virtual absl::Status CreateVariables(const pb::CreateVariablesRequest& request,
                                       pb::CreateVariablesResponse* response,
                                       absl::Duration timeout) = 0;
  virtual absl::Status SaveShard(const pb::SaveShardRequest& request,
                                 pb::SaveShardResponse* response, absl::Duration timeout) = 0;
  virtual absl::Status RestoreShard(const pb::RestoreShardRequest& request,
                                    pb::RestoreShardResponse* response, absl::Duration timeout) = 0;
  virtual absl::Status Stats(pb::StatsResponse* response, absl::Duration timeout) = 0;
  virtual absl::Status Stop(const std::string& reason, absl::Duration timeout) = 0;
  // Asks the ps task to exit; *summary_json (if not null) receives the summary it wrote.
  virtual absl::Status Shutdown(const std::string& reason, absl::Duration timeout,
                                std::string* summary_json) = 0;
  absl::Status Shutdown(const std::string& reason, absl::Duration timeout) {
    return Shutdown(reason, timeout, nullptr);
  }
  virtual absl::Status Ping(const pb::PingRequest& request, pb::PingResponse* response,
                            absl::Duration timeout) = 0;
  // ssp mode: the ps no longer waits for `request.workers` (proto/ps.proto). Idempotent:
  // safe to retry.
  virtual absl::Status ReleaseWorkers(const pb::ReleaseWorkersRequest& request,
                                      absl::Duration timeout) = 0;

  // Blocking forms of the data path, built on the asynchronous calls.
  absl::Status Pull(const pb::PullRequest& request, PullReply* response, absl::Duration timeout);
  absl::Status Push(const PushFrame& request, PushReply* response, absl::Duration timeout);
  absl::Status PushPull(const PushFrame& request, PushReply* response, absl::Duration timeout);
};

}  // namespace fulcrum::runtime
