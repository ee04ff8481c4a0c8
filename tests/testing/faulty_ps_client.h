// tests: FaultyPsClient, a runtime::PsClient decorator that injects the transport faults a
// real network has into the data path (Pull, Push, PushPull) of the client it wraps (the
// in-process client, tests/testing/in_process_ps_client.h), so that retry and
// deduplication can be tested deterministically:
//   kDropReply       the call reaches the PS and is applied; the caller sees Unavailable
//                    and no reply (a reply lost on the way back);
//   kFailBeforeSend  Unavailable at once, the PS never sees the call (a refused connection);
//   kDuplicate       the request is sent twice (a transport that re-sent it); the caller
//                    sees the second reply.
// Control calls pass through untouched (testing::ForwardingPsClient).
// Thread-safety: all methods are thread-safe; the wrapped client must be too.
#pragma once

#include <memory>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/mutex.h"
#include "runtime/client/ps_client.h"
#include "tests/testing/forwarding_ps_client.h"

namespace fulcrum::testing {

enum class Fault { kNone, kDropReply, kFailBeforeSend, kDuplicate };

inline const char* FaultName(Fault fault) {
  switch (fault) {
    case Fault::kNone:
      return "none";
    case Fault::kDropReply:
      return "drop_reply";
    case Fault::kFailBeforeSend:
      return "fail_before_send";
    case Fault::kDuplicate:
      return "duplicate";
  }
  return "?";
}

class FaultyPsClient final : public ForwardingPsClient {
 public:
  // `inner` (not owned) must outlive this client.
  explicit FaultyPsClient(runtime::PsClient* inner) : ForwardingPsClient(inner) {}

  // The next `times` data-path calls (in arrival order) suffer `fault`; later calls pass
  // through. With `chunk` >= 0 only calls whose first chunk is `chunk` count (ShardedVariables
  // sends one chunk per call, so this picks one chunk's call and its retry).
  void Inject(Fault fault, int times = 1, int chunk = kAnyChunk) {
    MutexLock lock(&mu_);
    fault_ = fault;
    left_ = times;
    chunk_ = chunk;
  }
  static constexpr int kAnyChunk = -1;
  // How many calls a fault was injected into so far.
  int faults_injected() const {
    MutexLock lock(&mu_);
    return injected_;
  }

  std::string target() const override { return "faulty " + inner()->target(); }

  void PullAsync(const pb::PullRequest* request, PullReply* response, absl::Duration timeout,
                 Done done) override {
    Call(request, response, timeout, std::move(done),
         [this](auto... args) { inner()->PullAsync(args...); });
  }
  void PushAsync(const PushFrame* request, PushReply* response, absl::Duration timeout,
                 Done done) override {
    Call(request, response, timeout, std::move(done),
         [this](auto... args) { inner()->PushAsync(args...); });
  }
  void PushPullAsync(const PushFrame* request, PushReply* response, absl::Duration timeout,
                     Done done) override {
    Call(request, response, timeout, std::move(done),
         [this](auto... args) { inner()->PushPullAsync(args...); });
  }

 private:
  static int FirstChunk(const pb::PullRequest& r) { return r.chunks().empty() ? -1 : r.chunks(0); }
  static int FirstChunk(const PushFrame& r) {
    return r.chunks.empty() ? -1 : r.chunks[0].meta.chunk();
  }

  // The fault for a call of `chunk` arriving now (kNone once the injected ones are used up).
  Fault Next(int chunk) {
    MutexLock lock(&mu_);
    if (left_ <= 0 || (chunk_ != kAnyChunk && chunk != chunk_)) return Fault::kNone;
    --left_;
    ++injected_;
    return fault_;
  }

  // Runs one data-path call through `send` (the inner client's method) with the next fault.
  template <typename Request, typename Response, typename Send>
  void Call(const Request* request, Response* response, absl::Duration timeout, Done done,
            Send send) {
    switch (Next(FirstChunk(*request))) {
      case Fault::kNone:
        send(request, response, timeout, std::move(done));
        return;
      case Fault::kFailBeforeSend:
        done(absl::UnavailableError(
            absl::StrCat("injected: ", inner()->target(), " not reached (fail_before_send)")));
        return;
      case Fault::kDropReply: {
        // The reply never arrives: it is parsed into a frame of its own (no sink) and dropped.
        auto lost = std::make_shared<Response>();
        send(request, lost.get(), timeout, [this, lost, done = std::move(done)](absl::Status s) {
          done(s.ok() ? absl::UnavailableError(absl::StrCat("injected: reply from ",
                                                            inner()->target(), " lost (drop_reply)"))
                      : s);
        });
        return;
      }
      case Fault::kDuplicate: {
        // The first copy's reply goes nowhere; the caller gets the second's.
        auto first = std::make_shared<Response>();
        send(request, first.get(), timeout,
             [send, request, response, timeout, first, done = std::move(done)](absl::Status) {
               send(request, response, timeout, done);
             });
        return;
      }
    }
  }

  mutable Mutex mu_;
  Fault fault_ ABSL_GUARDED_BY(mu_) = Fault::kNone;
  int left_ ABSL_GUARDED_BY(mu_) = 0;
  int chunk_ ABSL_GUARDED_BY(mu_) = kAnyChunk;
  int injected_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace fulcrum::testing
