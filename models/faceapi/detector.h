// FaceDetector: what the multi-scale driver needs from a single-pass face detector
// (TinyFaceDetector, SsdMobilenetV1).
// Thread-safety: Detect() is const and may run concurrently; implementations hold no mutable
// state besides their weights, which only move with To() (not concurrently with Detect()).
#pragma once

#include <vector>

#include <opencv2/core/mat.hpp>

#include "absl/status/statusor.h"
#include "models/faceapi/types.h"

namespace fusion::faceapi {

class FaceDetector {
 public:
  virtual ~FaceDetector() = default;
  // Faces in `rgb` (CV_8UC3, RGB) with score > the detector's threshold, after NMS, in pixels of
  // `rgb`. `input_size` is the square network input side (0 = DefaultInputSize()); detectors
  // with a fixed input (SSD) accept only 0 or that size. tile_px > 0 runs the network's
  // high-resolution layers in windows of that many input pixels (ops::TiledPrefix): a smaller
  // working set, the same boxes up to float order. INVALID_ARGUMENT for a bad image or size,
  // INTERNAL for a LibTorch failure (message names the network).
  virtual absl::StatusOr<std::vector<FaceBox>> Detect(const cv::Mat& rgb, int input_size = 0,
                                                      int tile_px = 0) const = 0;
  virtual int DefaultInputSize() const = 0;
  // True when Detect accepts any multiple of 32 as input size; false when fixed.
  virtual bool FreeInputSize() const = 0;
};

}  // namespace fusion::faceapi
