// Aligned face crops and image <-> tensor conversions (face_crop.h).
#include "models/generator/face_crop.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <opencv2/imgproc.hpp>

#include "models/generator/generator.h"

namespace fusion::models {
namespace {

cv::Point2f Mean(const std::vector<cv::Point2f>& p, int from, int to) {
  cv::Point2f s(0, 0);
  for (int i = from; i < to; ++i) s += p[i];
  return s * (1.0f / static_cast<float>(to - from));
}

}  // namespace

absl::StatusOr<FaceCrop> AlignFaceCrop(const cv::Mat& frame_bgr,
                                       const std::vector<cv::Point2f>& landmarks, int size,
                                       double margin) {
  if (frame_bgr.type() != CV_8UC3 || landmarks.size() != kNumLandmarks || size < kMinCropSize) {
    return absl::InvalidArgumentError("AlignFaceCrop needs a CV_8UC3 frame, 68 landmarks, size >= 32");
  }
  const cv::Point2f eye_l = Mean(landmarks, 36, 42), eye_r = Mean(landmarks, 42, 48);
  const cv::Point2f eye = eye_r - eye_l;
  if (std::hypot(eye.x, eye.y) < 1e-3) return absl::InvalidArgumentError("AlignFaceCrop: eyes coincide");
  const double theta = std::atan2(eye.y, eye.x), c = std::cos(theta), s = std::sin(theta);
  // Bounding box of the landmarks in the rotated (eye line horizontal) frame.
  double x0 = 1e18, y0 = 1e18, x1 = -1e18, y1 = -1e18;
  for (const cv::Point2f& p : landmarks) {
    const double rx = c * p.x + s * p.y, ry = -s * p.x + c * p.y;
    x0 = std::min(x0, rx), x1 = std::max(x1, rx), y0 = std::min(y0, ry), y1 = std::max(y1, ry);
  }
  const double side = std::max(x1 - x0, y1 - y0) * (1.0 + 2.0 * margin);
  const double k = size / side, half = (size - 1) / 2.0;
  const double rcx = (x0 + x1) / 2.0, rcy = (y0 + y1) / 2.0;  // centre in the rotated frame
  FaceCrop out;
  out.frame_to_crop = cv::Matx23d(k * c, k * s, half - k * rcx, -k * s, k * c, half - k * rcy);
  cv::warpAffine(frame_bgr, out.bgr, cv::Mat(out.frame_to_crop), cv::Size(size, size),
                 cv::INTER_LINEAR, cv::BORDER_REPLICATE);
  cv::transform(landmarks, out.landmarks, cv::Mat(out.frame_to_crop));
  return out;
}

at::Tensor BgrToTensor(const cv::Mat& bgr) {
  cv::Mat rgb;
  cv::cvtColor(bgr, rgb, cv::COLOR_BGR2RGB);
  const at::Tensor hwc = at::from_blob(rgb.data, {rgb.rows, rgb.cols, 3}, at::kByte);
  return hwc.permute({2, 0, 1}).unsqueeze(0).to(at::kFloat).div(255.0).contiguous();
}

cv::Mat TensorToRgbMat(const at::Tensor& rgb) {
  const at::Tensor hwc = rgb.detach().squeeze(0).permute({1, 2, 0}).to(at::kCPU, at::kFloat).contiguous();
  cv::Mat view(static_cast<int>(hwc.size(0)), static_cast<int>(hwc.size(1)), CV_32FC3, hwc.data_ptr());
  return view.clone();
}

at::Tensor LandmarksToTensor(const std::vector<cv::Point2f>& landmarks) {
  std::vector<float> flat;
  for (const cv::Point2f& p : landmarks) flat.insert(flat.end(), {p.x, p.y});
  return at::from_blob(flat.data(), {1, static_cast<int64_t>(landmarks.size()), 2}, at::kFloat).clone();
}

}  // namespace fusion::models
