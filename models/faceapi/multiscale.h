// Multi-scale face detection: one input size does not find every face (small faces need a
// large input, large faces a small one), so the image is scanned at several scales and the
// results merged with NMS.
//
// Scales come from the original image size, never below min_input (416):
//   S_hi = clamp(round32(max(W,H) / 3), min_input, max_input), S_lo = max(min_input, round32(0.8 S_hi)).
// (MODELS.md §9.3 suggests max/3; on the 1920-px group photos S = 512 and 640 each find all 21
// faces, and the 3840-px mosaic needs about 1024.) A detector with a free input size runs the
// whole image at each S. A fixed-input detector (SSD, input F) emulates scale S with square
// tiles of side T = max(W,H) * F / S (the whole image when T >= max(W,H)), overlapping by
// `tile_overlap`; boxes touching an inner tile edge are dropped (the overlap sees that face
// whole in a neighbouring tile). All boxes are merged with greedy NMS at nms_iou.
// Thread-safety: stateless functions; the detector must be safe for concurrent const use.
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

#include <opencv2/core/types.hpp>

#include "models/faceapi/detector.h"

namespace fusion::faceapi {

struct MultiScaleOptions {
  int min_input = 416;         // never scan with a smaller network input
  int max_input = 1024;        // largest network input (bounds working set and time)
  float nms_iou = 0.4f;        // merge threshold across scales and tiles
  float tile_overlap = 0.25f;  // fraction of the tile side shared with the next tile
  int tile_px = 0;             // > 0: each pass runs its stem in windows (FaceDetector::Detect)
  // Called before pass `index` (0-based) of `count`; a non-OK status ends the scan with it
  // unchanged (the pipeline's cancellation checkpoint). Null = none.
  std::function<absl::Status(size_t index, size_t count)> before_pass;
};

// One detector run: `region` of the image at network input `input_size`.
struct DetectionPass {
  cv::Rect region;
  int input_size = 0;
};

// The passes for an image of w x h pixels.
std::vector<DetectionPass> PlanPasses(const FaceDetector& detector, int w, int h, const MultiScaleOptions& options);

// Runs every pass and merges. Errors from the detector pass through (naming the pass).
absl::StatusOr<std::vector<FaceBox>> DetectMultiScale(const FaceDetector& detector, const cv::Mat& rgb,
                                                      const MultiScaleOptions& options = {});

}  // namespace fusion::faceapi
