// VideoFaces: where the faces of a video job's frames are, frame by frame, before the per-face
// stages swap them (docs/ARCHITECTURE.md#the-life-of-a-video-frame). No LibTorch in this header
// or its TU: the detector and the landmark net run through Execution stages (stages.h).
//
// Keyframes are scanned by the detector (DetectFaces, the image job's full pyramid); every other
// frame gets its faces from tracks: each face of the frame before is carried on by its points'
// motion (geometry::Extrapolate), boxed as the detector boxed it (BoxRelation, measured at the
// track's last detection) and landmarked there by the landmark net. A track holds while its face
// patch correlates with the one at its last detection (kMinPatchSimilarity); when one is lost the
// frame becomes a keyframe at once.
// Keyframes: the first frame of the job, the last frame of each chunk and of the job (so no
// frame waits for its faces across a chunk's end), a scene cut (geometry::IsSceneCut; tracks end
// there), a lost track, and every `interval` frames. Tracks continue across chunks: the state
// after a chunk's last frame (SaveState) is committed with the chunk, and a job resumed at a
// chunk restores it (RestoreState), so it gives the bytes of an uninterrupted run and a still
// face does not jump where one chunk ends and the next begins.
// With every_frame, every frame (the reference; the same tracks and per-face work).
// Faces entering: a face found at a keyframe with no track is traced back, by the same tracking
// step run backwards, through the frames held since the keyframe before (they are held until the
// next keyframe for that), so a face present at any keyframe is swapped from its first frame of
// that span; a face whose whole stay falls between two keyframes (fewer than `interval` frames)
// may be missed.
// Detections are matched to tracks by IoU with the tracks' predicted boxes (>= kMatchIoU);
// a track no detection matches at a keyframe is carried into it as between keyframes and ends
// only where it does not hold (the detector misses some rolled faces in some frames).
// Live keyframe scans (Settings::scan): a live session's periodic keyframe is not scanned in its
// frame's path (the detector's pyramid costs 3-4 frame intervals at 15 frames/s) but on a thread
// of its own, beside the frames after it, which go on tracked. When the scan of frame k is done
// (at frame j > k) its detections are matched to the tracks as they were at k: a matched track
// is re-anchored (its box relation, patch and orientation from the detection); a face with no
// track starts one, carried into frame j frame by frame through copies of the frames k+1..j-1
// kept while the scan runs (at most kMaxScanGapBytes; past that, in one step from k); when the
// tracking loses it on the way, frame j + 1 is scanned in the frame's path. A scene cut, a lost track and the first frame are
// keyframes in the frame's path as before; one of those while a scan runs makes its result stale
// (dropped). One scan at a time: a periodic keyframe due while one runs waits for it.
// Memory: the held frames (at most min(interval, chunk) + 1, BGR and RGB) are the caller's to admit:
// HeldFrames(). A live scan's copy of its frame and of the frames after it (BGR and RGB, 6 B/px
// each: one, and at most kMaxScanGapBytes for the frames after it) are admitted here, on the host tier.
// Errors: the stages' (RESOURCE_EXHAUSTED naming the stage, CANCELLED, INTERNAL); a live scan's
// errors come from the Push that takes its result.
// Thread-safety: one thread (the video job's, the session's); a live scan's thread reads only
// what is fixed after Init and the copies it was given.
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <future>
#include <string>
#include <vector>

#include <opencv2/core.hpp>

#include "absl/status/status.h"
#include "geometry/face_track.h"
#include "pipeline/execution.h"
#include "pipeline/stages.h"
#include "video/video_reader.h"

