// The blotch metric (blotch.h).
#include "models/quality/blotch.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include <opencv2/imgproc.hpp>

#include "absl/strings/str_cat.h"

namespace fusion::quality {

absl::StatusOr<BlotchScore> ScoreBlotches(const cv::Mat& result_bgr, const cv::Mat& target_bgr,
                                          const cv::Rect2f& box) {
  if (result_bgr.type() != CV_8UC3 || target_bgr.type() != CV_8UC3 || result_bgr.size() != target_bgr.size()) {
    return absl::InvalidArgumentError("blotch metric: result and target must be 8-bit BGR images of one size");
  }
  const int x = static_cast<int>(std::lround(box.x)), y = static_cast<int>(std::lround(box.y));
  const int w = static_cast<int>(std::lround(box.width)), h = static_cast<int>(std::lround(box.height));
  const cv::Rect frame(0, 0, target_bgr.cols, target_bgr.rows);
  const cv::Rect inner = cv::Rect(cv::Point(x + w / 6, y + h / 6), cv::Point(x + w - w / 6, y + h - h / 6)) & frame;
  if (w <= 0 || h <= 0 || inner.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("blotch metric: face box ", x, ",", y, " ", w, "x", h,
                                                   " has no inner box inside the ", frame.width, "x",
                                                   frame.height, " image"));
  }
  const cv::Rect padded = cv::Rect(x - w, y - w, 3 * w, h + 2 * w) & frame;
  cv::Mat target_lab, result_lab;
  cv::cvtColor(target_bgr(padded), target_lab, cv::COLOR_BGR2Lab);
  cv::cvtColor(result_bgr(inner), result_lab, cv::COLOR_BGR2Lab);
  target_lab.convertTo(target_lab, CV_32FC3);
  result_lab.convertTo(result_lab, CV_32FC3);
  const int k = std::max(3, (w / 4) | 1);
  cv::GaussianBlur(target_lab, target_lab, cv::Size(k, k), 0);
  const cv::Mat blurred = target_lab(inner - padded.tl());
  std::vector<float> d;
  d.reserve(inner.area());
  for (int r = 0; r < inner.height; ++r) {
    const cv::Vec3f* a = result_lab.ptr<cv::Vec3f>(r);
    const cv::Vec3f* b = blurred.ptr<cv::Vec3f>(r);
    for (int c = 0; c < inner.width; ++c) d.push_back(std::hypot(a[c][1] - b[c][1], a[c][2] - b[c][2]));
  }
  const size_t over = std::count_if(d.begin(), d.end(), [](float v) { return v > kBlotchChromaThreshold; });
  const size_t rank = static_cast<size_t>(std::floor(0.995 * static_cast<double>(d.size() - 1)));
  std::nth_element(d.begin(), d.begin() + rank, d.end());
  return BlotchScore{static_cast<double>(over) / d.size(), d[rank]};
}

}  // namespace fusion::quality
