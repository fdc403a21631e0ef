// BoundedQueue: a small blocking FIFO between the threads of a streaming job (the video job's
// decode -> swap -> encode), so that at most `capacity` items wait between two stages and the
// memory of a stream is independent of its length.
// Close() ends the stream (pops drain what is left, then return nullopt; pushes fail); Cancel()
// drops what is queued and wakes every waiter (pushes fail, pops return nullopt at once): the
// way one failed or cancelled stage stops the others.
// Thread-safety: every method may be called concurrently; one mutex, no callback under it.
#pragma once

#include <cstddef>
#include <deque>
#include <optional>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "common/mutex.h"

namespace fusion {

template <typename T>
class BoundedQueue {
 public:
  explicit BoundedQueue(size_t capacity) : capacity_(capacity < 1 ? 1 : capacity) {}
  BoundedQueue(const BoundedQueue&) = delete;
  BoundedQueue& operator=(const BoundedQueue&) = delete;

  // Waits while the queue is full; false (the item dropped) once closed or cancelled.
  bool Push(T item) {
    MutexLock lock(&mu_);
    while (items_.size() >= capacity_ && !closed_) changed_.WaitWithDeadline(&mu_, absl::InfiniteFuture());
    if (closed_) return false;
    items_.push_back(std::move(item));
    changed_.SignalAll();
    return true;
  }
  // Waits while the queue is empty and open; nullopt at the end of the stream or on cancel.
  std::optional<T> Pop() {
    MutexLock lock(&mu_);
    while (items_.empty() && !closed_) changed_.WaitWithDeadline(&mu_, absl::InfiniteFuture());
    if (items_.empty()) return std::nullopt;
    std::optional<T> item(std::move(items_.front()));
    items_.pop_front();
    changed_.SignalAll();
    return item;
  }
  void Close() {
    MutexLock lock(&mu_);
    closed_ = true;
    changed_.SignalAll();
  }
  void Cancel() {
    std::deque<T> dropped;  // destroyed after the lock is released
    MutexLock lock(&mu_);
    closed_ = true;
    dropped.swap(items_);
    changed_.SignalAll();
  }
  size_t capacity() const { return capacity_; }

 private:
  const size_t capacity_;
  Mutex mu_;
  CondVar changed_;  // signalled under mu_ when items_ or closed_ change
  std::deque<T> items_ ABSL_GUARDED_BY(mu_);
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace fusion
