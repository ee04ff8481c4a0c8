// ops/cpu: the process's compute threads, a fork-join pool for splitting one kernel (a GEMM, an
// im2col) into independent parts. Built with oneDNN (FULCRUM_HAVE_ONEDNN), whose Debian build
// runs on OpenMP, the pool IS the calling thread's OpenMP team: ParallelFor is an OpenMP loop of
// num_threads() threads and BindCaller() sizes the team oneDNN's primitives use, so the
// project's kernels and oneDNN's share one set of threads and --threads is honoured exactly.
// Built without oneDNN (the sanitizer builds: ThreadSanitizer does not see libgomp's
// synchronisation) the pool owns num_threads() - 1 threads of its own; every part is an
// independent single-threaded product and the only waits are a short spin followed by a
// blocking wait.
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

  int num_threads() const { return num_threads_; }

  // Makes the calling thread's OpenMP team (what oneDNN runs on) num_threads() wide, and lets
  // a ParallelFor part open a nested team (one pool per CPU replica). No-op without oneDNN.
  void BindCaller() const { BindCallerThreads(num_threads_); }
  // The same for a team of `num_threads` (1: oneDNN runs on the calling thread alone).
  static void BindCallerThreads(int num_threads);

  // Runs fn(i) for every i in [0, n) on the pool's threads and the caller, and returns when
  // all have finished. fn must not call ParallelFor on the same pool.
  void ParallelFor(int n, absl::FunctionRef<void(int)> fn);

 private:
  struct Job;
  void WorkerLoop();

  int num_threads_;
  std::vector<std::thread> threads_;
  Mutex mu_;
  CondVar wake_;  // signalled when generation_ changes
  std::shared_ptr<Job> job_ ABSL_GUARDED_BY(mu_);
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::atomic<uint64_t> published_generation_{0};  // generation_, readable without the lock
};

}  // namespace fulcrum::ops
