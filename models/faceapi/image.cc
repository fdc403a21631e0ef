#include "models/faceapi/image.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>

#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "absl/strings/str_cat.h"

namespace fusion::faceapi {

float IoU(const FaceBox& a, const FaceBox& b) {
  const float x1 = std::max(a.x, b.x), y1 = std::max(a.y, b.y);
  const float x2 = std::min(a.x + a.w, b.x + b.w), y2 = std::min(a.y + a.h, b.y + b.h);
  const float inter = std::max(0.f, x2 - x1) * std::max(0.f, y2 - y1);
  const float uni = a.area() + b.area() - inter;
  return uni > 0 ? inter / uni : 0.f;
}

std::vector<FaceBox> Nms(std::vector<FaceBox> boxes, float iou_threshold) {
  std::stable_sort(boxes.begin(), boxes.end(),
                   [](const FaceBox& a, const FaceBox& b) { return a.score > b.score; });
  std::vector<FaceBox> kept;
  for (const FaceBox& b : boxes) {
    bool keep = true;
    for (const FaceBox& k : kept) {
      if (IoU(b, k) > iou_threshold) {
        keep = false;
        break;
      }
    }
    if (keep) kept.push_back(b);
  }
  return kept;
}

absl::StatusOr<cv::Mat> LoadRgb(const std::filesystem::path& path) {
  cv::Mat bgr = cv::imread(path.string(), cv::IMREAD_COLOR);
  if (bgr.empty()) {
    return std::filesystem::exists(path)
               ? absl::InvalidArgumentError(absl::StrCat(path.string(), " is not a decodable image"))
               : absl::NotFoundError(absl::StrCat(path.string(), " does not exist"));
  }
  cv::Mat rgb;
  cv::cvtColor(bgr, rgb, cv::COLOR_BGR2RGB);
  return rgb;
}

at::Tensor ToBatchTensor(const cv::Mat& input, int size, bool center) {
  // A crop far larger than the input (a face box thousands of px wide) is first scaled down with
  // INTER_AREA to twice the input: the square and its float copy below then stay small.
  cv::Mat rgb = input;
  if (std::max(input.rows, input.cols) > kBatchPrescaleAbove * size) {
    const double k = 2.0 * size / std::max(input.rows, input.cols);
    cv::resize(input, rgb, cv::Size(std::max(1, static_cast<int>(std::lround(input.cols * k))),
                                    std::max(1, static_cast<int>(std::lround(input.rows * k)))),
               0, 0, cv::INTER_AREA);
  }
  const int h = rgb.rows, w = rgb.cols, d = std::abs(h - w);
  // Python's round() (the reference's) is round-half-even: std::nearbyint in the default mode.
  const int after = center ? static_cast<int>(std::nearbyint(d * 0.5)) : d;
  const int before = d - after;
  cv::Mat square;
  if (h < w) {
    cv::copyMakeBorder(rgb, square, before, after, 0, 0, cv::BORDER_CONSTANT | cv::BORDER_ISOLATED,
                       cv::Scalar::all(0));
  } else {
    cv::copyMakeBorder(rgb, square, 0, 0, before, after, cv::BORDER_CONSTANT | cv::BORDER_ISOLATED,
                       cv::Scalar::all(0));
  }
  cv::Mat f, resized;
  square.convertTo(f, CV_32FC3);
  cv::resize(f, resized, cv::Size(size, size), 0, 0, cv::INTER_LINEAR);
  at::Tensor hwc = at::from_blob(resized.data, {size, size, 3}, at::kFloat);
  return hwc.permute({2, 0, 1}).unsqueeze(0).contiguous();  // copies out of `resized`
}

cv::Mat CropBox(const cv::Mat& rgb, const FaceBox& box, Point* origin) {
  // Python round() on each of x, y, w, h, as faceapi_ref.crop() does.
  const int x = static_cast<int>(std::nearbyint(box.x)), y = static_cast<int>(std::nearbyint(box.y));
  const int w = static_cast<int>(std::nearbyint(box.w)), h = static_cast<int>(std::nearbyint(box.h));
  const int x0 = std::max(0, x), y0 = std::max(0, y);
  const int x1 = std::min(rgb.cols, x + w), y1 = std::min(rgb.rows, y + h);
  if (origin != nullptr) *origin = {static_cast<float>(x0), static_cast<float>(y0)};
  if (x1 <= x0 || y1 <= y0) return cv::Mat();
  return rgb(cv::Rect(x0, y0, x1 - x0, y1 - y0));
}

}  // namespace fusion::faceapi
