// LiveReactor: the bidirectional stream of fusion.v1 Live (docs/ARCHITECTURE.md#the-life-of-a-
// live-frame). gRPC's callbacks read the client's messages as they come; one thread per session
// opens it (jobs::LiveRunner::OpenLive: leases, the source face) and swaps its frames one at a
// time, writing each result before it takes the next frame.
//
// Newest frame wins: frames wait in a one-frame mailbox. A frame read while another waits
// replaces it and the replaced one is dropped and counted (LiveFrameResult.frames_dropped,
// LiveSummary), its memfd token removed; so at most two frames are held (one waiting, one being
// swapped), whatever the client's rate. Results go out in the order their frames came.
// The end: after the client's half-close the waiting frame is swapped, a LiveSummary written
// and the stream finished OK. When the client goes away (OnCancel) or the daemon stops, the
// running frame ends at its next checkpoint (the session's cancel flag) and the session —
// every lease and host buffer — is destroyed before Finish, well within a second on the CPU.
// Errors end the stream with the session's status (INVALID_ARGUMENT with stage 'decode' for a
// bad frame, and for a raw frame whose result would not fit in one message of max_message_bytes,
// before it is swapped; a request that breaks the protocol: INVALID_ARGUMENT naming it). A
// session the daemon's stop ends is UNAVAILABLE, one whose client went away CANCELLED. The end is
// logged with the code, our message and the frame counts.
// Visibility: the session is in `registry` (ListLiveSessions, MemoryState.live_sessions, metrics)
// from the stream's start until its leases end; its counts and latency go there as they happen.
// Invariant: at most one write in flight; Finish() once, after the last write completed; the
// reactor deletes itself in OnDone() after its thread has ended.
// Thread-safety: gRPC's callbacks and the session thread share the state under mu_.
#pragma once

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/mutex.h"
#include "fusion/v1/fusion.pb.h"
#include "jobs/job_manager.h"
#include "jobs/live_runner.h"
#include "memory/residency_types.h"
#include "rpc/live_sessions.h"
#include "rpc/memfd_registry.h"
#include "rpc/uid_limits.h"

namespace fusion {

class LiveReactor final : public grpc::ServerBidiReactor<v1::LiveRequest, v1::LiveResponse> {
 public:
  // A started stream. `runner`, `jobs` (may be null), `memfds`, `registry` and `stopping` must
  // outlive it; `slot` is the uid's session slot, returned with the reactor. While a frame is
  // swapped the session holds a live claim on `jobs` (JobManager::ClaimForLive): running batch
  // jobs yield at their next yield point and none starts, so live frames come before every job
  // priority; the claim ends with the frame, and batch work goes on in the time between frames.
  static LiveReactor* Start(jobs::LiveRunner* runner, jobs::JobManager* jobs, MemfdRegistry* memfds,
                            LiveSessionRegistry* registry, Owner owner, std::unique_ptr<UidSlots::Slot> slot,
                            const std::atomic<bool>* stopping, uint64_t max_message_bytes);

  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  struct Waiting {
    v1::LiveFrame frame;
    absl::Time received;
  };
  LiveReactor(jobs::LiveRunner* runner, jobs::JobManager* jobs, MemfdRegistry* memfds, Owner owner,
              std::unique_ptr<UidSlots::Slot> slot, const std::atomic<bool>* stopping, uint64_t max_message_bytes)
      : runner_(runner), jobs_(jobs), memfds_(memfds), owner_(std::move(owner)), slot_(std::move(slot)),
        stopping_(stopping), max_message_bytes_(max_message_bytes) {}
  // INVALID_ARGUMENT naming the frame when its result (`bytes`, `how`) could not go out in one
  // message (max_message_bytes): stage "decode" before the swap (a raw frame's size is known),
  // "encode" after it (an encoded result).
  absl::Status CheckResultFits(const v1::LiveFrame& frame, uint64_t bytes, const char* how, const char* stage) const;
  void Loop();
  // The session from open to the end; its status is the stream's.
  absl::Status Serve();
  // Waits for the open message; its source and options into *open.
  absl::Status AwaitOpen(v1::LiveOpen* open);
  // The next frame to swap, or nullopt at the end of the frames; CANCELLED / UNAVAILABLE /
  // the protocol error when the stream must end.
  absl::StatusOr<std::optional<Waiting>> NextFrame();
  // Writes `msg` and waits until it is done; CANCELLED when the write failed.
  absl::Status Write(v1::LiveResponse msg);
  // The bytes of an ImageData (inline, or a memfd token of the owner, removed once read).
  absl::StatusOr<std::string> Bytes(v1::ImageData* image, const std::string& what);
  // Removes a dropped frame's memfd token.
  void Discard(const v1::LiveFrame& frame);
  bool Stopped() const { return cancelled_flag_.load() || stopping_->load(); }
  // Why a stopped session ends: the daemon is stopping (UNAVAILABLE, as every call then; its
  // stop may cancel the call as well), else the client went away (CANCELLED).
  absl::Status StoppedStatus() const {
    return stopping_->load() ? absl::UnavailableError("fusiond is stopping")
                             : absl::CancelledError("Live: the client went away");
  }

  jobs::LiveRunner* const runner_;
  jobs::JobManager* const jobs_;
  MemfdRegistry* const memfds_;
  const Owner owner_;
  std::unique_ptr<UidSlots::Slot> slot_;
  const std::atomic<bool>* const stopping_;
  const uint64_t max_message_bytes_;
  std::atomic<bool> cancelled_flag_{false};  // OnCancel: read by the session's cancel checks

  Mutex mu_;
  CondVar changed_;  // signalled under mu_ when anything below changes
  std::optional<v1::LiveOpen> open_ ABSL_GUARDED_BY(mu_);
  bool opened_ ABSL_GUARDED_BY(mu_) = false;  // an open message was read (once)
  std::optional<Waiting> waiting_ ABSL_GUARDED_BY(mu_);
  uint64_t received_ ABSL_GUARDED_BY(mu_) = 0, dropped_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status protocol_ ABSL_GUARDED_BY(mu_);  // a request out of the protocol
  bool reads_done_ ABSL_GUARDED_BY(mu_) = false;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  bool writing_ ABSL_GUARDED_BY(mu_) = false, write_failed_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;  // Finish() called: no more reads started
  // The session in the registry; reset as its leases end.
  std::unique_ptr<LiveSessionRegistry::Entry> entry_ ABSL_GUARDED_BY(mu_);

  v1::LiveRequest in_;    // the read in flight; touched by OnReadDone only
  v1::LiveResponse out_;  // the write in flight; touched by the session thread only
  std::thread thread_;
};

}  // namespace fusion
