// Swap region points (swap_region.h).
#include "models/blend/swap_region.h"

namespace fusion::models {

std::vector<cv::Point2f> SwapRegionPoints(const std::vector<cv::Point2f>& landmarks) {
  if (landmarks.size() != kSwapRegionLandmarks) return landmarks;
  constexpr int kFirstBrow = 17, kChin = 8;
  cv::Point2f brows(0, 0);
  for (int j = 0; j < kForeheadPoints; ++j) brows += landmarks[kFirstBrow + j];
  brows *= 1.0f / kForeheadPoints;
  const cv::Point2f up = (brows - landmarks[kChin]) * static_cast<float>(kForeheadMargin);
  std::vector<cv::Point2f> out = landmarks;
  out.reserve(kSwapRegionPoints);
  for (int j = 0; j < kForeheadPoints; ++j) out.push_back(landmarks[kFirstBrow + j] + up);
  return out;
}

}  // namespace fusion::models
