// Image helpers of the face-api port: decoding to RGB, face-api's NetInput.toBatchTensor
// (zero-pad to a square, bilinear resize), and box crops.
// Source: @vladmandic/face-api 1.7.15 src/dom/NetInput.ts; shared/reference/faceapi_ref.py.
// Thread-safety: free functions without shared state.
#pragma once

#include <ATen/core/Tensor.h>

#include <filesystem>

#include <opencv2/core/mat.hpp>

#include "absl/status/statusor.h"
#include "models/faceapi/types.h"

namespace fusion::faceapi {

// Decodes an image file to 8-bit RGB (CV_8UC3; grey images are expanded). NOT_FOUND /
// INVALID_ARGUMENT naming the file.
absl::StatusOr<cv::Mat> LoadRgb(const std::filesystem::path& path);

// face-api toBatchTensor: pads `rgb` (CV_8UC3) with zeros to a square — at the bottom/right when
// !center, else split (round-half-even of half the difference after, the rest before) — then
// resizes to size x size (cv::resize INTER_LINEAR, float). Returns [1,3,size,size] float32 CPU,
// values 0..255, RGB. An image over kBatchPrescaleAbove * size on its longer side is first
// scaled down to 2 * size with INTER_AREA (not face-api's: it resizes the whole padded square,
// as float, bilinearly): the landmark and recognition nets get a face's box crop at full
// resolution, and the square plus its float copy cost 15 bytes per box pixel (135 MB for a
// 3000-px face, ~1 GB for one filling a 100-MP frame), uncharged; now at most ~2.5 MB. The
// bilinear resize of a crop over 4x the input also skipped most of its pixels (aliasing).
inline constexpr int kBatchPrescaleAbove = 4;
at::Tensor ToBatchTensor(const cv::Mat& input, int size, bool center);

// Rounds the box to integer pixels and clips it to the image; the crop shares memory with
// `rgb`. `origin` receives its top-left corner. An empty Mat when nothing is left.
cv::Mat CropBox(const cv::Mat& rgb, const FaceBox& box, Point* origin);

}  // namespace fusion::faceapi
