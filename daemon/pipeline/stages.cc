// Stage computations with LibTorch (stages.h).
#include "pipeline/stages.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>

#include <opencv2/imgproc.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "models/blend/blend.h"
#include "models/faceapi/face_landmark_68.h"
#include "models/faceapi/face_orientation.h"
#include "models/faceapi/face_recognition.h"
#include "models/faceapi/multiscale.h"
#include "models/faceapi/ssd_mobilenet_v1.h"
#include "models/faceapi/tiny_face_detector.h"
#include "models/faceapi/level_roll.h"
#include "models/faceapi/upside_down.h"
#include "models/generator/face_crop.h"
#include "models/generator/generator.h"
#include "models/generator/torchscript_enhancer.h"
#include "models/keras/keras_model.h"
#include "geometry/frame_edge.h"
#include "pipeline/parallel.h"
#include "loader/precision.h"
#include "spdlog/spdlog.h"
#include "base/status_macros.h"

namespace fusion {
namespace {

const faceapi::FaceDetector* DetectorOf(const ModelCopy& copy) {
  if (copy.tiny_detector) return copy.tiny_detector.get();
  if (copy.ssd_detector) return copy.ssd_detector.get();
  return nullptr;
}

at::Tensor OnDevice(const at::Tensor& t, const std::string& device) {
  return device == "cpu" ? t : t.to(at::Device(device));
}

at::Tensor MatToTensor(const cv::Mat& rgb01) {  // CV_32FC3 -> [1,3,H,W]
  return at::from_blob(const_cast<float*>(rgb01.ptr<float>()), {1, rgb01.rows, rgb01.cols, 3}, at::kFloat)
      .permute({0, 3, 1, 2})
      .contiguous();
}

// A CV_8U / CV_8UC3 image (a ROI: rows may be strided) as a uint8 [1,C,H,W] tensor on `dev`.
at::Tensor BytesToDevice(const cv::Mat& m, const at::Device& dev) {
  const int64_t c = m.channels();
  return at::from_blob(const_cast<uchar*>(m.ptr<uchar>()), {m.rows, m.cols, c},
                       {static_cast<int64_t>(m.step[0]), c, 1}, at::kByte)
      .to(dev)
      .permute({2, 0, 1})
      .unsqueeze(0);
}

// The sampling grid [1,h,w,2] of grid_sampler (align_corners false: pixel centres at integer
// coordinates) for the frame pixels of `roi`, crop = m * frame, with cv::warpAffine's fixed
// point: per axis round(1024 * m0 * x) + round(1024 * (m1 * y + m2)) + 16, shifted right by 5,
// is the coordinate in 1/32 pixel. The integers stay below 2^24, so fp32 holds them exactly.
at::Tensor CropGrid(const cv::Matx23d& m, const cv::Rect& roi, cv::Size crop, const at::Device& dev) {
  const at::TensorOptions d = at::TensorOptions().dtype(at::kDouble).device(dev);
  const at::Tensor x = at::arange(roi.width, d).view({1, roi.width});
  const at::Tensor y = at::arange(roi.height, d).view({roi.height, 1});
  at::Tensor axes[2];
  const int sizes[2] = {crop.width, crop.height};
  for (int i = 0; i < 2; ++i) {
    const double c = m(i, 0) * roi.x + m(i, 1) * roi.y + m(i, 2);  // the ROI offset folded in
    const at::Tensor a = (x * (1024 * m(i, 0))).round().to(at::kFloat);
    const at::Tensor b = ((y * m(i, 1) + c) * 1024).round().to(at::kFloat) + 16.0f;
    const at::Tensor px = at::floor((a + b) * (1.0f / 32)) * (1.0f / 32);  // crop pixels
    axes[i] = (px * 2.0f + 1.0f) / static_cast<float>(sizes[i]) - 1.0f;
  }
  return at::stack({axes[0], axes[1]}, -1).unsqueeze(0);
}

// Feathered weight [1,1,h,w] of the hull over hull.roi; hull.ext holds r px of context.
at::Tensor FeatherWeightOnDevice(const models::HullRegion& hull, int r, const at::Device& dev) {
  // cv::erode of a ROI reads its parent's pixels (zeros around the hull) and treats pixels beyond
  // the frame as the maximum: max_pool's implicit -inf padding of -mask is that maximum.
  const cv::Rect& roi = hull.roi;
  const cv::Rect& ext = hull.ext;
  const at::Tensor mask = BytesToDevice(hull.mask, dev).to(at::kFloat) / 255.0;
  const int64_t k = 2 * r + 1, y0 = roi.y - ext.y, x0 = roi.x - ext.x;
  auto in_roi = [&](const at::Tensor& t) {
    return t.slice(2, y0, y0 + roi.height).slice(3, x0, x0 + roi.width);
  };
  // A square's erosion is separable: rows then columns (3x faster than one k x k pool on a CPU).
  const at::Tensor inner = in_roi(-at::max_pool2d(at::max_pool2d(-mask, {1, k}, {1, 1}, {0, r}), {k, 1}, {1, 1}, {r, 0}));
  const cv::Mat g = cv::getGaussianKernel(static_cast<int>(k), r / 2.0, CV_32F);
  const at::Tensor taps = at::from_blob(const_cast<float*>(g.ptr<float>()), {k}, at::kFloat).to(dev);
  at::Tensor w = at::replication_pad2d(inner, {r, r, r, r});
  w = at::conv2d(w, taps.view({1, 1, 1, k}));  // rows, then columns (cv::sepFilter2D's order)
  w = at::conv2d(w, taps.view({1, 1, k, 1}));
  return w * in_roi(mask);
}

// One face into `frame` (BlendSimpleOnDevice).
void BlendOneOnDevice(const models::BlendInput& in, const models::BlendOptions& options,
                      const at::Device& dev, cv::Mat& frame) {
  const int r = models::FeatherRadiusPx(in.landmarks, options);
  const models::HullRegion hull = models::FaceHullRegion(in.landmarks, frame.size(), r);
  const cv::Rect roi = hull.roi;
  if (roi.empty()) return;  // hull entirely outside the frame
  const at::Tensor weight = FeatherWeightOnDevice(hull, r, dev);
  const at::Tensor crop = (MatToTensor(in.fused_crop).to(dev) - MatToTensor(in.target_crop).to(dev)).flip({1}) * 255.0;
  const at::Tensor change = at::grid_sampler(crop, CropGrid(in.frame_to_crop, roi, in.fused_crop.size(), dev),
                                            /*interpolation_mode=bilinear*/ 0, /*padding_mode=zeros*/ 0,
                                            /*align_corners=*/false);
  cv::Mat target8 = frame(roi);
  const at::Tensor target = BytesToDevice(target8, dev).to(at::kFloat);
  const at::Tensor out = at::where(weight > 0, (target + weight * change).round().clamp(0, 255), target)
                             .to(at::kByte)
                             .squeeze(0)
                             .permute({1, 2, 0})
                             .contiguous()
                             .cpu();
  const uint8_t* src = out.data_ptr<uint8_t>();
  for (int y = 0; y < roi.height; ++y) std::copy_n(src + y * roi.width * 3, roi.width * 3, target8.ptr<uchar>(y));
}

absl::StatusOr<at::Tensor> Forward(const keras::KerasModel& m, const at::Tensor& x) { return m.Forward(x); }

}  // namespace

static faceapi::MultiScaleOptions ScanOptions(const DetectSettings& settings) {
  faceapi::MultiScaleOptions options;
  options.min_face_px = settings.min_face_px;
  options.min_score = settings.min_score;
  options.max_input = settings.max_input;
  return options;
}

absl::Status DetectFaces(const ModelCopy& detector, int tile_px, const DetectSettings& settings, Picture& pic,
                         const Checkpoint& cp, const std::function<void(size_t, size_t)>& on_pass) {
  const faceapi::FaceDetector* det = DetectorOf(detector);
  if (det == nullptr) return absl::InvalidArgumentError("detect: the model is not a face detector");
  faceapi::MultiScaleOptions options = ScanOptions(settings);
  options.tile_px = tile_px;  // the same passes; each runs its stem in windows
  options.before_pass = [&cp, &on_pass](size_t i, size_t n) {
    RETURN_IF_ERROR(cp.Check("pass", i, n));
    if (on_pass) on_pass(i, n);
    return absl::OkStatus();
  };
  // Untiled, settings.threads passes at once (the stage is admitted for that many). Tiled (the
  // ladder's answer to memory pressure) one at a time: the ladder's tile estimate is the whole
  // admission scaled by area, i.e. one pass's tile.
  if (tile_px == 0 && settings.threads > 1) {
    options.for_each_pass = [threads = settings.threads](size_t n, const std::function<absl::Status(size_t)>& body) {
      return ParallelFor(n, threads, body);
    };
  }
  auto boxes = faceapi::DetectMultiScale(*det, pic.rgb, options);
  if (!boxes.ok()) return boxes.status();
  if (boxes->empty()) {
    // No face at all: the scan once more with the picture turned by 180 degrees (SSD misses
    // many upside-down faces, Grace Hopper among them), in place (a flip both ways is exact, and
    // needs no second image), the boxes turned back.
    options.before_pass = [&cp](size_t i, size_t n) { return cp.Check("upside-down pass", i, n); };
    cv::flip(pic.rgb, pic.rgb, -1);
    boxes = faceapi::DetectMultiScale(*det, pic.rgb, options);
    cv::flip(pic.rgb, pic.rgb, -1);
    if (!boxes.ok()) return boxes.status();
    const float w = static_cast<float>(pic.rgb.cols), h = static_cast<float>(pic.rgb.rows);
    for (faceapi::FaceBox& b : *boxes) b = {w - b.x - b.w, h - b.y - b.h, b.w, b.h, b.score};
  }
  // Orientation: 4 boxes per pass, each pass a checkpoint.
  ASSIGN_OR_RETURN(auto orientations, faceapi::EstimateOrientations(
      *det, pic.rgb, *boxes, tile_px, [&cp](size_t i, size_t n) { return cp.Check("orientation pass", i, n); }));
  const std::vector<faceapi::FaceOrientation>& turns = orientations;
  std::vector<DetectedFace> faces;
  std::vector<TurnedFace> turned;
  for (size_t i = 0; i < boxes->size(); ++i) {
    const faceapi::FaceOrientation& o = turns[i];
    if (o.upright_turns != 0) {
      turned.push_back({(*boxes)[i], o.upright_turns, o.scores[o.upright_turns], o.scores[0],
                        CutEdges((*boxes)[i], pic.rgb.size())});
      continue;
    }
    DetectedFace f;
    f.box = (*boxes)[i];
    f.upside_down_logit = faceapi::DetectorUpsideDownLogit(o);
    faces.push_back(f);
  }
  pic.faces = std::move(faces);
  pic.turned = std::move(turned);
  return absl::OkStatus();
}

std::string TurnedFaceNote(const std::string& what, const TurnedFace& f) {
  const std::string at = absl::StrCat(what, ": the face at (", std::lround(f.box.x), ",", std::lround(f.box.y), " ",
                                      std::lround(f.box.w), "x", std::lround(f.box.h), ") is ");
  const std::string scores = absl::StrCat("(the detector scores it ", absl::StrFormat("%.2f", f.upright_score), " righted, ",
                                          absl::StrFormat("%.2f", f.as_is_score), " as it is): not swapped");
  if (f.cut_edges != 0) {
    return absl::StrCat(at, "cut by ", EdgeNames(f.cut_edges), " of the frame, or turned sideways ", scores);
  }
  return absl::StrCat(at, "turned sideways ", scores, "; store the image upright");
}

absl::StatusOr<int> LargestDetectInput(const std::string& detector, int w, int h, const DetectSettings& settings) {
  ASSIGN_OR_RETURN(faceapi::DetectorTraits traits, faceapi::DetectorTraitsOf(detector));
  // The orientation passes (DetectFaces) are kOrientationInputPx square.
  const int scan = faceapi::LargestPassInput(traits, w, h, ScanOptions(settings));
  return scan == 0 ? 0 : std::max(scan, faceapi::kOrientationInputPx);
}

std::string DetectStageBucket(int side, const DetectSettings& settings) {
  return settings.threads > 1 ? absl::StrCat(side, "x", side, " x", settings.threads) : absl::StrCat(side, "x", side);
}

namespace {

// How the landmark net looks at one face: what is known of it (in) and how it was seen (out).
struct Look {
  float detector_logit = 0;    // in: the detector's upside-down logit
  int known_upside_down = -1;  // in: 1 or 0 for a tracked face (told at its detection), -1 unknown
  bool keep_level = false;     // in: its track was looked at level (DetectedFace::levelled)
  bool upside_down = false;    // out: found upside down, its points those of the face righted
  bool levelled = false;       // out: its points found on the face turned level
};

// The face's points once its roll is known: found again on the face turned level when rolled
// by kLevelMinDeg (kLevelKeepDeg for a track looked at level) to 90 degrees (level_roll.h).
absl::StatusOr<faceapi::Landmarks68> Levelled(const faceapi::FaceLandmark68Net& net, const cv::Mat& image,
                                              const faceapi::FaceBox& box, const faceapi::Landmarks68& as_is,
                                              Look* look) {
  const float min_deg = look->keep_level ? faceapi::kLevelKeepDeg : faceapi::kLevelMinDeg;
  return faceapi::LevelledLandmarks(net, image, box, as_is, 2, min_deg, &look->levelled);
}

// The landmarks of `box` in `image` (FaceLandmark68Net::Detect), or those of the face righted
// when the upside-down check finds it turned by 180 degrees (look->upside_down set).
absl::StatusOr<faceapi::Landmarks68> UprightLandmarks(const faceapi::FaceLandmark68Net& net, const cv::Mat& image,
                                                      const faceapi::FaceBox& box, Look* look) {
  look->levelled = false;
  if (look->known_upside_down >= 0) {  // a tracked face: its turn was told at its detection
    look->upside_down = look->known_upside_down == 1;
    if (look->upside_down) return faceapi::DetectTurned180(net, image, box);
    ASSIGN_OR_RETURN(auto as_is, net.Detect(image, box));
    return Levelled(net, image, box, as_is, look);
  }
  ASSIGN_OR_RETURN(auto as_is, net.Detect(image, box));
  ASSIGN_OR_RETURN(auto turned, faceapi::DetectTurned180(net, image, box));
  const faceapi::UpsideDownCue cue{faceapi::EyeContrast(image, as_is, box), faceapi::EyeContrast(image, turned, box),
                                   look->detector_logit};
  look->upside_down = cue.upside_down();
  spdlog::debug("landmarks: face at ({:.0f},{:.0f} {:.0f}x{:.0f}): upside-down cue {:.2f} (eyes {:.2f} as is, {:.2f} "
                "turned; detector {:.2f}){}",
                box.x, box.y, box.w, box.h, cue.value(), cue.eyes_as_is, cue.eyes_turned, cue.detector_logit,
                look->upside_down ? ": upside down, righted" : "");
  if (look->upside_down) return turned;
  // A face rolled by 25-90 degrees: its points found again on the face turned level (level_roll.h).
  return Levelled(net, image, box, as_is, look);
}

// The net's 68 points for the face in `whole` (frame pixels, may reach beyond the frame): the
// box on a canvas of its own size, zero outside the frame (UprightLandmarks on that canvas).
absl::StatusOr<faceapi::Landmarks68> PointsOnCanvas(const faceapi::FaceLandmark68Net& net, const Picture& pic,
                                                    const faceapi::FaceBox& whole, Look* look) {
  const cv::Size size = pic.rgb.size();
  const int x0 = static_cast<int>(std::floor(whole.x)), y0 = static_cast<int>(std::floor(whole.y));
  const cv::Rect ext(x0, y0, static_cast<int>(std::ceil(whole.x + whole.w)) - x0,
                     static_cast<int>(std::ceil(whole.y + whole.h)) - y0);
  const cv::Rect in = ext & cv::Rect(0, 0, size.width, size.height);
  if (in.empty()) return absl::InvalidArgumentError(absl::StrCat("landmarks: a face box of the ", pic.what, " lies outside it"));
  cv::Mat canvas(ext.size(), CV_8UC3, cv::Scalar::all(0));
  pic.rgb(in).copyTo(canvas(in - ext.tl()));
  const faceapi::FaceBox local{whole.x - x0, whole.y - y0, whole.w, whole.h, whole.score};
  ASSIGN_OR_RETURN(auto pts, UprightLandmarks(net, canvas, local, look));
  for (faceapi::Point& p : pts) {
    p.x += x0;
    p.y += y0;
  }
  return pts;
}

}  // namespace

absl::Status FindLandmarks(const ModelCopy& landmarks, Picture& pic, const Checkpoint& cp) {
  if (!landmarks.landmarks) return absl::InvalidArgumentError("landmarks: the model is not a landmark net");
  std::vector<faceapi::Landmarks68> found;
  std::vector<Look> looks;
  for (const DetectedFace& f : pic.faces) {
    RETURN_IF_ERROR(cp.Check("face", found.size(), pic.faces.size()));
    const cv::Size size = pic.rgb.size();
    Look look{.detector_logit = f.upside_down_logit,
              .known_upside_down = f.orientation_known ? (f.upside_down ? 1 : 0) : -1,
              .keep_level = f.levelled};
    if (!TouchesFrameEdge(f.box, size)) {
      ASSIGN_OR_RETURN(auto pts, UprightLandmarks(*landmarks.landmarks, pic.rgb, f.box, &look));
      found.push_back(pts);
      looks.push_back(look);
      continue;
    }
    // The whole face's box on a canvas padded beyond the frame (zeros outside it): first the
    // detector's box extended (ExtendedFaceBox), then the box of the mean face fitted to the
    // points inside the frame (FittedNetBox), while it moves.
    faceapi::FaceBox whole = ExtendedFaceBox(f.box, size);
    auto pts = PointsOnCanvas(*landmarks.landmarks, pic, whole, &look);
    if (!pts.ok()) return pts.status();
    for (int pass = 0; pass < kRefitPasses; ++pass) {
      const FaceFit fit = FitMeanFace(*pts, size);
      if (!fit.ok) break;
      const faceapi::FaceBox next = FittedNetBox(fit);
      if (faceapi::IoU(next, whole) >= kRefitStopIoU) break;
      whole = next;
      pts = PointsOnCanvas(*landmarks.landmarks, pic, whole, &look);
      if (!pts.ok()) return pts.status();
    }
    found.push_back(*pts);
    looks.push_back(look);
  }
  for (size_t i = 0; i < found.size(); ++i) {
    pic.faces[i].landmarks = found[i];
    pic.faces[i].upside_down = looks[i].upside_down;
    pic.faces[i].levelled = looks[i].levelled;
  }
  return absl::OkStatus();
}

void SetAsideCutFaces(Picture& pic, float max_share) {
  std::vector<DetectedFace> kept;
  for (DetectedFace& f : pic.faces) {
    const cv::Size size = pic.rgb.size();
    const float share = FaceOutsideShare(f.box, f.landmarks, size);
    if (share > max_share) {
      // The edges: those its points or its fitted box lie beyond, and those its box is cut by.
      unsigned edges = OutsideEdges(f.landmarks, size) | CutEdges(f.box, size);
      if (const FaceFit fit = FitMeanFace(f.landmarks, size); fit.ok) {
        for (const cv::Point2f& c : FittedFaceBox(fit)) {
          if (c.x < 0) edges |= kLeftEdge;
          if (c.x > size.width) edges |= kRightEdge;
          if (c.y < 0) edges |= kTopEdge;
          if (c.y > size.height) edges |= kBottomEdge;
        }
      }
      pic.cut.push_back({f.box, edges, share});
    } else {
      kept.push_back(std::move(f));
    }
  }
  pic.faces = std::move(kept);
}

absl::Status Describe(const ModelCopy& recognition, const cv::Mat& rgb,
                      const faceapi::Landmarks68& landmarks, FaceDescriptor* out) {
  if (!recognition.recognition) return absl::InvalidArgumentError("encode: the model is not a recognition net");
  ASSIGN_OR_RETURN(auto d, recognition.recognition->Compute(rgb, landmarks));
  *out = d;
  return absl::OkStatus();
}

absl::Status DescribeFaces(const ModelCopy& recognition, Picture& pic, const std::vector<size_t>& which,
                           const Checkpoint& cp) {
  std::vector<size_t> idx = which;
  if (idx.empty()) {
    for (size_t i = 0; i < pic.faces.size(); ++i) idx.push_back(i);
  }
  std::vector<FaceDescriptor> found(idx.size());
  for (size_t k = 0; k < idx.size(); ++k) {
    RETURN_IF_ERROR(cp.Check("face", k, idx.size()));
    RETURN_IF_ERROR(Describe(recognition, pic.rgb, pic.faces[idx[k]].landmarks, &found[k]));
  }
  for (size_t k = 0; k < idx.size(); ++k) {
    pic.faces[idx[k]].descriptor = found[k];
    pic.faces[idx[k]].described = true;
  }
  return absl::OkStatus();
}

absl::Status Generate(const ModelCopy& generator, const std::string& device, const Picture& source,
                      const Picture& target, double ratio, std::vector<SwapItem>& items,
                      const Checkpoint& cp, std::vector<std::string>* notes, int threads) {
  if (!generator.generator) return absl::InvalidArgumentError("generate: the model is not a generator");
  const int src_index = LargestFace(source.faces);
  if (src_index < 0) return absl::FailedPreconditionError("no face in the source image");
  auto points = [](const faceapi::Landmarks68& l) {
    std::vector<cv::Point2f> p;
    for (const faceapi::Point& q : l) p.emplace_back(q.x, q.y);
    return p;
  };
  ASSIGN_OR_RETURN(auto src, models::AlignFaceCrop(source.bgr, points(source.faces[src_index].landmarks), models::kCropSize));
  const at::Tensor src_t = OnDevice(models::BgrToTensor(src.bgr), device);
  const at::Tensor src_lm = models::LandmarksToTensor(src.landmarks);
  if (notes != nullptr) {
    *notes = generator.generator->SourceNotes(src_lm);
    const cv::Rect2f box = cv::boundingRect(points(source.faces[src_index].landmarks));
    if (box.width < kSmallSourceFacePx) {
      notes->push_back(absl::StrCat("generate: the source face is ", static_cast<int>(std::lround(box.width)),
                                    " px wide (its 68 points' extent): detail finer than that is not in the "
                                    "result; a source face of ", kSmallSourceFacePx, " px or more works best"));
    }
  }
  std::vector<SwapItem> done = items;
  absl::Status st = ParallelFor(done.size(), threads, [&](size_t i) -> absl::Status {
    RETURN_IF_ERROR(cp.Check("face", i, done.size()));
    SwapItem& item = done[i];
    ASSIGN_OR_RETURN(auto dst, models::AlignFaceCrop(target.bgr, points(target.faces[item.face].landmarks), models::kCropSize));
    models::GeneratorInputs in{src_t, src_lm, OnDevice(models::BgrToTensor(dst.bgr), device),
                               models::LandmarksToTensor(dst.landmarks), ratio};
    ASSIGN_OR_RETURN(auto out, generator.generator->Fuse(in));
    item.fused = models::TensorToRgbMat(out);
    item.target_crop = models::TensorToRgbMat(in.target);
    item.frame_to_crop = dst.frame_to_crop;
    return absl::OkStatus();
  });
  if (!st.ok()) return st;
  items = std::move(done);
  return absl::OkStatus();
}

int EnhanceScale(const ModelCopy& enhancer) {
  if (enhancer.torchscript_enhancer) return enhancer.torchscript_enhancer->scale();
  return enhancer.keras ? enhancer.keras->scale() : 0;
}

absl::Status Enhance(const ModelCopy& enhancer, const std::string& device, int tile_px, cv::Mat& rgb01,
                     const Checkpoint& cp) {
  if (enhancer.torchscript_enhancer) {  // whole crops or frames only (not tileable), fp32
    const models::TorchScriptEnhancer& m = *enhancer.torchscript_enhancer;
    if (tile_px > 0) return absl::InvalidArgumentError(absl::StrCat("enhance: ", m.name(), " is not tileable"));
    ASSIGN_OR_RETURN(auto out, m.Forward(OnDevice(MatToTensor(rgb01), device) * 255.0));
    rgb01 = models::TensorToRgbMat((out.to(at::kFloat) / 255.0).clamp(0.0, 1.0));
    return absl::OkStatus();
  }
  if (!enhancer.keras) return absl::InvalidArgumentError("enhance: the model is not an enhancer (ESRGAN or TorchScript)");
  const keras::KerasModel& m = *enhancer.keras;
  if (tile_px > 0 && !m.tileable()) {
    return absl::InvalidArgumentError(absl::StrCat("enhance: ", m.origin(), " is not tileable"));
  }
  // A bf16 fast path runs bf16 by itself (autocast would send it to the at:: path).
  auto autocast = PrecisionScope::Needed(m.bf16() ? "fp32" : enhancer.precision, device);
  if (!autocast.ok()) return absl::InvalidArgumentError(absl::StrCat("enhance: ", m.origin(), ": ", autocast.status().message()));
  PrecisionScope precision(*autocast, device);
  const int64_t h = rgb01.rows, w = rgb01.cols, s = m.scale(), halo = m.halo_px();
  if (tile_px <= 0 || (h <= tile_px && w <= tile_px)) {
    const at::Tensor x = OnDevice(MatToTensor(rgb01), device) * 255.0;
    ASSIGN_OR_RETURN(auto whole, Forward(m, x));
    rgb01 = models::TensorToRgbMat((whole.to(at::kFloat) / 255.0).clamp(0.0, 1.0));
    return absl::OkStatus();
  }
  // Tiled: only a tile (with its halo) and its output are tensors at a time; the whole input
  // and output stay host images (OpenCV buffers, never in the device tier), so the working set
  // is a tile's whatever the image size. The elementwise steps are those of the whole run.
  cv::Mat out(static_cast<int>(h * s), static_cast<int>(w * s), CV_32FC3);
  const int64_t columns = (w + tile_px - 1) / tile_px, tiles = columns * ((h + tile_px - 1) / tile_px);
  for (int64_t y0 = 0; y0 < h; y0 += tile_px) {
    for (int64_t x0 = 0; x0 < w; x0 += tile_px) {
      const int64_t index = y0 / tile_px * columns + x0 / tile_px;
      RETURN_IF_ERROR(cp.Check("tile", index, tiles));
      const int64_t y1 = std::min<int64_t>(h, y0 + tile_px), x1 = std::min<int64_t>(w, x0 + tile_px);
      const int64_t ya = std::max<int64_t>(0, y0 - halo), xa = std::max<int64_t>(0, x0 - halo);
      const int64_t yb = std::min(h, y1 + halo), xb = std::min(w, x1 + halo);
      const cv::Mat in = rgb01(cv::Range(static_cast<int>(ya), static_cast<int>(yb)),
                               cv::Range(static_cast<int>(xa), static_cast<int>(xb))).clone();
      ASSIGN_OR_RETURN(auto tile, Forward(m, OnDevice(MatToTensor(in), device) * 255.0));
      const at::Tensor core = tile.slice(2, (y0 - ya) * s, (y1 - ya) * s).slice(3, (x0 - xa) * s, (x1 - xa) * s);
      models::TensorToRgbMat((core.to(at::kFloat) / 255.0).clamp(0.0, 1.0))
          .copyTo(out(cv::Range(static_cast<int>(y0 * s), static_cast<int>(y1 * s)),
                      cv::Range(static_cast<int>(x0 * s), static_cast<int>(x1 * s))));
    }
  }
  rgb01 = out;
  return absl::OkStatus();
}

absl::Status BlendSimpleOnDevice(const ModelCopy& blender, const std::vector<models::BlendInput>& faces,
                                 const models::BlendOptions& options, cv::Mat* frame_bgr,
                                 const Checkpoint& cp) {
  if (!blender.feather_blend) return absl::InvalidArgumentError("blend: the model is not a blender");
  if (options.mode != models::BlendMode::kSimple) {
    return absl::InvalidArgumentError("blend: full (Poisson) blending runs on the host (models::BlendFace)");
  }
  for (size_t i = 0; i < faces.size(); ++i) {
    if (absl::Status st = models::ValidateBlendInput(faces[i], frame_bgr); !st.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(st.message(), " (face ", i, ")"));
    }
  }
  const at::Device dev(blender.device);
  cv::Mat frame = frame_bgr->clone();  // a retried attempt starts from the untouched frame
  for (size_t i = 0; i < faces.size(); ++i) {
    RETURN_IF_ERROR(cp.Check("face", i, faces.size()));
    BlendOneOnDevice(faces[i], options, dev, frame);
  }
  *frame_bgr = frame;
  return absl::OkStatus();
}

int LargestFace(const std::vector<DetectedFace>& faces) {
  int best = -1;
  for (size_t i = 0; i < faces.size(); ++i) {
    if (best < 0 || faces[i].box.area() > faces[best].box.area()) best = static_cast<int>(i);
  }
  return best;
}

float DescriptorDistance(const FaceDescriptor& a, const FaceDescriptor& b) {
  return faceapi::DescriptorDistance(a, b);
}

}  // namespace fusion
