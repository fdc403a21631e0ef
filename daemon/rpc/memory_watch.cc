#include "rpc/memory_watch.h"

#include <algorithm>

#include "absl/time/clock.h"

#include "fusion_status.h"
#include "rpc/stream_util.h"

namespace fusion {

absl::Duration MemoryWatchReactor::Interval(uint32_t interval_ms) {
  if (interval_ms == 0) return absl::Milliseconds(1000);
  return absl::Milliseconds(std::max<uint32_t>(interval_ms, 100));
}

grpc::ServerWriteReactor<v1::MemoryState>* MemoryWatchReactor::Start(const MemoryStateSource* source,
                                                                     absl::Duration interval,
                                                                     std::atomic<int>* active,
                                                                     const std::atomic<bool>* stopping,
                                                                     std::unique_ptr<UidSlots::Slot> slot,
                                                                     std::function<void(v1::MemoryState*)> visible) {
  if (active->fetch_add(1) >= kMaxStreams) {
    active->fetch_sub(1);
    return new FinishedStream<v1::MemoryState>(grpc::Status(
        grpc::StatusCode::RESOURCE_EXHAUSTED,
        absl::StrCat("WatchMemory: ", kMaxStreams, " streams are open already; use GetMemoryState")));
  }
  auto* reactor = new MemoryWatchReactor(source, interval, active, stopping, std::move(slot), std::move(visible));
  reactor->thread_ = std::thread([reactor] { reactor->Loop(); });
  return reactor;
}

void MemoryWatchReactor::Loop() {
  grpc::Status status = grpc::Status::OK;
  for (;;) {
    auto snapshot = source_->Snapshot();
    if (!snapshot.ok()) {
      status = ToGrpcStatus(snapshot.status());
      break;
    }
    {
      MutexLock lock(&mu_);
      if (cancelled_) break;
      writing_ = true;
    }
    state_ = *std::move(snapshot);
    if (visible_) visible_(&state_);
    StartWrite(&state_);
    MutexLock lock(&mu_);
    while (writing_) changed_.WaitWithDeadline(&mu_, absl::InfiniteFuture());
    if (write_failed_ || cancelled_) break;
    // Sleeps the interval unless cancelled first.
    const absl::Time wake = absl::Now() + interval_;
    while (!cancelled_) {
      if (changed_.WaitWithDeadline(&mu_, wake)) break;
    }
    if (cancelled_) break;
    if (stopping_->load()) {
      status = grpc::Status(grpc::StatusCode::UNAVAILABLE, "fusiond is stopping");
      break;
    }
  }
  bool cancelled;
  {
    MutexLock lock(&mu_);
    cancelled = cancelled_ || write_failed_;
  }
  Finish(cancelled ? grpc::Status(grpc::StatusCode::CANCELLED, "watch cancelled") : status);
}

void MemoryWatchReactor::OnWriteDone(bool ok) {
  MutexLock lock(&mu_);
  writing_ = false;
  if (!ok) write_failed_ = true;
  changed_.SignalAll();
}

void MemoryWatchReactor::OnCancel() {
  MutexLock lock(&mu_);
  cancelled_ = true;
  changed_.SignalAll();
}

void MemoryWatchReactor::OnDone() {
  // gRPC may run OnDone on the loop thread itself (right after its Finish): then detach.
  if (thread_.get_id() == std::this_thread::get_id()) {
    thread_.detach();
  } else {
    thread_.join();
  }
  active_->fetch_sub(1);
  delete this;
}

}  // namespace fusion