namespace fusion {
namespace internal {
class VideoTrackerState;  // video_checkpoint.proto
}  // namespace internal

inline constexpr float kMatchIoU = 0.3f;
// Bytes of frame copies kept for carrying a live scan's new faces (6 B/px a frame): a scan takes
// 4-8 frames of a paced stream on 2 CPU cores (docs/PERFORMANCE.md#live-sessions), 12-15 of one
// sent back to back; 64 MiB keeps 48 frames of 640x360, 12 of 1280x720, 5 of 1920x1080.
inline constexpr uint64_t kMaxScanGapBytes = 64ull << 20;
// A tracked face whose predicted box overlaps the box the net saw in the frame before this much
// is looked at in that same box again: the same crop of a still face gives the same points, where
// a box re-made from the points each frame wanders by a pixel or two and the swap with it.
inline constexpr float kStableBoxIoU = 0.9f;

struct TrackedFace {
  uint64_t track = 0;   // the track's number, from 1 in order of start within the job's run
  DetectedFace face;    // the detector-like box and the landmark net's points, in this frame
  bool tracked = false; // carried by tracking (false: found by the detector in this frame)
  bool selected = true; // REFERENCE: the track's face is within the distance (decided at its start)
};

struct AnalysedFrame {
  video::Frame frame;     // BGR as decoded
  Picture picture;        // the target picture (rgb); its faces are set by the swap
  std::vector<TrackedFace> faces;
  bool keyframe = false;
  bool cut = false;       // a scene cut (or the first frame): no track continues into it
};

class VideoFaces {
 public:
  struct Settings {
    bool every_frame = false;
    int interval = 10;     // frames from one periodic keyframe to the next
    size_t chunk = 30;     // frames per chunk
    uint64_t total = 0;    // frames of the job
    // REFERENCE selection: a new track is described once and kept only within the distance.
    const Picture* reference = nullptr;
    float reference_limit = 0.6f;
    // A live session: every frame leaves Push with its faces (none held, so no trace-back: a
    // face entering between keyframes is swapped from the keyframe that finds it), no chunk
    // or job end, pictures named "live frame N". chunk and total are not read.
    bool live = false;
    // Live: periodic keyframes are scanned with this Execution on a thread of their own, beside
    // the frames after them (see above); its context's checkpoints should give way to live
    // frames. Null: in the frame's path.
    Execution* scan = nullptr;
  };
  VideoFaces(Execution& run, std::string detector, std::string landmarks, std::string encoder, DetectSettings detect,
             Settings settings)
      : run_(run), detector_(std::move(detector)), landmarks_(std::move(landmarks)), encoder_(std::move(encoder)),
        detect_(detect), s_(settings) {}
  ~VideoFaces() {
    if (scan_.valid()) scan_.wait();
  }
  VideoFaces(const VideoFaces&) = delete;
  VideoFaces& operator=(const VideoFaces&) = delete;
  // The detect stage's admission for w x h frames.
  absl::Status Init(int width, int height);
  // Frames held at most at once (the caller admits their BGR and RGB copies).
  // A chunk's last frame is a keyframe, so no more than a chunk is held whatever the interval.
  size_t HeldFrames() const {
    return s_.every_frame || s_.live ? 1 : std::min(static_cast<size_t>(s_.interval), s_.chunk) + 1;
  }

  // Takes the next frame (in order) and appends to *ready the frames whose faces are final.
  absl::Status Push(video::Frame frame, std::deque<AnalysedFrame>* ready);
  // The end of the frames: the held ones to *ready.
  void Finish(std::deque<AnalysedFrame>* ready);

  // The tracks, the track numbering and the last frame's thumbnail, into `out`. Only between a
  // chunk's last frame and the next Push (no frame held: a chunk's last frame is a keyframe).
  void SaveState(internal::VideoTrackerState* out) const;
  // Continues from a state SaveState wrote, before the first Push (a job resumed at the chunk
  // after it). False, and nothing restored, when it does not fit (another build's state): the
  // first frame is then a keyframe with no tracks, as a job's first frame.
  bool RestoreState(const internal::VideoTrackerState& state);

