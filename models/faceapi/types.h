// Value types shared by the face-api networks (no LibTorch): boxes, landmarks, input contracts.
// Coordinates are pixels of the image the caller passed (x right, y down, origin top-left).
// Thread-safety: plain value types and pure functions.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace fusion::faceapi {

struct Point {
  float x = 0, y = 0;
};

// An axis-aligned face box in image pixels, with the detector's confidence in [0,1].
struct FaceBox {
  float x = 0, y = 0, w = 0, h = 0;
  float score = 0;
  float area() const { return w > 0 && h > 0 ? w * h : 0.f; }
};

// Intersection over union of two boxes (0 when either is empty).
float IoU(const FaceBox& a, const FaceBox& b);

// Greedy non-maximum suppression: keeps the highest-scoring boxes, dropping any box whose IoU
// with a kept one exceeds `iou_threshold`. Output sorted by descending score.
std::vector<FaceBox> Nms(std::vector<FaceBox> boxes, float iou_threshold);

// 68 iBUG-300W / dlib points: 0-16 jaw, 17-21 right brow, 22-26 left brow (subject's), 27-35
// nose, 36-41 and 42-47 eyes, 48-67 mouth.
using Landmarks68 = std::array<Point, 68>;

// What a network's Forward() expects.
struct InputContract {
  std::vector<int64_t> shape;  // NCHW; -1 = any (N, or H/W where free)
  std::string dtype;           // "float32"
  std::string range;           // e.g. "0..255"
  std::string channels;        // "RGB"
};

}  // namespace fusion::faceapi
