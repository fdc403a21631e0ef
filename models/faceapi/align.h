// Face alignment from 68 landmarks (no LibTorch).
//
// DlibAlignBox: face-api's FaceLandmarks.alignDlib (src/classes/FaceLandmarks.ts), the crop the
//   FaceRecognitionNet was trained on: an axis-aligned square from the eye and mouth centres.
// SimilarityFromLandmarks: least-squares similarity (rotation, uniform scale, translation;
//   Umeyama 1991, "Least-squares estimation of transformation parameters between two point
//   patterns") mapping 5 landmark anchors (eye centres, nose tip, mouth corners) onto a
//   canonical template in a size x size crop; AlignFace warps the image with it.
// Thread-safety: pure functions.
#pragma once

#include <array>

#include <opencv2/core/mat.hpp>

#include "models/faceapi/types.h"

namespace fusion::faceapi {

// Square box (x, y, side, side) in pixels; score 1.
FaceBox DlibAlignBox(const Landmarks68& pts);

// 2x3 row-major affine [a -b tx; b a ty] taking image pixels to aligned-crop pixels.
using Similarity = std::array<double, 6>;
Similarity EstimateSimilarity(const Point* src, const Point* dst, int n);
// The similarity taking the 5 anchors of `pts` to the template scaled to `size`.
Similarity SimilarityFromLandmarks(const Landmarks68& pts, int size);
// Warps `rgb` into a size x size aligned face crop (bilinear, black outside).
cv::Mat AlignFace(const cv::Mat& rgb, const Landmarks68& pts, int size);

}  // namespace fusion::faceapi
