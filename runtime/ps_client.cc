#include "runtime/ps_client.h"

#include <condition_variable>
#include <mutex>

namespace fulcrum::runtime {
namespace {

template <typename Call>
absl::Status Wait(Call call) {
  // std::mutex rather than absl::Notification: ThreadSanitizer sees through it.
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  absl::Status result;
  call([&](absl::Status s) {
    std::lock_guard<std::mutex> lock(mu);
    result = std::move(s);
    done = true;
    cv.notify_one();
  });
  std::unique_lock<std::mutex> lock(mu);
  cv.wait(lock, [&] { return done; });  // the call's own timeout bounds this wait
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
