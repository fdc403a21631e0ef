// Mutex, MutexLock, ReaderMutexLock, CondVar: the daemon's locks, visible to ThreadSanitizer.
//
// Why not absl::Mutex directly: Debian's Abseil is built without TSan, so absl::Mutex's locking
// happens inside an uninstrumented library and TSan reports false races on every field it
// guards (measured: 5 reports on a 4-thread counter guarded by absl::MutexLock). Under
// -fsanitize=thread (GCC defines __SANITIZE_THREAD__) these wrap std::shared_mutex and
// std::condition_variable_any, which TSan intercepts (pthread_rwlock, pthread_cond); otherwise
// they wrap absl::Mutex and absl::CondVar. Both carry Abseil's thread-safety annotations, so
// ABSL_GUARDED_BY works.
// There is no Await/Condition: absl::Mutex re-evaluates a Condition at every unlock, which the
// std build cannot do; wait on a CondVar in a loop instead and SignalAll() wherever the
// condition can turn true.
// Thread-safety: the usual mutex semantics; a reader lock is shared (both builds).
#pragma once

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"

#if defined(__SANITIZE_THREAD__)
#define FUSION_TSAN_LOCKS 1
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <shared_mutex>
#else
#include "absl/synchronization/mutex.h"
#endif

namespace fusion {

class ABSL_LOCKABLE Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  void Unlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }
  // Shared: other readers may hold it at once, no writer can.
  void ReaderLock() ABSL_SHARED_LOCK_FUNCTION() { mu_.lock_shared(); }
  void ReaderUnlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock_shared(); }
  void AssertHeld() const ABSL_ASSERT_EXCLUSIVE_LOCK() {}
  void AssertReaderHeld() const ABSL_ASSERT_SHARED_LOCK() {}

 private:
  friend class CondVar;
#ifdef FUSION_TSAN_LOCKS
  std::shared_mutex mu_;
#else
  struct Adapter {
    void lock() ABSL_NO_THREAD_SAFETY_ANALYSIS { m.Lock(); }
    void unlock() ABSL_NO_THREAD_SAFETY_ANALYSIS { m.Unlock(); }
    void lock_shared() ABSL_NO_THREAD_SAFETY_ANALYSIS { m.ReaderLock(); }
    void unlock_shared() ABSL_NO_THREAD_SAFETY_ANALYSIS { m.ReaderUnlock(); }
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

class ABSL_SCOPED_LOCKABLE ReaderMutexLock {
 public:
  explicit ReaderMutexLock(Mutex* mu) ABSL_SHARED_LOCK_FUNCTION(mu) : mu_(mu) { mu_->ReaderLock(); }
  ~ReaderMutexLock() ABSL_UNLOCK_FUNCTION() { mu_->ReaderUnlock(); }
  ReaderMutexLock(const ReaderMutexLock&) = delete;
  ReaderMutexLock& operator=(const ReaderMutexLock&) = delete;

 private:
  Mutex* const mu_;
};

class CondVar {
 public:
  // Waits (holding `mu` exclusively) until signalled or `deadline` (absl::InfiniteFuture():
  // no deadline; a past one returns at once); returns true on timeout. Spurious wake-ups
  // happen: callers re-check their condition in a loop.
  bool WaitWithDeadline(Mutex* mu, absl::Time deadline) ABSL_NO_THREAD_SAFETY_ANALYSIS {
#ifdef FUSION_TSAN_LOCKS
    std::unique_lock<std::shared_mutex> lock(mu->mu_, std::adopt_lock);
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
  std::condition_variable_any cv_;
#else
  struct Adapter {
    void notify_all() { c.SignalAll(); }
    bool WaitWithDeadline(absl::Mutex* m, absl::Time d) { return c.WaitWithDeadline(m, d); }
    absl::CondVar c;
  } cv_;
#endif
};

}  // namespace fusion
