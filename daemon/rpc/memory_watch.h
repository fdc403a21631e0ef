// MemoryWatchReactor: the server stream of WatchMemory. It writes one MemoryState at once, then
// one every interval until the client cancels (or goes away, or the server shuts down).
//
// Invariant: at most one write in flight; Finish() only after the last write completed; the
// reactor deletes itself in OnDone() after its thread has ended.
// Thread-safety: one thread per stream does the snapshots and waits out the interval (streams
// are few: `active` counts them and Start() refuses past kMaxStreams); `visible` (when given)
// trims each state to what the caller may see before it is written; gRPC's callbacks
// (OnWriteDone, OnCancel, OnDone) only flip state under mu_.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <thread>

#include <grpcpp/grpcpp.h>

#include "common/mutex.h"
#include "absl/time/time.h"
#include "fusion/v1/fusion.pb.h"
#include "rpc/memory_state.h"
#include "rpc/uid_limits.h"

namespace fusion {

class MemoryWatchReactor final : public grpc::ServerWriteReactor<v1::MemoryState> {
 public:
  static constexpr int kMaxStreams = 16;
  // interval_ms as in WatchMemoryRequest: 0 = 1000 ms, below 100 ms counts as 100 ms.
  static absl::Duration Interval(uint32_t interval_ms);
  // A started stream, or one finished at once with RESOURCE_EXHAUSTED when kMaxStreams are
  // open. Once `stopping` is set a stream ends (UNAVAILABLE) at its next interval, so a server
  // drain does not wait for watchers. `source`, `active` and `stopping` must outlive every stream.
  static grpc::ServerWriteReactor<v1::MemoryState>* Start(const MemoryStateSource* source,
                                                          absl::Duration interval,
                                                          std::atomic<int>* active,
                                                          const std::atomic<bool>* stopping,
                                                          std::unique_ptr<UidSlots::Slot> slot = nullptr,
                                                          std::function<void(v1::MemoryState*)> visible = nullptr);

  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  MemoryWatchReactor(const MemoryStateSource* source, absl::Duration interval, std::atomic<int>* active,
                     const std::atomic<bool>* stopping, std::unique_ptr<UidSlots::Slot> slot,
                     std::function<void(v1::MemoryState*)> visible)
      : source_(source), interval_(interval), active_(active), stopping_(stopping), slot_(std::move(slot)),
        visible_(std::move(visible)) {}
  void Loop();

  const MemoryStateSource* const source_;
  const absl::Duration interval_;
  std::atomic<int>* const active_;
  const std::atomic<bool>* const stopping_;
  Mutex mu_;
  CondVar changed_;  // signalled under mu_ when writing_ or cancelled_ changes
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool write_failed_ ABSL_GUARDED_BY(mu_) = false;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  std::unique_ptr<UidSlots::Slot> slot_;  // the caller's watch-stream slot; freed with the reactor
  const std::function<void(v1::MemoryState*)> visible_;
  v1::MemoryState state_;  // the message in flight; touched by the loop thread only
  std::thread thread_;
};

}  // namespace fusion
