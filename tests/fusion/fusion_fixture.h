// Shared helpers for the fusion tests: test-data paths, committed landmarks, one face swap.
#pragma once

#include <opencv2/core.hpp>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "models/blend/blend.h"

namespace fusion::testing {

// tests/data/<rel> in the source tree.
std::string TestDataPath(const std::string& rel);
// A face photo: tests/data/faces/<name>, else the fetch step's test-data faces directory
// ($FUSION_TESTDATA_DIR or <build>/fetched/testdata). Empty when absent.
std::string FacePath(const std::string& name);
// The fetched models directory ($FUSION_MODELS_DIR or <build>/fetched/models).
std::string ModelsDir();
// The 68-point landmarks of every face of `image` (tests/data/fusion/landmarks68.json, made by
// scripts/make-fusion-landmarks.py), left to right.
std::vector<std::vector<cv::Point2f>> CommittedLandmarks(const std::string& image);

struct SwapResult {
  cv::Mat frame;  // CV_8UC3 BGR
};

// Swaps `source` (one face, landmarks `src_lm`) onto the face `dst_lm` of `frame` in place:
// aligned 256 crops, classical generator at `ratio`, blend in `mode`.
absl::Status SwapFace(const cv::Mat& source, const std::vector<cv::Point2f>& src_lm,
                      const std::vector<cv::Point2f>& dst_lm, double ratio,
                      models::BlendMode mode, cv::Mat* frame);

// PNG-encodes and decodes `bgr` (the byte-exact comparison is on what a client gets back).
cv::Mat PngRoundTrip(const cv::Mat& bgr);

}  // namespace fusion::testing
