// FrameSwapper: one analysed video frame through the per-face core (SwapFaces with the source
// and target ready) — the per-frame step every video job and every live session runs
// (docs/ARCHITECTURE.md#the-life-of-a-video-frame, #the-life-of-a-live-frame). Each track's
// points are steadied over time (geometry::OneEuroPoints, one filter per track), the faces
// chosen (LARGEST, max_faces), the frame swapped, and the flicker sums of its tracks against
// the frame before measured. Also here: the source face a video job or live session prepares
// once (PrepareSource). No LibTorch in this header or its TU.
// Errors: SwapFaces' (RESOURCE_EXHAUSTED naming the stage, CANCELLED, INTERNAL).
// Thread-safety: one thread (the job's, or the session's).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <opencv2/core.hpp>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "fusion/v1/fusion.pb.h"
#include "geometry/face_track.h"
#include "pipeline/execution.h"
#include "pipeline/face_swap.h"
#include "pipeline/pipeline_runner.h"
#include "pipeline/video_faces.h"

namespace fusion {
namespace internal {
class VideoTrackerState;  // video_checkpoint.proto
}  // namespace internal

// What the swap did to one frame, carried with it to the encode thread (a chunk's counts).
struct FrameOutcome {
  bool keyframe = false;      // the detector scanned it
  bool tracked = false;       // a face of it was carried by tracking
  uint32_t tracks_started = 0;
  bool swapped = false;
  uint32_t faces = 0;
  std::vector<float> identity_distances;  // per swapped face of a scored frame: source vs result
  double flicker_input = 0, flicker_output = 0;  // SegmentCounts' sums, this frame's share
};

// Every kScoreEvery-th frame of a video job is scored (its swapped faces described again in the
// result): the identity distances' median and worst come from them.
inline constexpr int64_t kScoreEvery = 30;

// The source (and reference) picture of a video job or live session: decoded, detected,
// landmarked and encoded once, before the first frame. Their buffers stay admitted meanwhile.
struct VideoSource {
  Lease source_buffers, reference_buffers;
  std::vector<Picture> pictures;  // [source, reference?]
};
// FAILED_PRECONDITION "no face in the source image" (or the reference); the stages' errors.
absl::Status PrepareSource(Execution& run, const PipelineRunner::Options& opt, const v1::JobOptions& o,
                           const DetectSettings& detect, const std::string& source_image, VideoSource* out);

class FrameSwapper {
 public:
  // `total`: the frames of the job (0: a live session, whose frames are not counted ahead);
  // `chunk`: frames per chunk (no flicker pair across a chunk's start); every `score_every`-th
  // frame is scored (0: none). `o`, `fixed` and `report` must outlive the swapper.
  FrameSwapper(Execution& run, const v1::JobOptions& o, FaceStages stages, const std::vector<Picture>& fixed,
               size_t max_faces, double fps, uint64_t total, size_t chunk, v1::JobResult& report,
               int64_t score_every = kScoreEvery)
      : run_(run), o_(o), stages_(std::move(stages)), fixed_(fixed), max_faces_(max_faces),
        dt_(fps > 0 ? 1.0 / fps : 1.0 / 30), total_(total), chunk_(chunk), score_every_(score_every),
        report_(report) {}

  // The tracks' point filters, into `out` (with VideoFaces::SaveState: a chunk's checkpoint).
  void SaveFilters(internal::VideoTrackerState* out) const;
  // Restores what SaveFilters wrote; false (and nothing restored) when it does not fit.
  bool RestoreFilters(const internal::VideoTrackerState& state);

  // Replaces a.frame.bgr with the swapped frame (unchanged when it has no face to swap).
  absl::Status Swap(AnalysedFrame& a, FrameOutcome* out);

 private:
  // "frame 12 of 300" (a job) or "frame 12" (a session): stage text and cancel messages.
  std::string FrameName(int64_t index) const;
  // The frame's selected faces with their tracks' steadied points; tracks that ended lose their
  // filters. Counts the tracks that start here and whether any face was tracked.
  std::vector<DetectedFace> Steadied(const AnalysedFrame& a, FrameOutcome* out);
  // The flicker sums of the tracks in this frame and the one before: not across a cut, nor
  // where a chunk starts (a resumed run has not the output frame before it: both runs count
  // the same pairs).
  void Flicker(const AnalysedFrame& a, const cv::Mat& input, const cv::Mat& output, FrameOutcome* out);

  Execution& run_;
  const v1::JobOptions& o_;
  const FaceStages stages_;
  const std::vector<Picture>& fixed_;
  const size_t max_faces_;
  const double dt_;
  const uint64_t total_;
  const size_t chunk_;
  const int64_t score_every_;
  v1::JobResult& report_;
  bool cut_noted_ = false;  // a face too far outside the frame was named (once per job)
  absl::flat_hash_map<uint64_t, geometry::OneEuroPoints> filters_;
  cv::Mat prev_in_, prev_out_;
  absl::flat_hash_map<uint64_t, faceapi::FaceBox> prev_boxes_;
};

}  // namespace fusion
