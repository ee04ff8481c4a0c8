// base: the project's mutex, its scoped lock and its condition variable, annotated for
// Clang's -Wthread-safety (the `thread-safety` preset turns its findings into errors).
// Thin wrappers over std::mutex / std::condition_variable in the style of leveldb's
// port::Mutex: ThreadSanitizer still sees the pthread calls underneath (it cannot see inside
// Debian's uninstrumented absl::Mutex), and the compiler checks every ABSL_GUARDED_BY.
// Thread-safety: Mutex and CondVar are thread-safe; a MutexLock belongs to one thread.
#pragma once

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>

#include "absl/base/thread_annotations.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace fulcrum {

class CondVar;

class ABSL_LOCKABLE Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  void Unlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }
  // Tells the analysis (not the runtime) that the caller holds this mutex.
  void AssertHeld() const ABSL_ASSERT_EXCLUSIVE_LOCK() {}

 private:
  friend class CondVar;
  std::mutex mu_;
};

// Holds `mu` for the enclosing scope.
class ABSL_SCOPED_LOCKABLE MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) { mu_->Lock(); }
  ~MutexLock() ABSL_UNLOCK_FUNCTION() { mu_->Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* const mu_;
};

// A condition variable (absl::CondVar's shape): the waiter passes the Mutex it holds, so the
// analysis can check it. Every wait has a deadline: WaitUntil/WaitFor return false when the
// deadline passed first, true when signalled (or woken spuriously). Callers re-check their
// condition in a loop, e.g.
//   MutexLock lock(&mu_);
//   while (!done_) {
//     if (!cv_.WaitUntil(&mu_, deadline)) return absl::DeadlineExceededError("...");
//   }
class CondVar {
 public:
  CondVar() = default;
  CondVar(const CondVar&) = delete;
  CondVar& operator=(const CondVar&) = delete;

  // Releases *mu while waiting; holds it again on return.
  bool WaitUntil(Mutex* mu, absl::Time deadline) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    // A far deadline (InfiniteFuture) is slept in day-long slices so the clock cannot overflow.
    const absl::Duration left = std::min(deadline - absl::Now(), absl::Hours(24));
    const auto until = std::chrono::system_clock::now() + absl::ToChronoNanoseconds(left);
    const bool notified = cv_.wait_until(lock, until) == std::cv_status::no_timeout;
    lock.release();  // the caller's MutexLock still owns the mutex
    return notified || absl::Now() < deadline;
  }
  bool WaitFor(Mutex* mu, absl::Duration timeout) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    return WaitUntil(mu, absl::Now() + timeout);
  }
  void Signal() { cv_.notify_one(); }
  void SignalAll() { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

}  // namespace fulcrum
