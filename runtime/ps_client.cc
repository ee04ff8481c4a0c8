#include "runtime/ps_client.h"

#include "absl/synchronization/notification.h"

namespace fulcrum::runtime {
namespace {

template <typename Call>
absl::Status Wait(Call call) {
  absl::Notification done;
  absl::Status result;
  call([&](absl::Status s) {
    result = std::move(s);
    done.Notify();
  });
  done.WaitForNotification();  // the call's own timeout bounds this wait
  return result;
}

}  // namespace

absl::Status PsClient::Pull(const pb::PullRequest& request, pb::PullResponse* response,
                            absl::Duration timeout) {
  return Wait([&](Done d) { PullAsync(&request, response, timeout, std::move(d)); });
}

absl::Status PsClient::Push(const pb::PushRequest& request, pb::PushResponse* response,
                            absl::Duration timeout) {
  return Wait([&](Done d) { PushAsync(&request, response, timeout, std::move(d)); });
}

absl::Status PsClient::PushPull(const pb::PushRequest& request, pb::PushResponse* response,
                                absl::Duration timeout) {
  return Wait([&](Done d) { PushPullAsync(&request, response, timeout, std::move(d)); });
}

}  // namespace fulcrum::runtime
