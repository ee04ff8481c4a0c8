#include "runtime/client/ps_client.h"

#include <memory>

#include "absl/strings/str_cat.h"
#include "base/mutex.h"

namespace fulcrum::runtime {
namespace {

// How long past the call's own timeout a blocking caller waits for the call to end before
// giving up on it (the call's deadline should always end it first).
constexpr absl::Duration kWaitGrace = absl::Seconds(10);

// The outcome of one asynchronous call; shared with the callback so that a callback that
// runs after its caller gave up touches nothing freed.
struct Outcome {
  Mutex mu;
  CondVar cv;
  bool done ABSL_GUARDED_BY(mu) = false;
  absl::Status result ABSL_GUARDED_BY(mu);
};

template <typename Call>
absl::Status Wait(absl::Duration timeout, Call call) {
  auto outcome = std::make_shared<Outcome>();
  call([outcome](absl::Status s) {
    MutexLock lock(&outcome->mu);
    outcome->result = std::move(s);
    outcome->done = true;
    outcome->cv.Signal();
  });
  MutexLock lock(&outcome->mu);
  const absl::Time deadline = absl::Now() + timeout + kWaitGrace;
  while (!outcome->done) {
    if (outcome->cv.WaitUntil(&outcome->mu, deadline)) continue;
    if (outcome->done) break;
    // The request and response stay the caller's; by now the call's own deadline has long
    // ended it in every client, so nothing writes them after this return.
    return absl::DeadlineExceededError(
        absl::StrCat("the call did not end within its timeout of ", absl::FormatDuration(timeout)));
  }
  return outcome->result;
}

}  // namespace

absl::Status PsClient::Pull(const pb::PullRequest& request, PullReply* response,
                            absl::Duration timeout) {
  return Wait(timeout, [&](Done d) { PullAsync(&request, response, timeout, std::move(d)); });
}

absl::Status PsClient::Push(const PushFrame& request, PushReply* response, absl::Duration timeout) {
  return Wait(timeout, [&](Done d) { PushAsync(&request, response, timeout, std::move(d)); });
}

absl::Status PsClient::PushPull(const PushFrame& request, PushReply* response,
                                absl::Duration timeout) {
  return Wait(timeout, [&](Done d) { PushPullAsync(&request, response, timeout, std::move(d)); });
}

}  // namespace fulcrum::runtime
