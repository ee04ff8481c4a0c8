// runtime: the calls a task has in flight to its peers, so that a watchdog can say what a
// stuck task waits for ("PushPull on ps:0 for 31 s"). GrpcPsClient registers every call it
// starts (on gRPC and on the tcp data plane) and ends it when its answer or error arrives.
// Thread-safety: thread-safe; Begin/End are a lock and a map update (a few calls per step); the
// description is formatted only when Oldest asks.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"
#include "base/clock.h"
#include "base/mutex.h"

namespace fulcrum::runtime {

class CallTracker {
 public:
  // `clock` (not owned) times the calls.
  explicit CallTracker(const Clock* clock = Clock::Real()) : clock_(clock) {}

  struct InFlight {
    std::string what;  // "PushPull on ps:0"
    absl::Duration age;
  };

  // Registers a call of `method` (a string literal) on `peer` started now; returns its token
  // for End.
  int64_t Begin(const char* method, const std::string& peer);
  void End(int64_t token);
  // The oldest call in flight, if any.
  std::optional<InFlight> Oldest() const;

 private:
  const Clock* const clock_;
  mutable Mutex mu_;
  int64_t next_ ABSL_GUARDED_BY(mu_) = 0;
  // Tokens grow with time, so the first entry is the oldest call.
  struct Call {
    const char* method;
    std::string peer;  // "ps:0": short enough to stay inline
    absl::Time start;
  };
  std::map<int64_t, Call> calls_ ABSL_GUARDED_BY(mu_);
};

// Begin on construction, End on destruction; a null tracker tracks nothing.
class TrackedCall {
 public:
  TrackedCall(CallTracker* tracker, const char* method, const std::string& peer)
      : tracker_(tracker), token_(tracker != nullptr ? tracker->Begin(method, peer) : 0) {}
  ~TrackedCall() {
    if (tracker_ != nullptr) tracker_->End(token_);
  }
  TrackedCall(const TrackedCall&) = delete;
  TrackedCall& operator=(const TrackedCall&) = delete;

 private:
  CallTracker* const tracker_;
  const int64_t token_;
};

}  // namespace fulcrum::runtime
