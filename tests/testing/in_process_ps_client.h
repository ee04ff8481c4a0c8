// tests: InProcessPsClient, a PsClient that calls a ps::Shard in the same process, no
// network: the same frames as the other transports, handed over without serializing them.
// The PS contract tests run over it and over runtime::GrpcPsClient (gRPC and tcp) alike, and
// the client-side tests (ShardedVariables, ChunkExchange, the train loop) run on it. Asynchronous
// calls run inline on the calling thread and call `done` before returning; the timeout bounds
// a pull's wait as a gRPC deadline would. Shutdown only records that it was asked for (there is
// no server to stop).
// Thread-safety: all methods are thread-safe (the shard is).
#pragma once

#include <atomic>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "ps/shard.h"
#include "runtime/client/ps_client.h"

namespace fulcrum::testing {

class InProcessPsClient final : public runtime::PsClient {
 public:
  // `shard` must outlive the client.
  explicit InProcessPsClient(ps::Shard* shard) : shard_(shard) {}

  std::string target() const override { return absl::StrCat("in-process ", shard_->name()); }

  // The frames are handed to the shard as they are, without serializing them.
  void PullAsync(const pb::PullRequest* request, PullReply* response, absl::Duration timeout,
                 Done done) override {
    absl::Status s = shard_->CheckTask(request->task(), "Pull");
    runtime::OutFrame<pb::PullResponse> reply;
    ps::FrameSink sink(&reply.chunks);
    if (s.ok()) s = shard_->Pull(*request, sink, &reply.header, absl::Now() + timeout);
    if (s.ok()) s = response->Deliver(reply);
    done(std::move(s));
  }
  void PushAsync(const PushFrame* request, PushReply* response, absl::Duration,
                 Done done) override {
    runtime::InFrame<pb::PushRequest> in;
    absl::Status s = Receive(*request, "Push", &in);
    runtime::OutFrame<pb::PushResponse> reply;
    if (s.ok()) s = shard_->Push(in.header, in.values, &reply.header);
    if (s.ok()) s = response->Deliver(reply);
    done(std::move(s));
  }
  void PushPullAsync(const PushFrame* request, PushReply* response, absl::Duration timeout,
                     Done done) override {
    runtime::InFrame<pb::PushRequest> in;
    absl::Status s = Receive(*request, "PushPull", &in);
    runtime::OutFrame<pb::PushResponse> reply;
    ps::FrameSink sink(&reply.chunks);
    if (s.ok()) {
      s = shard_->PushPull(in.header, in.values, sink, &reply.header, absl::Now() + timeout);
    }
    if (s.ok()) s = response->Deliver(reply);
    done(std::move(s));
  }

  absl::Status CreateVariables(const pb::CreateVariablesRequest& request,
                               pb::CreateVariablesResponse* response, absl::Duration) override {
    return shard_->CreateVariables(request, response);
  }
  absl::Status SaveShard(const pb::SaveShardRequest& request, pb::SaveShardResponse* response,
                         absl::Duration timeout) override {
    return shard_->SaveShard(request, response, absl::Now() + timeout);
  }
  absl::Status RestoreShard(const pb::RestoreShardRequest& request,
                            pb::RestoreShardResponse* response, absl::Duration) override {
    return shard_->RestoreShard(request, response);
  }
  absl::Status Stats(pb::StatsResponse* response, absl::Duration) override {
    shard_->Stats(response);
    return absl::OkStatus();
  }
  absl::Status Stop(const std::string& reason, absl::Duration) override {
    shard_->Stop(reason);
    return absl::OkStatus();
  }
  using PsClient::Shutdown;
  absl::Status Shutdown(const std::string&, absl::Duration, std::string*) override {
    shard_->Touch();
    shutdown_requested_.store(true);
    return absl::OkStatus();
  }
  absl::Status Ping(const pb::PingRequest& request, pb::PingResponse* response,
                    absl::Duration) override {
    return shard_->Ping(request, response);
  }
  absl::Status ReleaseWorkers(const pb::ReleaseWorkersRequest& request, absl::Duration) override {
    return shard_->ReleaseWorkers(request);
  }

  // True once Shutdown was called.
  bool shutdown_requested() const { return shutdown_requested_.load(); }

 private:
  // The request as the shard takes it (the frame handed over without serializing; aligned
  // float32 gradients read in place from the caller's memory), after the one check of the
  // caller's task.
  absl::Status Receive(const PushFrame& frame, const char* method,
                       runtime::InFrame<pb::PushRequest>* in) const {
    in->borrow_aligned_f32 = true;
    if (absl::Status s = in->Deliver(frame); !s.ok()) {
      return absl::Status(s.code(), absl::StrCat(method, " request: ", s.message()));
    }
    return shard_->CheckTask(in->header.task(), method);
  }

  ps::Shard* const shard_;
  std::atomic<bool> shutdown_requested_{false};
};

}  // namespace fulcrum::testing
