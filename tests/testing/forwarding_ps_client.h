// tests: ForwardingPsClient, a runtime::PsClient that passes every call to the client it
// wraps: the base of the test decorators (FaultyPsClient, train_loop_test's HoldingPsClient),
// which override only the data calls they change.
// Thread-safety: as the wrapped client.
#pragma once

#include <string>
#include <utility>

#include "runtime/client/ps_client.h"

namespace fulcrum::testing {

class ForwardingPsClient : public runtime::PsClient {
 public:
  // `inner` (not owned) must outlive this client.
  explicit ForwardingPsClient(runtime::PsClient* inner) : inner_(inner) {}

  std::string target() const override { return inner_->target(); }
  void PullAsync(const pb::PullRequest* request, PullReply* response, absl::Duration timeout,
                 Done done) override {
    inner_->PullAsync(request, response, timeout, std::move(done));
  }
  void PushAsync(const PushFrame* request, PushReply* response, absl::Duration timeout,
                 Done done) override {
    inner_->PushAsync(request, response, timeout, std::move(done));
  }
  void PushPullAsync(const PushFrame* request, PushReply* response, absl::Duration timeout,
                     Done done) override {
    inner_->PushPullAsync(request, response, timeout, std::move(done));
  }
  absl::Status CreateVariables(const pb::CreateVariablesRequest& request,
                               pb::CreateVariablesResponse* response,
                               absl::Duration timeout) override {
    return inner_->CreateVariables(request, response, timeout);
  }
  absl::Status SaveShard(const pb::SaveShardRequest& request, pb::SaveShardResponse* response,
                         absl::Duration timeout) override {
    return inner_->SaveShard(request, response, timeout);
  }
  absl::Status RestoreShard(const pb::RestoreShardRequest& request,
                            pb::RestoreShardResponse* response, absl::Duration timeout) override {
    return inner_->RestoreShard(request, response, timeout);
  }
  absl::Status Stats(pb::StatsResponse* response, absl::Duration timeout) override {
    return inner_->Stats(response, timeout);
  }
  absl::Status Stop(const std::string& reason, absl::Duration timeout) override {
    return inner_->Stop(reason, timeout);
  }
  using PsClient::Shutdown;
  absl::Status Shutdown(const std::string& reason, absl::Duration timeout,
                        std::string* summary_json) override {
    return inner_->Shutdown(reason, timeout, summary_json);
  }
  absl::Status Ping(const pb::PingRequest& request, pb::PingResponse* response,
                    absl::Duration timeout) override {
    return inner_->Ping(request, response, timeout);
  }
  absl::Status ReleaseWorkers(const pb::ReleaseWorkersRequest& request,
                              absl::Duration timeout) override {
    return inner_->ReleaseWorkers(request, timeout);
  }

 protected:
  runtime::PsClient* inner() const { return inner_; }

 private:
  runtime::PsClient* const inner_;
};

}  // namespace fulcrum::testing
