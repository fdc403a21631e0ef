// FrameSwapper and PrepareSource (frame_swapper.h). No LibTorch in this TU.
#include "pipeline/frame_swapper.h"

#include <algorithm>

#include <opencv2/imgproc.hpp>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "geometry/frame_edge.h"
#include "pipeline/video_checkpoint.h"

namespace fusion {
namespace {

// The mean gray change between two frames inside `r` (both BGR).
double RegionChange(const cv::Mat& a, const cv::Mat& b, const cv::Rect& r) {
  cv::Mat ga, gb, d;
  cv::cvtColor(a(r), ga, cv::COLOR_BGR2GRAY);
  cv::cvtColor(b(r), gb, cv::COLOR_BGR2GRAY);
  cv::absdiff(ga, gb, d);
  return cv::mean(d)[0];
}

// The union of two boxes grown by 10% of its size on each side, within the frame.
cv::Rect FlickerRegion(const faceapi::FaceBox& a, const faceapi::FaceBox& b, cv::Size frame) {
  const float x0 = std::min(a.x, b.x), y0 = std::min(a.y, b.y);
  const float x1 = std::max(a.x + a.w, b.x + b.w), y1 = std::max(a.y + a.h, b.y + b.h);
  const float gx = 0.1f * (x1 - x0), gy = 0.1f * (y1 - y0);
  const cv::Rect r(cv::Point(static_cast<int>(x0 - gx), static_cast<int>(y0 - gy)),
                   cv::Point(static_cast<int>(x1 + gx), static_cast<int>(y1 + gy)));
  return r & cv::Rect(cv::Point(0, 0), frame);
}

}  // namespace

absl::Status PrepareSource(Execution& run, const PipelineRunner::Options& opt, const v1::JobOptions& o,
                           const DetectSettings& detect, const std::string& source_image, VideoSource* out) {
  ASSIGN_OR_RETURN(auto source, AdmittedDecode(run, source_image, "source image", opt.max_pixels, 3, &out->source_buffers));
  absl::StatusOr<DecodedImage> reference = DecodedImage{};
  if (o.faces() == v1::REFERENCE) {
    reference = AdmittedDecode(run, o.reference().inline_bytes(), "reference image", opt.max_pixels, 3,
                               &out->reference_buffers);
    if (!reference.ok()) return reference.status();
  }
  std::vector<Picture>& fixed = out->pictures;
  for (auto [img, what] : {std::pair{&source, "source image"}, std::pair{&*reference, "reference image"}}) {
    if (img->bgr.empty()) continue;
    ASSIGN_OR_RETURN(auto p, MakePicture(img->bgr, what));
    fixed.push_back(std::move(p));
  }
  int side = 0;
  for (const Picture& p : fixed) {
    ASSIGN_OR_RETURN(auto s, LargestDetectInput(opt.detector, p.rgb.cols, p.rgb.rows, detect));
    side = std::max(side, s);
  }
  absl::Status st = run.Stage("detect", opt.detector, DetectStagePixels(side, detect), DetectStageBucket(side, detect), 0.01f,
                              [&](const ModelCopy& m, int tile, const Checkpoint& cp) {
                                for (Picture& p : fixed) {
                                  RETURN_IF_ERROR(DetectFaces(m, tile, detect, p, cp.Within(p.what)));
                                }
                                return absl::OkStatus();
                              });
  if (!st.ok()) return st;
  for (Picture& p : fixed) {
    if (p.faces.empty() && !p.turned.empty()) {
      return absl::FailedPreconditionError(
          absl::StrCat("no upright face in the ", p.what, ": ", TurnedFaceNote(p.what, p.turned[0])));
    }
    if (p.faces.empty()) return absl::FailedPreconditionError(absl::StrCat("no face in the ", p.what));
    p.faces = {p.faces[LargestFace(p.faces)]};
  }
  st = run.Stage("landmarks", opt.landmarks, 112 * 112, "112x112", 0.02f, [&](const ModelCopy& c, int, const Checkpoint& cp) {
    for (Picture& p : fixed) {
      RETURN_IF_ERROR(FindLandmarks(c, p, cp.Within(p.what)));
    }
    return absl::OkStatus();
  });
  if (!st.ok()) return st;
  return run.Stage("encode", opt.encoder, 150 * 150, "150x150", 0.03f, [&](const ModelCopy& c, int, const Checkpoint& cp) {
    for (Picture& p : fixed) {
      RETURN_IF_ERROR(DescribeFaces(c, p, {}, cp.Within(p.what)));
    }
    return absl::OkStatus();
  });
}

std::string FrameSwapper::FrameName(int64_t index) const {
  return total_ > 0 ? absl::StrCat("frame ", index + 1, " of ", total_) : absl::StrCat("frame ", index + 1);
}

void FrameSwapper::SaveFilters(internal::VideoTrackerState* out) const {
  std::vector<uint64_t> tracks;  // in track order: the same bytes for the same state
  for (const auto& [track, filter] : filters_) tracks.push_back(track);
  std::sort(tracks.begin(), tracks.end());
  for (uint64_t t : tracks) SaveFilter(t, filters_.at(t), out->add_filters());
}

bool FrameSwapper::RestoreFilters(const internal::VideoTrackerState& state) {
  absl::flat_hash_map<uint64_t, geometry::OneEuroPoints> filters;
  for (const internal::FilterState& f : state.filters()) {
    if (!LoadFilter(f, &filters[f.track()])) return false;
  }
  filters_ = std::move(filters);
  return true;
}

absl::Status FrameSwapper::Swap(AnalysedFrame& a, FrameOutcome* out) {
  *out = FrameOutcome{.keyframe = a.keyframe};
  const std::string what = a.picture.what;
  run_.context().YieldPoint();  // between frames: no lease held
  if (run_.context().Cancelled()) {
    return absl::CancelledError(absl::StrCat("job cancelled at ", FrameName(a.frame.index)));
  }
  run_.set_frame(FrameName(a.frame.index));  // stage text, cancel messages
  std::vector<DetectedFace> faces = Steadied(a, out);
  if (o_.faces() == v1::LARGEST && !faces.empty()) faces = {faces[LargestFace(faces)]};
  if (faces.size() > max_faces_) faces.resize(max_faces_);
  const cv::Mat input = a.frame.bgr;
  cv::Mat output = input;
  if (!faces.empty()) {
    std::vector<Picture> pics = {fixed_[0], std::move(a.picture)};
    pics[1].faces = std::move(faces);
    report_.clear_faces();
    cv::Mat result;
    const bool score = score_every_ > 0 && a.frame.index % score_every_ == 0;
    absl::Status st = SwapFaces(stages_, o_, pics, run_, report_, &result,
                                FaceWork{.source_ready = true, .target_ready = true, .score = score,
                                         .poisson_side = models::kVideoPoissonSide,
                                         .max_outside_share = kMaxOutsideShareTracked});
    if (!pics[1].cut.empty() && !cut_noted_) {  // once per job: the first frame's face names it
      const CutFace& c = pics[1].cut.front();
      run_.Degrade(absl::StrCat(CutFaceNote(what, c.box, c.edges, c.outside_share),
                                " (nor any face cut as much in a later frame)"));
      cut_noted_ = true;
    }
    for (const v1::FaceReport& f : report_.faces()) out->identity_distances.push_back(f.identity_distance());
    report_.clear_faces();  // a video's result has no per-face reports
    if (!st.ok()) return st;
    if (report_.faces_swapped() > 0) {  // else none within the reference distance
      output = result;
      out->swapped = true;
      out->faces = report_.faces_swapped();
    }
  }
  Flicker(a, input, output, out);
  a.frame.bgr = output;
  return absl::OkStatus();
}

std::vector<DetectedFace> FrameSwapper::Steadied(const AnalysedFrame& a, FrameOutcome* out) {
  absl::flat_hash_map<uint64_t, geometry::OneEuroPoints> next;
  std::vector<DetectedFace> faces;
  for (const TrackedFace& t : a.faces) {
    auto it = filters_.find(t.track);
    if (it == filters_.end() || a.cut) ++out->tracks_started;
    geometry::OneEuroPoints filter = it != filters_.end() && !a.cut ? it->second : geometry::OneEuroPoints();
    DetectedFace d = t.face;
    d.landmarks = filter.Filter(t.face.landmarks, dt_);
    next.emplace(t.track, filter);
    out->tracked = out->tracked || t.tracked;
    if (t.selected) faces.push_back(std::move(d));
  }
  filters_ = std::move(next);
  return faces;
}

void FrameSwapper::Flicker(const AnalysedFrame& a, const cv::Mat& input, const cv::Mat& output, FrameOutcome* out) {
  absl::flat_hash_map<uint64_t, faceapi::FaceBox> boxes;
  for (const TrackedFace& t : a.faces) boxes.emplace(t.track, t.face.box);
  const bool chunk_start = static_cast<uint64_t>(a.frame.index) % chunk_ == 0;
  if (!a.cut && !chunk_start && !prev_in_.empty() && prev_in_.size() == input.size()) {
    for (const auto& [track, box] : boxes) {
      auto p = prev_boxes_.find(track);
      if (p == prev_boxes_.end()) continue;
      const cv::Rect r = FlickerRegion(p->second, box, input.size());
      if (r.empty()) continue;
      out->flicker_input += RegionChange(prev_in_, input, r);
      out->flicker_output += RegionChange(prev_out_, output, r);
    }
  }
  prev_in_ = input;
  prev_out_ = output;
  prev_boxes_ = std::move(boxes);
}

}  // namespace fusion
