// Notification: absl::Notification's interface on common/mutex.h, for tests. Test-only.
//
// Why: absl::Notification locks an uninstrumented absl::Mutex inside Debian's Abseil, so under
// ThreadSanitizer a Notify() does not happen-before the waiter's return and every access the
// notification orders is reported as a race. This one orders them in both builds.
// Thread-safety: Notify() once, from any thread; the rest from any thread.
#pragma once

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/mutex.h"

namespace fusion {

class Notification {
 public:
  void Notify() {
    MutexLock lock(&mu_);
    notified_ = true;
    cv_.SignalAll();  // under mu_: a waiter may destroy this once it has the lock
  }
  bool HasBeenNotified() const {
    MutexLock lock(&mu_);
    return notified_;
  }
  void WaitForNotification() const {
    MutexLock lock(&mu_);
    while (!notified_) cv_.WaitWithDeadline(&mu_, absl::InfiniteFuture());
  }
  // True if notified within `timeout`.
  bool WaitForNotificationWithTimeout(absl::Duration timeout) const {
    const absl::Time deadline = absl::Now() + timeout;
    MutexLock lock(&mu_);
    while (!notified_) {
      if (cv_.WaitWithDeadline(&mu_, deadline)) break;
    }
    return notified_;
  }

 private:
  mutable Mutex mu_;
  mutable CondVar cv_;
  bool notified_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace fusion
