#include "ops/cpu/thread_pool.h"

#include <algorithm>
#include <chrono>

#ifdef FULCRUM_HAVE_ONEDNN
#include <omp.h>
#endif

#include "base/thread_name.h"

namespace fulcrum::ops {
namespace {

// How long a thread polls before it blocks. Long enough to catch the next GEMM of the same
// step without a futex round trip, short enough to cost little when the core is contended.
constexpr auto kSpin = std::chrono::microseconds(200);
// Longest single sleep of a blocked thread before it re-checks its condition.
constexpr absl::Duration kWaitSlice = absl::Seconds(1);

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// Polls `done` until it is true or kSpin has passed; returns its last value.
template <typename F>
bool SpinUntil(F done) {
  const auto start = std::chrono::steady_clock::now();
  int polls = 0;
  while (!done()) {
    CpuRelax();
    if (++polls % 64 == 0 && std::chrono::steady_clock::now() - start > kSpin) return done();
  }
  return true;
}

}  // namespace

// One ParallelFor call. Workers that wake late hold a reference to a finished Job, find no
// index left to claim and never call its (by then dangling) function.
struct ThreadPool::Job {
  Job(absl::FunctionRef<void(int)> f, int n) : fn(f), count(n), remaining(n) {}

  void Run() {
    for (int i = next.fetch_add(1, std::memory_order_relaxed); i < count;
         i = next.fetch_add(1, std::memory_order_relaxed)) {
      fn(i);
      if (remaining.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        {
          MutexLock lock(&mu);
          done = true;
        }
        finished.SignalAll();  // wakes a caller blocked in Wait
      }
    }
  }

  void Wait() {
    if (SpinUntil([this] { return remaining.load(std::memory_order_acquire) == 0; })) return;
    MutexLock lock(&mu);
    // The parts run on this pool's threads and always finish; the deadline only bounds each
    // sleep so that no wait is unbounded.
    while (!done) finished.WaitFor(&mu, kWaitSlice);
  }

  absl::FunctionRef<void(int)> fn;
  const int count;
  std::atomic<int> next{0};
  std::atomic<int> remaining;
  Mutex mu;
  CondVar finished;
  bool done ABSL_GUARDED_BY(mu) = false;
};

#ifdef FULCRUM_HAVE_ONEDNN

ThreadPool::ThreadPool(int num_threads) : num_threads_(std::max(1, num_threads)) {
  // A pool's ParallelFor part may run a replica whose own pool opens a team: allow two levels.
  omp_set_max_active_levels(2);
}

ThreadPool::~ThreadPool() = default;

void ThreadPool::BindCallerThreads(int num_threads) { omp_set_num_threads(num_threads); }

void ThreadPool::ParallelFor(int n, absl::FunctionRef<void(int)> fn) {
  if (n <= 0) return;
  const int threads = std::min(n, num_threads_);
  if (threads <= 1) {
    for (int i = 0; i < n; ++i) fn(i);
    return;
  }
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
  for (int i = 0; i < n; ++i) fn(i);
}

void ThreadPool::WorkerLoop() {}

#else  // !FULCRUM_HAVE_ONEDNN

ThreadPool::ThreadPool(int num_threads) : num_threads_(std::max(1, num_threads)) {
  for (int i = 1; i < num_threads; ++i) threads_.emplace_back([this] { WorkerLoop(); });
}

void ThreadPool::BindCallerThreads(int) {}

ThreadPool::~ThreadPool() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
    ++generation_;
    published_generation_.store(generation_, std::memory_order_release);
  }
  wake_.SignalAll();
  for (auto& t : threads_) t.join();
}

void ThreadPool::ParallelFor(int n, absl::FunctionRef<void(int)> fn) {
  if (n <= 0) return;
  if (threads_.empty() || n == 1) {
    for (int i = 0; i < n; ++i) fn(i);
    return;
  }
  auto job = std::make_shared<Job>(fn, n);
  {
    MutexLock lock(&mu_);
    job_ = job;
    ++generation_;
    published_generation_.store(generation_, std::memory_order_release);
  }
  wake_.SignalAll();
  job->Run();
  job->Wait();
}

void ThreadPool::WorkerLoop() {
  // The compute pool's threads share one name, so the profiler reports them as one group.
  SetCurrentThreadName("fulcrum-compute");
  uint64_t seen = 0;
  while (true) {
    SpinUntil([&] { return published_generation_.load(std::memory_order_acquire) != seen; });
    std::shared_ptr<Job> job;
    {
      MutexLock lock(&mu_);
      // An idle pool thread sleeps in slices until the next job or the pool's end.
      while (generation_ == seen) wake_.WaitFor(&mu_, kWaitSlice);
      if (stop_) return;
      seen = generation_;
      job = job_;
    }
    job->Run();
  }
}

#endif  // FULCRUM_HAVE_ONEDNN

}  // namespace fulcrum::ops
