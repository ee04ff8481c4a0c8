#include "ps/in_process_client.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace fulcrum::ps {
namespace {

// The request as the shard takes it (the frame handed over without serializing; aligned
// float32 gradients read in place from the caller's memory), after the one check of the
// caller's task.
absl::Status Receive(const Shard& shard, const runtime::PsClient::PushFrame& frame,
                     const char* method, runtime::InFrame<pb::PushRequest>* in) {
  in->borrow_aligned_f32 = true;
  if (absl::Status s = in->Deliver(frame); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat(method, " request: ", s.message()));
  }
  return shard.CheckTask(in->header.task(), method);
}

}  // namespace

std::string InProcessPsClient::target() const {
  return absl::StrCat("in-process ", shard_->name());
}

void InProcessPsClient::PullAsync(const pb::PullRequest* request, PullReply* response,
                                  absl::Duration timeout, Done done) {
  absl::Status s = shard_->CheckTask(request->task(), "Pull");
  runtime::OutFrame<pb::PullResponse> reply;
  FrameSink sink(&reply.chunks);
  if (s.ok()) s = shard_->Pull(*request, sink, &reply.header, absl::Now() + timeout);
  if (s.ok()) s = response->Deliver(reply);
  done(std::move(s));
}

void InProcessPsClient::PushAsync(const PushFrame* request, PushReply* response, absl::Duration,
                                  Done done) {
  runtime::InFrame<pb::PushRequest> in;
  absl::Status s = Receive(*shard_, *request, "Push", &in);
  runtime::OutFrame<pb::PushResponse> reply;
  if (s.ok()) s = shard_->Push(in.header, in.values, &reply.header);
  if (s.ok()) s = response->Deliver(reply);
  done(std::move(s));
}

void InProcessPsClient::PushPullAsync(const PushFrame* request, PushReply* response,
                                      absl::Duration timeout, Done done) {
  runtime::InFrame<pb::PushRequest> in;
  absl::Status s = Receive(*shard_, *request, "PushPull", &in);
  runtime::OutFrame<pb::PushResponse> reply;
  FrameSink sink(&reply.chunks);
  if (s.ok()) {
    s = shard_->PushPull(in.header, in.values, sink, &reply.header, absl::Now() + timeout);
  }
  if (s.ok()) s = response->Deliver(reply);
  done(std::move(s));
}

absl::Status InProcessPsClient::CreateVariables(const pb::CreateVariablesRequest& request,
                                                pb::CreateVariablesResponse* response,
                                                absl::Duration) {
  return shard_->CreateVariables(request, response);
}

absl::Status InProcessPsClient::SaveShard(const pb::SaveShardRequest& request,
                                          pb::SaveShardResponse* response,
                                          absl::Duration timeout) {
  return shard_->SaveShard(request, response, absl::Now() + timeout);
}

absl::Status InProcessPsClient::RestoreShard(const pb::RestoreShardRequest& request,
                                             pb::RestoreShardResponse* response, absl::Duration) {
  return shard_->RestoreShard(request, response);
}

absl::Status InProcessPsClient::Stats(pb::StatsResponse* response, absl::Duration) {
  shard_->Stats(response);
  return absl::OkStatus();
}

absl::Status InProcessPsClient::ReleaseWorkers(const pb::ReleaseWorkersRequest& request,
                                               absl::Duration) {
  return shard_->ReleaseWorkers(request);
}

absl::Status InProcessPsClient::Stop(const std::string& reason, absl::Duration) {
  shard_->Stop(reason);
  return absl::OkStatus();
}

absl::Status InProcessPsClient::Shutdown(const std::string&, absl::Duration, std::string*) {
  shard_->Touch();
  shutdown_requested_.store(true);
  return absl::OkStatus();
}

absl::Status InProcessPsClient::Ping(const pb::PingRequest& request, pb::PingResponse* response,
                                     absl::Duration) {
  return shard_->Ping(request, response);
}

}  // namespace fulcrum::ps
