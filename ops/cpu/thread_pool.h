// ops/cpu: a small fork-join thread pool for splitting one kernel (a GEMM) into independent
// parts. Why not Eigen's OpenMP GEMM: its threads busy-wait on each other inside the product,
// so when another process holds one of the cores (CI runs two tests at once on 2 cores) a
// step becomes 10-30x slower. Here every part is an independent single-threaded product and
// the only waits are a short spin followed by a blocking wait.
// Thread-safety: ParallelFor may be called by one thread at a time per pool (it is not
// re-entrant); the pool's own threads are managed internally. Locks are fulcrum::Mutex
// (base/mutex.h): checked by clang's -Wthread-safety and visible to ThreadSanitizer.

#pragma once

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "base/mutex.h"

namespace fulcrum::ops {

class ThreadPool {
 public:
  // A pool of `num_threads` compute threads: the caller of ParallelFor plus num_threads - 1
  // background threads. num_threads <= 1 runs everything on the caller.
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return static_cast<int>(threads_.size()) + 1; }

  // Runs fn(i) for every i in [0, n) on the pool's threads and the caller, and returns when
  // all have finished. fn must not call ParallelFor on the same pool.
  void ParallelFor(int n, absl::FunctionRef<void(int)> fn);

 private:
  struct Job;
  void WorkerLoop();

  std::vector<std::thread> threads_;
  Mutex mu_;
  CondVar wake_;  // signalled when generation_ changes
  std::shared_ptr<Job> job_ ABSL_GUARDED_BY(mu_);
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::atomic<uint64_t> published_generation_{0};  // generation_, readable without the lock
};

}  // namespace fulcrum::ops
