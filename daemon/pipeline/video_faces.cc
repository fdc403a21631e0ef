// VideoFaces (video_faces.h). No LibTorch in this TU: the networks run in stages.cc.
#include "pipeline/video_faces.h"

#include <algorithm>
#include <chrono>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"
#include "base/status_macros.h"
#include "geometry/frame_edge.h"
#include "pipeline/video_checkpoint.h"

namespace fusion {
namespace {

// Two tracks whose boxes overlap this much hold one face: one of them is wrong.
constexpr float kSameFaceIoU = 0.5f;
// A tracked face whose points grow or shrink by more than this factor in one frame is lost (a
// keyframe re-anchors it): the net fitted its face to the box it was shown, not to the face. On
// bench/video's zoom720, where the zoom grows faces by ~1% a frame, a face rolled by ~28 degrees
// beside a raised arm came back 10-15% larger or smaller from frame to frame and once 0.61x; at 1.2
// its flicker ratio was 1.31, at 1.1 1.20 (two keyframes more in 75 frames).
constexpr float kMaxScaleStep = 1.1f;

faceapi::Landmarks68 Predicted(const faceapi::Landmarks68& before, const faceapi::Landmarks68& last, bool has_before) {
  return has_before ? geometry::Extrapolate(before, last) : last;
}

// Detections to tracks, best overlap first: track_of[d] is the track (index into `tracks`) of
// detection d, -1 for none; a pair needs IoU >= kMatchIoU.
std::vector<int> MatchToTracks(const std::vector<faceapi::FaceBox>& tracks, const std::vector<DetectedFace>& dets) {
  std::vector<std::tuple<float, size_t, size_t>> pairs;  // IoU, track, detection
  for (size_t t = 0; t < tracks.size(); ++t) {
    for (size_t d = 0; d < dets.size(); ++d) {
      const float iou = faceapi::IoU(tracks[t], dets[d].box);
      if (iou >= kMatchIoU) pairs.emplace_back(iou, t, d);
    }
  }
  std::sort(pairs.begin(), pairs.end(), [](const auto& a, const auto& b) { return std::get<0>(a) > std::get<0>(b); });
  std::vector<int> track_of(dets.size(), -1);
  std::vector<bool> matched(tracks.size(), false);
  for (const auto& [iou, t, d] : pairs) {
    if (matched[t] || track_of[d] >= 0) continue;
    matched[t] = true;
    track_of[d] = static_cast<int>(t);
  }
  return track_of;
}

}  // namespace

absl::Status VideoFaces::Init(int width, int height) {
  ASSIGN_OR_RETURN(auto side, LargestDetectInput(detector_, width, height, detect_));
  detect_px_ = DetectStagePixels(side, detect_);
  bucket_ = DetectStageBucket(side, detect_);
  return absl::OkStatus();
}

absl::Status VideoFaces::Landmarks(Execution& run, Picture& pic) const {
  if (pic.faces.empty()) return absl::OkStatus();
  return run.Stage("landmarks", landmarks_, 112 * 112, "112x112", 0.15f,
                    [&](const ModelCopy& c, int, const Checkpoint& cp) { return FindLandmarks(c, pic, cp); });
}

absl::Status VideoFaces::DescribeNew(Picture& pic, const std::vector<size_t>& which) {
  return run_.Stage("encode", encoder_, 150 * 150, "150x150", 0.25f,
                    [&](const ModelCopy& c, int, const Checkpoint& cp) { return DescribeFaces(c, pic, which, cp); });
}

absl::Status VideoFaces::Push(video::Frame frame, std::deque<AnalysedFrame>* ready) {
  AnalysedFrame f;
  const std::string what = s_.live ? absl::StrCat("live frame ", frame.index + 1)
                                   : absl::StrCat("target video frame ", frame.index + 1, " of ", s_.total);
  ASSIGN_OR_RETURN(f.picture, MakePicture(frame.bgr, what));
  f.frame = std::move(frame);
  const uint64_t i = static_cast<uint64_t>(f.frame.index);
  const cv::Mat thumb = geometry::Thumbnail(f.frame.bgr);
  const bool chunk_end = !s_.live && (i % s_.chunk == s_.chunk - 1 || i + 1 >= s_.total);
  f.cut = !started_ || geometry::IsSceneCut(last_thumb_, thumb);
  started_ = true;
  last_thumb_ = thumb;
  if (f.cut) {  // the scene before ends: its held frames go as they are, its tracks end
    Emit(ready);
    tracks_.clear();
    scan_stale_ = scan_.valid();
  }
  std::vector<Track> fresh;  // live: faces a finished scan found, for this frame
  if (scan_.valid() && scan_.wait_for(std::chrono::seconds(0)) == std::future_status::ready) {
    RETURN_IF_ERROR(TakeScan(f, &fresh));
    if (fresh.empty()) gap_.clear();  // else CarryFresh goes through it
  }
  const bool periodic = since_key_ + 1 >= s_.interval;
  const bool beside = s_.scan != nullptr && !s_.every_frame;  // periodic keyframes scanned beside
  bool keyframe = s_.every_frame || f.cut || chunk_end || scan_next_ || (periodic && !beside);
  if (!keyframe) {
    bool held = true;
    RETURN_IF_ERROR(Step(f, tracks_, /*backward=*/false, &held));
    keyframe = !held;  // a track lost: the detector looks at this frame
  }
  if (!keyframe) {
    if (!fresh.empty()) RETURN_IF_ERROR(CarryFresh(f, std::move(fresh)));
    if (periodic && beside && !scan_.valid()) {
      RETURN_IF_ERROR(StartScan(f));
      f.keyframe = true;
      since_key_ = 0;
    } else {
      ++since_key_;
      if (scan_.valid()) RETURN_IF_ERROR(KeepForScan(f));
    }
    held_.push_back(std::move(f));
    if (s_.live) Emit(ready);
    return absl::OkStatus();
  }
  RETURN_IF_ERROR(Keyframe(f));
  scan_stale_ = scan_.valid();  // this frame's detection is newer than the scan's
  gap_.clear();
  scan_next_ = false;
  since_key_ = 0;
  Emit(ready);
  held_.push_back(std::move(f));
  if (chunk_end || s_.live) Emit(ready);
  return absl::OkStatus();
}

void VideoFaces::Finish(std::deque<AnalysedFrame>* ready) { Emit(ready); }

absl::Status VideoFaces::StartScan(const AnalysedFrame& f) {
  const cv::Size size = f.frame.bgr.size();
  ASSIGN_OR_RETURN(Lease copies, run_.HostBuffers(absl::StrCat(f.picture.what, ": the copy its keyframe scan reads"),
                                                  static_cast<uint64_t>(size.area()) * 6));
  Picture pic;
  pic.what = f.picture.what;
  pic.rgb = f.picture.rgb.clone();
  std::vector<TrackAt> at;
  for (const TrackedFace& t : f.faces) at.push_back({t.track, t.face.box, t.face.levelled});
  gap_.clear();
  gap_full_ = false;
  scan_ = std::async(std::launch::async, [this, index = f.frame.index, pic = std::move(pic), bgr = f.frame.bgr.clone(),
                                          at = std::move(at), copies = std::move(copies)]() mutable {
    return RunScan(index, std::move(pic), bgr, at);
  });
  return absl::OkStatus();
}

VideoFaces::Scan VideoFaces::RunScan(int64_t index, Picture pic, const cv::Mat& bgr, const std::vector<TrackAt>& at) const {
  Scan scan;
  scan.index = index;
  scan.status = Detect(*s_.scan, pic);
  if (!scan.status.ok()) return scan;
  std::vector<faceapi::FaceBox> boxes;
  for (const TrackAt& t : at) boxes.push_back(t.box);
  const std::vector<int> track_of = MatchToTracks(boxes, pic.faces);
  for (size_t d = 0; d < pic.faces.size(); ++d) {
    if (track_of[d] >= 0) pic.faces[d].levelled = at[track_of[d]].levelled;
  }
  scan.status = Landmarks(*s_.scan, pic);
  if (!scan.status.ok()) return scan;
  for (size_t d = 0; d < pic.faces.size(); ++d) {
    const DetectedFace& det = pic.faces[d];
    scan.faces.push_back(ScannedFace{.face = det,
                                     .track = track_of[d] >= 0 ? at[track_of[d]].id : 0,
                                     .patch = geometry::FacePatch(bgr, det.landmarks)});
  }
  return scan;
}

absl::Status VideoFaces::KeepForScan(const AnalysedFrame& f) {
  if (gap_full_) return absl::OkStatus();
  const uint64_t bytes = static_cast<uint64_t>(f.frame.bgr.total()) * 6;
  if ((gap_.size() + 1) * bytes > kMaxScanGapBytes) {
    gap_.clear();
    gap_full_ = true;
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(Lease copies, run_.HostBuffers(absl::StrCat(f.picture.what, ": its copy for a keyframe scan's new faces"),
                                                  bytes));
  AnalysedFrame c;
  c.frame.bgr = f.frame.bgr.clone();
  c.frame.index = f.frame.index;
  c.picture.what = f.picture.what;
  c.picture.rgb = f.picture.rgb.clone();
  c.faces = f.faces;
  gap_.push_back(GapFrame{std::move(c), std::move(copies)});
  return absl::OkStatus();
}

absl::Status VideoFaces::TakeScan(const AnalysedFrame& f, std::vector<Track>* fresh) {
  Scan scan = scan_.get();
  if (std::exchange(scan_stale_, false)) return absl::OkStatus();
  RETURN_IF_ERROR(scan.status);
  spdlog::debug("{}: the keyframe scan of frame {} taken, {} frames later: {} faces", f.picture.what, scan.index + 1,
                f.frame.index - scan.index, scan.faces.size());
  for (ScannedFace& sf : scan.faces) {
    const DetectedFace& det = sf.face;
    if (sf.track != 0) {  // re-anchored where the detector saw it; ended since: nothing to do
      for (Track& t : tracks_) {
        if (t.id != sf.track) continue;
        t.rel = geometry::RelationOf(det.box, det.landmarks);
        t.patch = sf.patch;
        t.upside_down_logit = det.upside_down_logit;
        t.upside_down = det.upside_down;
      }
      continue;
    }
    Track t;
    t.id = next_id_++;
    t.last = det.landmarks;
    t.rel = geometry::RelationOf(det.box, det.landmarks);
    t.box = det.box;
    t.patch = sf.patch;
    t.upside_down_logit = det.upside_down_logit;
    t.upside_down = det.upside_down;
    t.levelled = det.levelled;
    fresh->push_back(std::move(t));
  }
  return absl::OkStatus();
}

absl::Status VideoFaces::CarryFresh(AnalysedFrame& f, std::vector<Track> fresh) {
  const size_t found = fresh.size();
  // Frame by frame through the copies since the scan's frame, then into `f`; the lost end quietly.
  bool held = true;
  for (GapFrame& g : gap_) {
    if (fresh.empty()) break;
    RETURN_IF_ERROR(Step(g.frame, fresh, /*backward=*/true, &held));
  }
  const bool one_step = gap_full_ || gap_.empty();
  gap_.clear();
  RETURN_IF_ERROR(Step(f, fresh, /*backward=*/true, &held));
  if (fresh.size() < found) {
    spdlog::debug("{}: {} of {} faces a keyframe scan found not carried here: the next frame is a keyframe",
                  f.picture.what, found - fresh.size(), found);
    scan_next_ = true;
  }
  if (one_step) {
    for (Track& t : fresh) t.has_before = false;  // its step spanned the frames of the scan
  }
  tracks_.insert(tracks_.end(), fresh.begin(), fresh.end());
  return absl::OkStatus();
}

void VideoFaces::Emit(std::deque<AnalysedFrame>* ready) {
  for (AnalysedFrame& f : held_) ready->push_back(std::move(f));
  held_.clear();
}

absl::Status VideoFaces::Step(AnalysedFrame& f, std::vector<Track>& tracks, bool backward, bool* held) {
  *held = true;
  if (tracks.empty()) return absl::OkStatus();
  Picture probe;  // the frame's RGB with the tracks' predicted boxes
  probe.what = f.picture.what;
  probe.rgb = f.picture.rgb;
  for (const Track& t : tracks) {
    DetectedFace d;
    d.box = geometry::BoxFrom(t.rel, Predicted(t.before, t.last, t.has_before));
    if (faceapi::IoU(d.box, t.box) >= kStableBoxIoU) d.box = t.box;
    d.upside_down_logit = t.upside_down_logit;
    d.upside_down = t.upside_down;
    d.orientation_known = true;
    d.levelled = t.levelled;
    probe.faces.push_back(d);
  }
  std::vector<faceapi::FaceBox> seen;
  for (const DetectedFace& d : probe.faces) seen.push_back(d.box);
  RETURN_IF_ERROR(Landmarks(probe));
  const cv::Size size = f.picture.rgb.size();
  std::vector<bool> keep(tracks.size(), true);
  for (size_t k = 0; k < tracks.size(); ++k) {
    DetectedFace& d = probe.faces[k];
    d.box = geometry::BoxFrom(tracks[k].rel, d.landmarks);
    if (FaceOutsideShare(d.box, d.landmarks, size) > kMaxOutsideShareTracked) {
      keep[k] = false;  // the face left the frame
      continue;
    }
    const float similarity = geometry::PatchSimilarity(geometry::FacePatch(f.frame.bgr, d.landmarks), tracks[k].patch);
    const float scale = geometry::PointsSpread(d.landmarks) / geometry::PointsSpread(tracks[k].last);
    bool lost = similarity < geometry::kMinPatchSimilarity || scale > kMaxScaleStep || scale * kMaxScaleStep < 1;
    for (size_t j = 0; j < k && !lost; ++j) lost = keep[j] && faceapi::IoU(d.box, probe.faces[j].box) >= kSameFaceIoU;
    for (const TrackedFace& other : f.faces) lost = lost || faceapi::IoU(d.box, other.face.box) >= kSameFaceIoU;
    if (lost && !backward) {
      spdlog::debug("{}: track {} lost (patch similarity {:.2f}, size x{:.2f}): a keyframe", f.picture.what, tracks[k].id,
                    similarity, scale);
      *held = false;
      return absl::OkStatus();
    }
    keep[k] = !lost;
  }
  std::vector<Track> kept;
  for (size_t k = 0; k < tracks.size(); ++k) {
    if (!keep[k]) continue;
    Track t = tracks[k];
    t.box = seen[k];
    t.before = t.last;
    t.has_before = true;
    t.last = probe.faces[k].landmarks;
    t.levelled = probe.faces[k].levelled;
    f.faces.push_back(TrackedFace{.track = t.id, .face = probe.faces[k], .tracked = true, .selected = t.selected});
    kept.push_back(std::move(t));
  }
  tracks = std::move(kept);
  return absl::OkStatus();
}

absl::Status VideoFaces::Detect(Execution& run, Picture& pic) const {
  return run.Stage("detect", detector_, detect_px_, bucket_, 0.05f, [&](const ModelCopy& m, int tile, const Checkpoint& cp) {
    return DetectFaces(m, tile, detect_, pic, cp);  // cp names the frame
  });
}

absl::Status VideoFaces::Keyframe(AnalysedFrame& f) {
  f.keyframe = true;
  Picture& pic = f.picture;
  RETURN_IF_ERROR(Detect(run_, pic));
  // Detections to tracks by the tracks' predicted boxes (and the detector's boxes: before the
  // landmarks, so a track looked at level is looked at so again).
  std::vector<faceapi::FaceBox> predicted;
  for (const Track& tr : tracks_) predicted.push_back(geometry::BoxFrom(tr.rel, Predicted(tr.before, tr.last, tr.has_before)));
  const std::vector<int> track_of = MatchToTracks(predicted, pic.faces);
  std::vector<bool> matched(tracks_.size(), false);
  for (size_t d = 0; d < pic.faces.size(); ++d) {
    if (track_of[d] < 0) continue;
    matched[track_of[d]] = true;
    pic.faces[d].levelled = tracks_[track_of[d]].levelled;
  }
  RETURN_IF_ERROR(Landmarks(pic));
  // New tracks: described first when selecting by reference.
  std::vector<size_t> unmatched;
  for (size_t d = 0; d < pic.faces.size(); ++d) {
    if (track_of[d] < 0) unmatched.push_back(d);
  }
  if (s_.reference != nullptr && !unmatched.empty()) {
    RETURN_IF_ERROR(DescribeNew(pic, unmatched));
  }
  std::vector<Track> next, fresh;
  for (size_t d = 0; d < pic.faces.size(); ++d) {
    const DetectedFace& det = pic.faces[d];
    Track t;
    if (track_of[d] >= 0) {
      t = tracks_[track_of[d]];
      t.before = t.last;
      t.has_before = true;
    } else {
      t.id = next_id_++;
      t.selected = s_.reference == nullptr ||
                   DescriptorDistance(det.descriptor, s_.reference->faces[0].descriptor) < s_.reference_limit;
    }
    t.last = det.landmarks;
    t.rel = geometry::RelationOf(det.box, det.landmarks);
    t.box = det.box;
    t.patch = geometry::FacePatch(f.frame.bgr, det.landmarks);
    t.upside_down_logit = det.upside_down_logit;
    t.upside_down = det.upside_down;
    t.levelled = det.levelled;
    f.faces.push_back(TrackedFace{.track = t.id, .face = det, .tracked = false, .selected = t.selected});
    (track_of[d] >= 0 ? next : fresh).push_back(t);
  }
  // Tracks no detection matched: carried into this frame as between keyframes, kept where they
  // hold (the detector misses a face it found before: a rolled face in bench/video's pan1080),
  // ended where not.
  std::vector<Track> missed;
  for (size_t t = 0; t < tracks_.size(); ++t) {
    if (!matched[t]) missed.push_back(tracks_[t]);
  }
  bool held = true;
  RETURN_IF_ERROR(Step(f, missed, /*backward=*/true, &held));
  tracks_ = next;
  tracks_.insert(tracks_.end(), missed.begin(), missed.end());
  tracks_.insert(tracks_.end(), fresh.begin(), fresh.end());
  if (s_.every_frame || fresh.empty()) return absl::OkStatus();
  return TraceBack(std::move(fresh));
}

absl::Status VideoFaces::TraceBack(std::vector<Track> fresh) {
  for (Track& t : fresh) t.has_before = false;  // its motion backwards is not known yet
  for (auto it = held_.rbegin(); it != held_.rend() && !fresh.empty(); ++it) {
    bool held = true;
    RETURN_IF_ERROR(Step(*it, fresh, /*backward=*/true, &held));
  }
  return absl::OkStatus();
}

void VideoFaces::SaveState(internal::VideoTrackerState* out) const {
  out->clear_tracks();
  for (const Track& t : tracks_) {
    internal::TrackState* ts = out->add_tracks();
    ts->set_id(t.id);
    SavePoints(t.last, ts->mutable_last());
    SavePoints(t.before, ts->mutable_before());
    ts->set_has_before(t.has_before);
    for (float v : {t.rel.dx, t.rel.dy, t.rel.w, t.rel.h}) ts->add_relation(v);
    for (float v : {t.box.x, t.box.y, t.box.w, t.box.h, t.box.score}) ts->add_box(v);
    const cv::Mat patch = t.patch.isContinuous() ? t.patch : t.patch.clone();
    ts->mutable_patch()->Add(patch.ptr<float>(), patch.ptr<float>() + patch.total());
    ts->set_upside_down_logit(t.upside_down_logit);
    ts->set_upside_down(t.upside_down);
    ts->set_levelled(t.levelled);
    ts->set_selected(t.selected);
  }
  out->set_next_track(next_id_);
  const cv::Mat thumb = last_thumb_.isContinuous() ? last_thumb_ : last_thumb_.clone();
  out->set_thumbnail(thumb.data, thumb.total());
  out->set_thumbnail_rows(thumb.rows);
  out->set_thumbnail_cols(thumb.cols);
}

bool VideoFaces::RestoreState(const internal::VideoTrackerState& state) {
  constexpr int kPatchValues = geometry::kPatchSide * geometry::kPatchSide;
  std::vector<Track> tracks;
  for (const internal::TrackState& ts : state.tracks()) {
    Track t;
    if (!LoadPoints(ts.last(), &t.last) || !LoadPoints(ts.before(), &t.before) || ts.relation_size() != 4 ||
        ts.box_size() != 5 || ts.patch_size() != kPatchValues) {
      return false;
    }
    t.id = ts.id();
    t.has_before = ts.has_before();
    t.rel = {ts.relation(0), ts.relation(1), ts.relation(2), ts.relation(3)};
    t.box = {ts.box(0), ts.box(1), ts.box(2), ts.box(3), ts.box(4)};
    t.patch = cv::Mat(geometry::kPatchSide, geometry::kPatchSide, CV_32F);
    std::copy(ts.patch().begin(), ts.patch().end(), t.patch.ptr<float>());
    t.upside_down_logit = ts.upside_down_logit();
    t.upside_down = ts.upside_down();
    t.levelled = ts.levelled();
    t.selected = ts.selected();
    tracks.push_back(std::move(t));
  }
  const int rows = state.thumbnail_rows(), cols = state.thumbnail_cols();
  if (rows <= 0 || cols <= 0 || state.thumbnail().size() != static_cast<size_t>(rows) * static_cast<size_t>(cols)) {
    return false;
  }
  last_thumb_ = cv::Mat(rows, cols, CV_8U);
  std::copy(state.thumbnail().begin(), state.thumbnail().end(), last_thumb_.data);
  tracks_ = std::move(tracks);
  next_id_ = state.next_track();
  since_key_ = 0;
  started_ = true;
  return true;
}

}  // namespace fusion
