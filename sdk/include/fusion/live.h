// fusion::LiveSession - a live session of the C++ SDK (fusion.v1 Live; docs/SDK.md). Opened
// by Client::OpenLive with a source image; frames go in with SendRaw/SendEncoded and come back
// swapped, in the order sent, from Receive. When frames are sent faster than fusiond swaps
// them, the newest waiting frame wins and the others are dropped by the daemon (counted in
// LiveFrameResult::frames_dropped and LiveSummary). No gRPC or protobuf types in this header.
//
//   auto live = (*client)->OpenLive(source_png);
//   (*live)->SendRaw(0, bgr, 640, 360);       // from one thread ...
//   auto r = (*live)->Receive();              // ... results on another (or the same, in turn)
//   (*live)->CloseSend();  while (auto r = (*live)->Receive(); r.ok() && r->has_value()) {}
//
// Errors: the stream's status (see Live in fusion.proto): RESOURCE_EXHAUSTED (models cannot be
// held, max_live_sessions_per_uid), INVALID_ARGUMENT with ErrorStage "decode" for a bad frame,
// FAILED_PRECONDITION with ErrorStage "detect" when the source has no face.
// Thread-safety: one thread may send while another receives; not more.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace fusion {

struct LiveOpened {
  std::string device;               // "cpu", "cuda:0"
  std::vector<std::string> models;  // leased while the session is open
  uint64_t model_bytes = 0;
};

struct LiveTimings {  // milliseconds, measured by the daemon
  double wait_ms = 0, decode_ms = 0, swap_ms = 0, encode_ms = 0, total_ms = 0;
};

struct LiveFrameResult {
  uint64_t sequence = 0;
  std::string image;  // raw BGR for a raw frame, else JPEG for a JPEG and PNG for others
  uint32_t width = 0, height = 0;
  uint32_t faces_swapped = 0;
  bool keyframe = false;
  uint64_t frames_dropped = 0;  // by the daemon, this session, so far
  LiveTimings timings;
};

struct LiveSummary {
  uint64_t frames_received = 0, frames_returned = 0, frames_dropped = 0;
};

class LiveSession {
 public:
  ~LiveSession();  // cancels a stream that is not finished
  LiveSession(const LiveSession&) = delete;
  LiveSession& operator=(const LiveSession&) = delete;

  const LiveOpened& opened() const;
  // `bgr`: width * height * 3 bytes, rows packed. Frames over the client's memfd threshold go
  // by memfd. An error means the stream ended: Receive() gives its status.
  absl::Status SendRaw(uint64_t sequence, const std::string& bgr, uint32_t width, uint32_t height);
  absl::Status SendEncoded(uint64_t sequence, const std::string& image);
  // No more frames: the daemon swaps the one waiting, sends the summary and ends the stream.
  absl::Status CloseSend();
  // The next result; nullopt after the last one (the summary is then set), or the stream's error.
  absl::StatusOr<std::optional<LiveFrameResult>> Receive();
  const LiveSummary& summary() const;
  // Ends the stream now (the daemon sees the client gone).
  void Cancel();

  struct Impl;
  explicit LiveSession(std::unique_ptr<Impl> impl);

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace fusion
