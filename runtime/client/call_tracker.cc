#include "runtime/client/call_tracker.h"

#include "absl/strings/str_cat.h"

namespace fulcrum::runtime {

int64_t CallTracker::Begin(const char* method, const std::string& peer) {
  MutexLock lock(&mu_);
  const int64_t token = ++next_;
  calls_.emplace(token, Call{method, peer, clock_->Now()});
  return token;
}

void CallTracker::End(int64_t token) {
  MutexLock lock(&mu_);
  calls_.erase(token);
}

std::optional<CallTracker::InFlight> CallTracker::Oldest() const {
  MutexLock lock(&mu_);
  if (calls_.empty()) return std::nullopt;
  const Call& call = calls_.begin()->second;
  return InFlight{absl::StrCat(call.method, " on ", call.peer), clock_->Now() - call.start};
}

}  // namespace fulcrum::runtime
