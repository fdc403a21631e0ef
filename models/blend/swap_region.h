// The region a swap replaces, as points: the 68 target landmarks (iBUG 300-W order) and a row of
// forehead points just above the brows. The generator triangulates these points (its warp's
// coverage) and the blend's hull is their convex hull, so both cover the same region.
//
// Why the forehead row: the 68 points' hull has its top edge on the brows, and the blend's
// feather (eroded by its radius, then blurred) fades the pixels next to that edge, so the
// source's brows were mixed half into the target's (double brows, and the target's brows kept
// most of their shape: brows carry much of a face's identity). With the edge kForeheadMargin of
// the brow-to-chin distance above the brows, the brows are inside the feather's full weight; the
// generator fades its change across that strip (ClassicalGenerator: ForeheadRamp), so the strip
// is a transition and the source's own forehead is not pasted.
// Measured on bench/quality (docs/QUALITY.md): the profile source's faces under identity 0.6 on
// the group photos and their colour casts 26 -> 32 of 32; margins of 0.2 and more take in the
// source's hairline (the astronaut's fringe became a dark band across the target's forehead).
//
// Geometry only: every point is a fixed affine combination of landmarks, so the construction
// commutes with the crop transform (a similarity): frame points and crop points give the same
// region. Thread-safety: pure functions.
#pragma once

#include <opencv2/core/types.hpp>
#include <vector>

namespace fusion::models {

inline constexpr int kSwapRegionLandmarks = 68;
inline constexpr int kForeheadPoints = 10;  // one above each brow point (17-26)
inline constexpr int kSwapRegionPoints = kSwapRegionLandmarks + kForeheadPoints;
// Forehead point j = brow point 17 + j + kForeheadMargin * (mean of the brows - chin point 8).
inline constexpr double kForeheadMargin = 0.08;

// 68 landmarks -> 78 points: the landmarks, then forehead points 68-77 (above brow points
// 17-26, in that order). A vector of any other size is returned as it is.
std::vector<cv::Point2f> SwapRegionPoints(const std::vector<cv::Point2f>& landmarks);

// The left-right mirror of a forehead point's index (68 + j <-> 68 + 9 - j, as brows 17 + j <->
// 26 - j); point indices under 68 are the caller's (the 68-point scheme's own mirror).
constexpr int MirrorForeheadPoint(int index) {
  return kSwapRegionLandmarks + (kForeheadPoints - 1 - (index - kSwapRegionLandmarks));
}

}  // namespace fusion::models
