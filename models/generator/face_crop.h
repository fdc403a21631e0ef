// Aligned face crops: the host-side step that turns a decoded frame plus 68 frame landmarks into
// the generator's input crop (generator.h), and the conversions between OpenCV images and the
// generator's tensors.
//
// Alignment: a similarity transform (rotation from the eye line, uniform scale, translation) that
// maps the landmarks' rotated bounding box, grown by `margin` on each side, onto an S x S crop.
// Pixel centres are integers in both frames (OpenCV convention).
// Thread-safety: free functions, no shared state.
#pragma once

#include <ATen/core/Tensor.h>

#include <opencv2/core.hpp>
#include <vector>

#include "absl/status/statusor.h"

namespace fusion::models {

struct FaceCrop {
  cv::Mat bgr;                          // CV_8UC3, S x S, BGR (cv::imread order)
  cv::Matx23d frame_to_crop;            // crop_px = frame_to_crop * [frame_px, 1]
  std::vector<cv::Point2f> landmarks;   // 68 points in crop pixels
};

// Errors: InvalidArgument when the frame is not CV_8UC3, there are not 68 landmarks, size < 32 or
// the eyes coincide.
absl::StatusOr<FaceCrop> AlignFaceCrop(const cv::Mat& frame_bgr,
                                       const std::vector<cv::Point2f>& landmarks, int size,
                                       double margin = 0.2);

// CV_8UC3 BGR -> [1,3,H,W] float32 RGB in [0,1] on the CPU.
at::Tensor BgrToTensor(const cv::Mat& bgr);
// [1,3,H,W] float RGB (any device) -> CV_32FC3 RGB in the tensor's units (host copy).
cv::Mat TensorToRgbMat(const at::Tensor& rgb);
// 68 points -> [1,68,2] float32 on the CPU.
at::Tensor LandmarksToTensor(const std::vector<cv::Point2f>& landmarks);

}  // namespace fusion::models
