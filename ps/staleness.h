// ps: StalenessGate, the bounded-staleness rule of --mode=ssp (Stale Synchronous Parallel,
// Ho et al. 2013) for one ps shard. Gradients are applied on arrival as in async mode; the
// gate only decides when a worker may have its next values. It keeps, per worker and chunk,
// the worker's clock there: how many steps (pushes) of that worker the chunk has taken. A
// worker that pushed its step c to a chunk gets the chunk's values back once every worker
// the gate still waits for has pushed at least c - staleness steps to that chunk; so no
// worker computes a step more than `staleness` steps ahead of the slowest (0: lock-step,
// as sync mode without aggregation). The ps counts the clocks itself, from the pushes it
// takes (a retried push, answered as a duplicate, does not count again): a restarted worker
// goes on from its count, and nothing a worker sends can move another worker's clock.
//
// Workers that will push no more (finished, failed, or silent past --heartbeat_timeout)
// are released by the chief (Release): the gate no longer waits for them. Stop (training
// ended) wakes every waiter. Every wait has a deadline; DeadlineExceeded names the workers
// behind and by how many steps.
//
// Thread-safety: every method may be called from many threads at once. Each chunk has its
// own lock, so workers on different chunks never contend; Release and Stop take each chunk's
// lock in turn (never two at once).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "base/mutex.h"

namespace fulcrum::ps {

// The most workers an ssp shard keeps clocks for (CreateVariables' num_workers).
inline constexpr int kMaxSspWorkers = 1 << 16;

class StalenessGate {
 public:
  // The gate of ps `ps_name` ("ps:0", the prefix of its messages) for workers
  // 0..num_workers-1 on num_chunks chunks. Preconditions: num_workers >= 1, num_chunks >= 0,
  // staleness >= 0.
  StalenessGate(std::string ps_name, int num_workers, int num_chunks, int64_t staleness);
  StalenessGate(const StalenessGate&) = delete;
  StalenessGate& operator=(const StalenessGate&) = delete;

  int num_workers() const { return num_workers_; }
  int64_t staleness() const { return staleness_; }

  // The index i of task "worker:<i>" (0 <= i < num_workers); InvalidArgument naming the task
  // and `method` for any other name: in ssp mode only the spec's workers push and wait.
  absl::StatusOr<int> WorkerIndex(absl::string_view task, const char* method) const;

  // Counts one step of `worker` on `chunk` and wakes the chunk's waiters.
  // Preconditions: valid indices.
  void Advance(int worker, int chunk);

  // Returns once every worker not released has a clock on `chunk` of at least `worker`'s
  // clock there minus staleness, or the gate stopped: OK. DeadlineExceeded at `deadline`,
  // naming the chunk, this worker's clock and each worker behind with its clock and lag.
  // Adds the time spent waiting to *waited_ns (0 when the condition already held).
  absl::Status Wait(int worker, int chunk, absl::Time deadline, int64_t* waited_ns);

  // The gate no longer waits for `worker` (it finished, failed or is gone); its own pushes
  // still count and its own waits still wait. Idempotent. Wakes the waiters.
  void Release(int worker);
  // Training ended: wakes every waiter; later waits return OK at once.
  void Stop();

  // Per worker: its clock (the least over the chunks: the steps every chunk took).
  std::vector<int64_t> Clocks() const;
  // The released workers, in index order.
  std::vector<int> Released() const;
  // Waits that ended at their deadline, so far.
  int64_t timeouts() const { return timeouts_.load(std::memory_order_relaxed); }

 private:
  struct ChunkClocks {
    mutable Mutex mu;
    CondVar advanced;  // a clock grew, a worker was released or the gate stopped
    std::vector<int64_t> clocks ABSL_GUARDED_BY(mu);  // per worker
  };
  // The least clock over the workers not released on `c`; INT64_MAX when all are released.
  int64_t Slowest(const ChunkClocks& c) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(c.mu);
  std::string WaitMessage(const ChunkClocks& c, int worker, int chunk, absl::Duration waited) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(c.mu);
  // Wakes every waiter of every chunk (after released_ or stopped_ changed).
  void WakeAll();

  const std::string ps_name_;
  const int num_workers_;
  const int64_t staleness_;
  std::vector<std::unique_ptr<ChunkClocks>> chunks_;
  // Read under a chunk's lock by waiters; written before WakeAll takes each chunk's lock, so
  // a waiter between its check and its sleep cannot miss the change.
  std::unique_ptr<std::atomic<bool>[]> released_;
  std::atomic<bool> stopped_{false};
  std::atomic<int64_t> timeouts_{0};
};

}  // namespace fulcrum::ps
