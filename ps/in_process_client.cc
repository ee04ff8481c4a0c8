#include "ps/in_process_client.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace fulcrum::ps {

std::string InProcessPsClient::target() const {
  return absl::StrCat("in-process ", shard_->name());
}

void InProcessPsClient::PullAsync(const pb::PullRequest* request, pb::PullResponse* response,
                                  absl::Duration timeout, Done done) {
  done(shard_->Pull(*request, response, absl::Now() + timeout));
}

void InProcessPsClient::PushAsync(const pb::PushRequest* request, pb::PushResponse* response,
                                  absl::Duration, Done done) {
  done(shard_->Push(*request, response));
}

void InProcessPsClient::PushPullAsync(const pb::PushRequest* request, pb::PushResponse* response,
                                      absl::Duration timeout, Done done) {
  done(shard_->PushPull(*request, response, absl::Now() + timeout));
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
