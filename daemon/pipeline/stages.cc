// Stage computations with LibTorch (stages.h).
#include "pipeline/stages.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>

#include <opencv2/imgproc.hpp>

#include "absl/strings/str_cat.h"
#include "models/faceapi/face_landmark_68.h"
#include "models/faceapi/face_recognition.h"
#include "models/faceapi/multiscale.h"
#include "models/faceapi/ssd_mobilenet_v1.h"
#include "models/faceapi/tiny_face_detector.h"
#include "models/generator/face_crop.h"
#include "models/generator/generator.h"
#include "models/keras/keras_model.h"
#include "pipeline/precision.h"

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

absl::StatusOr<at::Tensor> Forward(const keras::KerasModel& m, const at::Tensor& x) { return m.Forward(x); }

}  // namespace

absl::Status DetectFaces(const ModelCopy& detector, int tile_px, Picture& pic) {
  const faceapi::FaceDetector* det = DetectorOf(detector);
  if (det == nullptr) return absl::InvalidArgumentError("detect: the model is not a face detector");
  faceapi::MultiScaleOptions options;
  options.tile_px = tile_px;  // the same passes; each runs its stem in windows
  auto boxes = faceapi::DetectMultiScale(*det, pic.rgb_small, options);
  if (!boxes.ok()) return boxes.status();
  std::vector<DetectedFace> faces;
  for (const faceapi::FaceBox& b : *boxes) {
    DetectedFace f;
    const float s = static_cast<float>(pic.scale);
    f.box = {b.x * s, b.y * s, b.w * s, b.h * s, b.score};
    faces.push_back(f);
  }
  pic.faces = std::move(faces);
  return absl::OkStatus();
}

absl::Status FindLandmarks(const ModelCopy& landmarks, Picture& pic) {
  if (!landmarks.landmarks) return absl::InvalidArgumentError("landmarks: the model is not a landmark net");
  std::vector<faceapi::Landmarks68> found;
  for (const DetectedFace& f : pic.faces) {
    auto pts = landmarks.landmarks->Detect(pic.rgb, f.box);
    if (!pts.ok()) return pts.status();
    found.push_back(*pts);
  }
  for (size_t i = 0; i < found.size(); ++i) pic.faces[i].landmarks = found[i];
  return absl::OkStatus();
}

absl::Status Describe(const ModelCopy& recognition, const cv::Mat& rgb,
                      const faceapi::Landmarks68& landmarks, FaceDescriptor* out) {
  if (!recognition.recognition) return absl::InvalidArgumentError("encode: the model is not a recognition net");
  auto d = recognition.recognition->Compute(rgb, landmarks);
  if (!d.ok()) return d.status();
  *out = *d;
  return absl::OkStatus();
}

absl::Status DescribeFaces(const ModelCopy& recognition, Picture& pic, const std::vector<size_t>& which) {
  std::vector<size_t> idx = which;
  if (idx.empty()) {
    for (size_t i = 0; i < pic.faces.size(); ++i) idx.push_back(i);
  }
  std::vector<FaceDescriptor> found(idx.size());
  for (size_t k = 0; k < idx.size(); ++k) {
    if (absl::Status st = Describe(recognition, pic.rgb, pic.faces[idx[k]].landmarks, &found[k]); !st.ok()) return st;
  }
  for (size_t k = 0; k < idx.size(); ++k) {
    pic.faces[idx[k]].descriptor = found[k];
    pic.faces[idx[k]].described = true;
  }
  return absl::OkStatus();
}

absl::Status Generate(const ModelCopy& generator, const std::string& device, const Picture& source,
                      const Picture& target, double ratio, std::vector<SwapItem>& items) {
  if (!generator.generator) return absl::InvalidArgumentError("generate: the model is not a generator");
  const int src_index = LargestFace(source.faces);
  if (src_index < 0) return absl::FailedPreconditionError("no face in the source image");
  auto points = [](const faceapi::Landmarks68& l) {
    std::vector<cv::Point2f> p;
    for (const faceapi::Point& q : l) p.emplace_back(q.x, q.y);
    return p;
  };
  auto src = models::AlignFaceCrop(source.bgr, points(source.faces[src_index].landmarks), models::kCropSize);
  if (!src.ok()) return src.status();
  const at::Tensor src_t = OnDevice(models::BgrToTensor(src->bgr), device);
  const at::Tensor src_lm = models::LandmarksToTensor(src->landmarks);
  std::vector<SwapItem> done = items;
  for (SwapItem& item : done) {
    auto dst = models::AlignFaceCrop(target.bgr, points(target.faces[item.face].landmarks), models::kCropSize);
    if (!dst.ok()) return dst.status();
    models::GeneratorInputs in{src_t, src_lm, OnDevice(models::BgrToTensor(dst->bgr), device),
                               models::LandmarksToTensor(dst->landmarks), ratio};
    auto out = generator.generator->Fuse(in);
    if (!out.ok()) return out.status();
    item.fused = models::TensorToRgbMat(*out);
    item.target_crop = models::TensorToRgbMat(in.target);
    item.frame_to_crop = dst->frame_to_crop;
  }
  items = std::move(done);
  return absl::OkStatus();
}

int EnhanceScale(const ModelCopy& enhancer) { return enhancer.keras ? enhancer.keras->scale() : 0; }

absl::Status Enhance(const ModelCopy& enhancer, const std::string& device, int tile_px, cv::Mat& rgb01) {
  if (!enhancer.keras) return absl::InvalidArgumentError("enhance: the model is not an ESRGAN model");
  const keras::KerasModel& m = *enhancer.keras;
  if (tile_px > 0 && !m.tileable()) {
    return absl::InvalidArgumentError(absl::StrCat("enhance: ", m.origin(), " is not tileable"));
  }
  auto autocast = PrecisionScope::Needed(enhancer.precision, device);
  if (!autocast.ok()) return absl::InvalidArgumentError(absl::StrCat("enhance: ", m.origin(), ": ", autocast.status().message()));
  PrecisionScope precision(*autocast, device);
  const at::Tensor x = OnDevice(MatToTensor(rgb01), device) * 255.0;
  const int64_t h = x.size(2), w = x.size(3), s = m.scale(), halo = m.halo_px();
  at::Tensor y;
  if (tile_px <= 0 || (h <= tile_px && w <= tile_px)) {
    auto whole = Forward(m, x);
    if (!whole.ok()) return whole.status();
    y = *whole;
  } else {
    y = at::empty({1, 3, h * s, w * s}, x.options());
    for (int64_t y0 = 0; y0 < h; y0 += tile_px) {
      for (int64_t x0 = 0; x0 < w; x0 += tile_px) {
        const int64_t y1 = std::min<int64_t>(h, y0 + tile_px), x1 = std::min<int64_t>(w, x0 + tile_px);
        const int64_t ya = std::max<int64_t>(0, y0 - halo), xa = std::max<int64_t>(0, x0 - halo);
        const int64_t yb = std::min(h, y1 + halo), xb = std::min(w, x1 + halo);
        auto tile = Forward(m, x.slice(2, ya, yb).slice(3, xa, xb));
        if (!tile.ok()) return tile.status();
        y.slice(2, y0 * s, y1 * s).slice(3, x0 * s, x1 * s)
            .copy_(tile->slice(2, (y0 - ya) * s, (y1 - ya) * s).slice(3, (x0 - xa) * s, (x1 - xa) * s));
      }
    }
  }
  rgb01 = models::TensorToRgbMat((y.to(at::kFloat) / 255.0).clamp(0.0, 1.0));
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
