// ps: a shard leaving the run on a signal (ps/shard.h: SetLeaving, Leave). Apart from Stop:
// Stop ends training for every worker; a ps that leaves is lost for a while, as a killed one
// is, and its workers wait for it to come back (restored by the chief from the checkpoint it
// saved when the ps said it was leaving).
#include "absl/strings/str_cat.h"
#include "ps/shard.h"
#include "spdlog/spdlog.h"

namespace fulcrum::ps {

void Shard::SetLeaving(const std::string& reason) {
  MutexLock lock(&leave_mu_);
  if (!leaving_.empty()) return;
  leaving_ = reason.empty() ? "leaving" : reason;
  spdlog::warn("{} is leaving the run ({}): it serves until the chief saved a checkpoint", name_,
               leaving_);
}

std::string Shard::leaving() const {
  MutexLock lock(&leave_mu_);
  return leaving_;
}

void Shard::Leave() {
  if (left_.exchange(true, std::memory_order_acq_rel)) return;
  spdlog::warn("{} left the run ({}): waiting calls end Unavailable", name_, leaving());
  const std::shared_ptr<Store> s = store();
  if (s != nullptr) {
    for (auto& chunk : s->chunks) {
      // Under the lock, so a pull between checking left_ and sleeping cannot miss it.
      MutexLock lock(&chunk->mu);
      chunk->advanced.SignalAll();
    }
  }
  MutexLock lock(&snapshot_mu_);
  snapshot_taken_.SignalAll();
}

absl::Status Shard::LeftError(const char* method) const {
  return absl::UnavailableError(absl::StrCat(name_, ": ", method, ": this ps left the run (",
                                             leaving(), "); call again once it is back"));
}

}  // namespace fulcrum::ps