 private:
  struct Track {
    uint64_t id = 0;
    faceapi::Landmarks68 last{}, before{};  // points in the newest frame and in the one before it
    bool has_before = false;
    geometry::BoxRelation rel;
    faceapi::FaceBox box;                    // the box the landmark net (or the detector) last saw
    cv::Mat patch;                           // at its last detection
    float upside_down_logit = 0;
    bool upside_down = false;  // as told at its last detection
    bool levelled = false;     // its points in the newest frame were found on the face turned level
    bool selected = true;
  };
  // Detects `f`'s faces, matches them to the tracks, starts tracks for the others (traced back
  // through held_), and records the frame's faces.
  absl::Status Keyframe(AnalysedFrame& f);
  // Carries `tracks` into `f` (the next frame in the direction they move) and adds their faces
  // to f.faces. Forward (backward false): when a track is lost (its patch no longer matches, or
  // it lands on another track's face) nothing changes and *held is false. Backward (a fresh
  // track traced back, or at a keyframe the tracks no detection matched): lost tracks and those
  // that land on a face `f` has already end quietly. Tracks whose face left the frame
  // end quietly either way.
  absl::Status Step(AnalysedFrame& f, std::vector<Track>& tracks, bool backward, bool* held);
  // A track where a live scan's frame has it (matching its detections).
  struct TrackAt {
    uint64_t id = 0;
    faceapi::FaceBox box;
    bool levelled = false;
  };
  struct ScannedFace {
    DetectedFace face;   // box, points, orientation in the scanned frame
    uint64_t track = 0;  // the track it matched there, 0 for none
    cv::Mat patch;
  };
  struct Scan {
    int64_t index = 0;  // the scanned frame's
    absl::Status status;
    std::vector<ScannedFace> faces;
  };
  // Live scans: the frame's copy to a scan's thread; the scan (that thread); its result into
  // the tracks (re-anchored, *fresh for the new faces); the new faces into `f`.
  absl::Status StartScan(const AnalysedFrame& f);
  Scan RunScan(int64_t index, Picture pic, const cv::Mat& bgr, const std::vector<TrackAt>& at) const;
  absl::Status TakeScan(const AnalysedFrame& f, std::vector<Track>* fresh);
  absl::Status CarryFresh(AnalysedFrame& f, std::vector<Track> fresh);
  // A copy of `f` (tracked) for the scan running; none past kMaxScanGapBytes.
  absl::Status KeepForScan(const AnalysedFrame& f);
  absl::Status Detect(Execution& run, Picture& pic) const;
  absl::Status Landmarks(Picture& pic) { return Landmarks(run_, pic); }
  absl::Status Landmarks(Execution& run, Picture& pic) const;
  absl::Status DescribeNew(Picture& pic, const std::vector<size_t>& which);
  absl::Status TraceBack(std::vector<Track> fresh);
  void Emit(std::deque<AnalysedFrame>* ready);

  Execution& run_;
  const std::string detector_, landmarks_, encoder_;
  const DetectSettings detect_;
  const Settings s_;
  uint64_t detect_px_ = 0;
  std::string bucket_;
  std::vector<Track> tracks_;
  std::deque<AnalysedFrame> held_;  // since the last keyframe (which is held_.front())
  cv::Mat last_thumb_;
  bool started_ = false;  // a frame was pushed, or a state restored
  int since_key_ = 0;
  uint64_t next_id_ = 1;
  std::future<Scan> scan_;    // a live scan running (or done, not yet taken)
  bool scan_stale_ = false;   // a keyframe in the frames' path since the scan's frame
  bool scan_next_ = false;    // live: the next frame is a keyframe in its path
  struct GapFrame {
    AnalysedFrame frame;  // copies of the BGR and RGB, the tracked faces
    Lease copies;
  };
  std::deque<GapFrame> gap_;  // the frames after the running scan's, in order
  bool gap_full_ = false;     // more than kMaxScanGapBytes of them: the carry is one step
};

}  // namespace fusion
