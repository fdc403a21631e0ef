// The blotch metric of a swapped face: how much of the face carries colour that the
// target does not have nearby. Used by bench/quality and by the pipeline tests.
//
// Exactly, for a face with box (x, y, w, h) in target pixels (rounded to integers):
//   inner box  = (x + w/6, y + h/6) .. (x + w - w/6, y + h - h/6)   (integer division);
//   result and target are converted to OpenCV 8-bit Lab (COLOR_BGR2LAB, then float);
//   the target's Lab, cropped to the box padded by w on every side (clipped to the image), is
//   blurred with cv::GaussianBlur(k x k, sigma 0), k = max(3, (w / 4) | 1);
//   d(p) = Euclidean distance of (a, b) between the result and the blurred target at p;
//   fraction = share of inner-box pixels with d > 20;  p995 = the 99.5th percentile of d
//   (nearest rank: the value at index floor(0.995 * (n - 1)) of the sorted distances).
// A grey target has a = b = 128 everywhere, so any chroma the swap adds counts.
// Thread-safety: a pure function. Errors: INVALID_ARGUMENT when the images are not CV_8UC3 of
// the same size, or the inner box is empty or outside the image.
#pragma once

#include <opencv2/core.hpp>

#include "absl/status/statusor.h"

namespace fusion::quality {

struct BlotchScore {
  double fraction = 0;  // [0, 1]: share of inner-box pixels with chroma distance > threshold
  double p995 = 0;      // 99.5th percentile of the chroma distance, 8-bit Lab units
};

inline constexpr double kBlotchChromaThreshold = 20.0;  // 8-bit Lab (a, b) units

// `box` = {x, y, w, h} in pixels of both images (the detector's box, rounded by the caller or
// here with std::lround).
absl::StatusOr<BlotchScore> ScoreBlotches(const cv::Mat& result_bgr, const cv::Mat& target_bgr,
                                          const cv::Rect2f& box);

}  // namespace fusion::quality
