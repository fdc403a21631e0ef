// Mutex, MutexLock, CondVar: the core's lock, visible to ThreadSanitizer.
//
// Why not absl::Mutex directly: Debian's Abseil is built without TSan, so absl::Mutex's locking
// happens inside an uninstrumented library and TSan reports false races on every field it
// guards (measured: 5 reports on a 4-thread counter guarded by absl::MutexLock). Under
// -fsanitize=thread (GCC defines __SANITIZE_THREAD__) these wrap std::mutex and
// std::condition_variable_any, which TSan intercepts; otherwise they wrap absl::Mutex and
// absl::CondVar. Both carry Abseil's thread-safety annotations, so ABSL_GUARDED_BY works.
// Thread-safety: the usual mutex semantics.
#pragma once

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"

#if defined(__SANITIZE_THREAD__)
#define FUSION_TSAN_LOCKS 1
#include <chrono>
#include <condition_variable>
#include <mutex>
#else
#include "absl/synchronization/mutex.h"
#endif

namespace fusion {

class ABSL_LOCKABLE Mutex {
 public:
  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  void Unlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }
  void AssertHeld() const ABSL_ASSERT_EXCLUSIVE_LOCK() {}

 private:
  friend class CondVar;
#ifdef FUSION_TSAN_LOCKS
  std::mutex mu_;
#else
  struct Adapter {
    void lock() ABSL_NO_THREAD_SAFETY_ANALYSIS { m.Lock(); }
    void unlock() ABSL_NO_THREAD_SAFETY_ANALYSIS { m.Unlock(); }
    absl::Mutex m;
  } mu_;
#endif
};

class ABSL_SCOPED_LOCKABLE MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) { mu_->Lock(); }
  ~MutexLock() ABSL_UNLOCK_FUNCTION() { mu_->Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* const mu_;
};

class CondVar {
 public:
  // Waits until signalled or `deadline`; returns true on timeout. Spurious wake-ups happen:
  // callers re-check their condition in a loop.
  bool WaitWithDeadline(Mutex* mu, absl::Time deadline) ABSL_NO_THREAD_SAFETY_ANALYSIS {
#ifdef FUSION_TSAN_LOCKS
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    const bool timed_out =
        deadline == absl::InfiniteFuture()
            ? (cv_.wait(lock), false)
            : cv_.wait_until(lock, absl::ToChronoTime(deadline)) == std::cv_status::timeout;
    lock.release();
    return timed_out;
#else
    return cv_.WaitWithDeadline(&mu->mu_.m, deadline);
#endif
  }
  void SignalAll() { cv_.notify_all(); }

 private:
#ifdef FUSION_TSAN_LOCKS
  std::condition_variable cv_;
#else
  struct Adapter {
    void notify_all() { c.SignalAll(); }
    bool WaitWithDeadline(absl::Mutex* m, absl::Time d) { return c.WaitWithDeadline(m, d); }
    absl::CondVar c;
  } cv_;
#endif
};

}  // namespace fusion
