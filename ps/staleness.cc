#include "ps/staleness.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"

namespace fulcrum::ps {

StalenessGate::StalenessGate(std::string ps_name, int num_workers, int num_chunks,
                             int64_t staleness)
    : ps_name_(std::move(ps_name)),
      num_workers_(num_workers),
      staleness_(staleness),
      released_(new std::atomic<bool>[static_cast<size_t>(num_workers)]) {
  for (int w = 0; w < num_workers_; ++w) released_[static_cast<size_t>(w)].store(false);
  for (int c = 0; c < num_chunks; ++c) {
    auto chunk = std::make_unique<ChunkClocks>();
    MutexLock lock(&chunk->mu);  // not shared yet; the lock keeps the analysis exact
    chunk->clocks.assign(static_cast<size_t>(num_workers_), 0);
    chunks_.push_back(std::move(chunk));
  }
}

absl::StatusOr<int> StalenessGate::WorkerIndex(absl::string_view task, const char* method) const {
  absl::string_view rest = task;
  int index = -1;
  // Only the canonical spelling: "worker:01" or "worker:+1" would be a second name for a worker.
  if (absl::ConsumePrefix(&rest, "worker:") && !rest.empty() && absl::ascii_isdigit(rest[0]) &&
      (rest.size() == 1 || rest[0] != '0') && absl::SimpleAtoi(rest, &index) && index >= 0 &&
      index < num_workers_) {
    return index;
  }
  return absl::InvalidArgumentError(
      absl::StrCat(ps_name_, ": ", method, " from '", absl::CEscape(task.substr(0, 64)),
                   "': in ssp mode only the workers worker:0 ... worker:", num_workers_ - 1,
                   " push and wait for the slowest worker"));
}

void StalenessGate::Advance(int worker, int chunk) {
  ChunkClocks& c = *chunks_[static_cast<size_t>(chunk)];
  MutexLock lock(&c.mu);
  ++c.clocks[static_cast<size_t>(worker)];
  c.advanced.SignalAll();
}

int64_t StalenessGate::Slowest(const ChunkClocks& c) const {
  int64_t slowest = std::numeric_limits<int64_t>::max();
  for (int w = 0; w < num_workers_; ++w) {
    if (released_[static_cast<size_t>(w)].load(std::memory_order_acquire)) continue;
    slowest = std::min(slowest, c.clocks[static_cast<size_t>(w)]);
  }
  return slowest;
}

std::string StalenessGate::WaitMessage(const ChunkClocks& c, int worker, int chunk,
                                       absl::Duration waited) const {
  const int64_t mine = c.clocks[static_cast<size_t>(worker)];
  std::string message = absl::StrCat(
      ps_name_, ": worker:", worker, " waited ",
      absl::FormatDuration(absl::Trunc(waited, absl::Milliseconds(1))), " on chunk ", chunk,
      " for the workers behind it (--mode=ssp, --staleness=", staleness_, "): it pushed step ",
      mine, " and goes on once every worker has pushed step ", mine - staleness_, "; behind:");
  for (int w = 0; w < num_workers_; ++w) {
    if (released_[static_cast<size_t>(w)].load(std::memory_order_acquire)) continue;
    const int64_t clock = c.clocks[static_cast<size_t>(w)];
    if (clock >= mine - staleness_) continue;
    absl::StrAppend(&message, " worker:", w, " at step ", clock, " (", mine - clock,
                    " steps behind)");
  }
  return message;
}

absl::Status StalenessGate::Wait(int worker, int chunk, absl::Time deadline, int64_t* waited_ns) {
  ChunkClocks& c = *chunks_[static_cast<size_t>(chunk)];
  MutexLock lock(&c.mu);
  auto may_go = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(c.mu) {
    return stopped_.load(std::memory_order_acquire) ||
           Slowest(c) >= c.clocks[static_cast<size_t>(worker)] - staleness_;
  };
  if (may_go()) return absl::OkStatus();
  const absl::Time start = absl::Now();
  const auto wait_start = std::chrono::steady_clock::now();
  bool reached = true;
  while (!may_go()) {
    if (!c.advanced.WaitUntil(&c.mu, deadline)) {
      reached = may_go();
      break;
    }
  }
  *waited_ns += std::chrono::duration_cast<std::chrono::nanoseconds>(
                    std::chrono::steady_clock::now() - wait_start)
                    .count();
  if (reached) return absl::OkStatus();
  timeouts_.fetch_add(1, std::memory_order_relaxed);
  return absl::DeadlineExceededError(WaitMessage(c, worker, chunk, absl::Now() - start));
}

void StalenessGate::WakeAll() {
  for (const auto& chunk : chunks_) {
    // Under the lock: a waiter between its check and its sleep holds it.
    MutexLock lock(&chunk->mu);
    chunk->advanced.SignalAll();
  }
}

void StalenessGate::Release(int worker) {
  if (worker < 0 || worker >= num_workers_) return;
  if (released_[static_cast<size_t>(worker)].exchange(true, std::memory_order_acq_rel)) return;
  WakeAll();
}

void StalenessGate::Stop() {
  if (stopped_.exchange(true, std::memory_order_acq_rel)) return;
  WakeAll();
}

std::vector<int64_t> StalenessGate::Clocks() const {
  std::vector<int64_t> clocks(static_cast<size_t>(num_workers_),
                              chunks_.empty() ? 0 : std::numeric_limits<int64_t>::max());
  for (const auto& chunk : chunks_) {
    MutexLock lock(&chunk->mu);
    for (size_t w = 0; w < clocks.size(); ++w) clocks[w] = std::min(clocks[w], chunk->clocks[w]);
  }
  return clocks;
}

std::vector<int> StalenessGate::Released() const {
  std::vector<int> out;
  for (int w = 0; w < num_workers_; ++w) {
    if (released_[static_cast<size_t>(w)].load(std::memory_order_acquire)) out.push_back(w);
  }
  return out;
}

}  // namespace fulcrum::ps
