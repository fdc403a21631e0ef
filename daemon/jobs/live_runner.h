// LiveRunner / LiveSession: what runs a live session's frames (fusion.v1 Live; the pipeline
// implements it, pipeline/live_session.cc; docs/ARCHITECTURE.md#the-life-of-a-live-frame).
//
// A session is opened with a source image and options: its models are leased for as long as it
// lives (RESOURCE_EXHAUSTED naming the bytes when they cannot be held) and the source face is
// analysed once. Then Frame() swaps one frame at a time, in the order given, with the video
// job's tracking and per-frame core. Destroying the session returns every lease and host
// buffer it holds.
// Frame() is the one place where a session's frame runs: a scheduler that favours live frames
// (priority, preemption) hooks in there.
// Errors: Open: INVALID_ARGUMENT (bad option, undecodable source: stage 'decode'),
// FAILED_PRECONDITION (no face in the source image: stage 'detect'), RESOURCE_EXHAUSTED,
// CANCELLED. Frame: INVALID_ARGUMENT naming the frame (undecodable, a raw frame of the wrong
// size: stage 'decode'), RESOURCE_EXHAUSTED naming the stage, CANCELLED, INTERNAL.
// Thread-safety: Open from any thread; one session is used by one thread at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "fusion/v1/fusion.pb.h"
#include "memory/residency_types.h"

namespace fusion::jobs {

class LiveSession {
 public:
  virtual ~LiveSession() = default;
  // The models leased while the session lives, their device bytes together, the device.
  virtual const std::vector<std::string>& models() const = 0;
  virtual uint64_t model_bytes() const = 0;
  virtual const std::string& device() const = 0;
  // Swaps one frame: `bytes` is an encoded image, or with `frame.raw()` set its BGR pixels
  // (`frame.image` is not read: the caller resolved it into `bytes`). Fills `out`'s image,
  // size, faces_swapped, keyframe, the timings of decode, swap and encode, and the stages.
  virtual absl::Status Frame(const v1::LiveFrame& frame, const std::string& bytes, v1::LiveFrameResult* out) = 0;
};

class LiveRunner {
 public:
  virtual ~LiveRunner() = default;
  // `cancelled` is polled while the session waits (memory, stages) and must stay callable for
  // the session's life: once it returns true, Open and Frame end CANCELLED. `give_way` (may be
  // null; callable for the session's life, from any thread) is what the session's work beside
  // its frames (the keyframe scans) calls between its units: JobManager::GiveWayToLive.
  virtual absl::StatusOr<std::unique_ptr<LiveSession>> OpenLive(const Owner& owner, const std::string& source_image,
                                                                const v1::JobOptions& options,
                                                                std::function<bool()> cancelled,
                                                                std::function<void()> give_way) = 0;
};

}  // namespace fusion::jobs
