// Context views: the detector's second look at boxes of an image, each cut out with context
// into a small cell and turned by any angle, many cells to one detector pass.
//
// Method (first written for the orientation check, face_orientation.h): the square around the
// box's centre, kViewCropFactor times the box's longer side (zero outside the image), is resized
// with INTER_AREA to a kViewCellPx cell, so the face is ~kViewCellPx / kViewCropFactor = 58 px
// wide whatever its size in the image (inside SSD's and the tiny detector's reliable band,
// detector.h). A view turned by a quarter turn is the cell turned exactly (cv::rotate); any other
// angle turns a cell sqrt(2) times larger about its centre (bilinear) and keeps its middle
// kViewCellPx square, so the corners hold image, not zeros, wherever the image has them.
// The cells tile one kViewInputPx square input in reading order, kViewCellsPerPass per pass
// (4 x 4); a cell's answer is the best box whose centre lies in the cell's middle half.
// Thread-safety: pure functions; the detector must be safe for concurrent const use.
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

#include <opencv2/core/mat.hpp>

#include "absl/status/statusor.h"
#include "models/faceapi/detector.h"
#include "models/faceapi/types.h"

namespace fusion::faceapi {

inline constexpr int kViewCellPx = 128;
inline constexpr float kViewCropFactor = 2.2f;
inline constexpr int kViewGrid = 4;  // cells per side of the input
inline constexpr int kViewInputPx = kViewGrid * kViewCellPx;
inline constexpr int kViewCellsPerPass = kViewGrid * kViewGrid;

// One view: `box` (image pixels) turned by `turn_deg` degrees counter-clockwise (as
// cv::getRotationMatrix2D; 90 = cv::ROTATE_90_COUNTERCLOCKWISE) about its centre.
struct ContextView {
  FaceBox box;
  float turn_deg = 0;
};

// What the detector saw in one view's cell: `score` its best box there (0 = none from min_score
// up), `box` that box mapped back to image pixels: an axis-aligned box of the detected box's
// size centred on its centre turned back (so the face's extent, not the turned square's hull).
struct ViewAnswer {
  float score = 0;
  FaceBox box;
};

// The answers for `views` of `rgb` (CV_8UC3 RGB), in order: ceil(views / kViewCellsPerPass)
// detector passes of kViewInputPx at Detect's `min_score` (tile_px: FaceDetector::Detect's
// windows). `before_pass(index, count)`, when given, runs before each pass; a non-OK status ends
// the look with it (the pipeline's cancellation checkpoint). INVALID_ARGUMENT for a bad image;
// the detector's errors pass through.
absl::StatusOr<std::vector<ViewAnswer>> LookAgain(
    const FaceDetector& detector, const cv::Mat& rgb, const std::vector<ContextView>& views, float min_score,
    int tile_px = 0, const std::function<absl::Status(size_t index, size_t count)>& before_pass = nullptr);

}  // namespace fusion::faceapi
