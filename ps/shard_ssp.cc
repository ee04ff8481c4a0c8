// ps::Shard's bounded staleness (--mode=ssp): the hooks of Push, PushPull and Pull over
// ps/staleness.h, and the chief's ReleaseWorkers.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "ps/request_checks.h"
#include "ps/shard.h"
#include "runtime/frames/tensor_coding.h"
#include "runtime/frames/wire_frame.h"
#include "spdlog/spdlog.h"
#include "transport/limits.h"

namespace fulcrum::ps {

absl::StatusOr<int> Shard::SspWorker(const Store& store, const std::string& task,
                                     const char* method) const {
  if (store.ssp == nullptr) return -1;
  return store.ssp->WorkerIndex(task, method);
}

void Shard::SspAdvance(Store& store, int worker, const pb::PushRequest& request) {
  // After Stop nothing was applied, and the gate no longer holds anyone.
  if (stopped()) return;
  for (const pb::ChunkData& g : request.gradients()) store.ssp->Advance(worker, g.chunk());
}

absl::Status Shard::SspWait(Store& store, const std::string& task, const std::vector<int>& ids,
                            int64_t timeout_ms, absl::Time deadline, int64_t* waited_us) {
  if (store.ssp == nullptr) return absl::OkStatus();
  FULCRUM_ASSIGN_OR_RETURN(const int worker, store.ssp->WorkerIndex(task, "a wait"));
  const absl::Duration wait = timeout_ms > 0 ? absl::Milliseconds(timeout_ms) : kDefaultPullWait;
  deadline = std::min(deadline, absl::Now() + wait);
  int64_t waited_ns = 0;
  absl::Status status;
  for (const int id : ids) {
    if (stopped()) break;  // also a gate created after Stop (Stop wakes the others)
    status = store.ssp->Wait(worker, id, deadline, &waited_ns);
    if (!status.ok()) {
      counters_.pull_wait_timeouts.fetch_add(1, std::memory_order_relaxed);
      break;
    }
  }
  counters_.wait_ns.fetch_add(waited_ns, std::memory_order_relaxed);
  *waited_us += waited_ns / 1000;
  return status;
}

absl::Status Shard::ReleaseWorkers(const pb::ReleaseWorkersRequest& request) {
  Touch();
  const std::shared_ptr<Store> s = store();
  if (s == nullptr || s->ssp == nullptr) return absl::OkStatus();
  for (const int w : request.workers()) {
    if (w < 0 || w >= s->ssp->num_workers()) {
      return absl::InvalidArgumentError(absl::StrCat(name_, ": ReleaseWorkers: worker ", w,
                                                     " is not one of the ", s->ssp->num_workers(),
                                                     " workers; nothing released"));
    }
  }
  const std::vector<int> before = s->ssp->Released();
  for (const int w : request.workers()) {
    if (std::find(before.begin(), before.end(), w) != before.end()) continue;
    s->ssp->Release(w);
    spdlog::info("{}: ssp no longer waits for worker:{} ({})", name_, w,
                 request.reason().empty() ? "no reason given" : request.reason());
  }
  return absl::OkStatus();
}

}  // namespace fulcrum::ps
