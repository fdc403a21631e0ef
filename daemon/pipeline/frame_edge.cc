// Faces cut by the frame edge (frame_edge.h).
#include "pipeline/frame_edge.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include <opencv2/imgproc.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace fusion {

unsigned CutEdges(const faceapi::FaceBox& b, cv::Size frame) {
  unsigned edges = 0;
  if (b.w <= 0 || b.h <= 0) return 0;
  const float tol = std::max(kEdgeTolerancePx, kEdgeToleranceShare * std::max(b.w, b.h));
  // Cut along x: narrower than a whole face of its height; along y: flatter than one of its width.
  if (b.w < b.h * kWholeFaceAspect) {
    if (b.x <= tol) edges |= kLeftEdge;
    if (b.x + b.w >= frame.width - tol) edges |= kRightEdge;
  }
  if (b.h < b.w / kWholeFaceAspect) {
    if (b.y <= tol) edges |= kTopEdge;
    if (b.y + b.h >= frame.height - tol) edges |= kBottomEdge;
  }
  return edges;
}

std::string EdgeNames(unsigned edges) {
  std::vector<std::string> names;
  if (edges & kLeftEdge) names.push_back("left");
  if (edges & kRightEdge) names.push_back("right");
  if (edges & kTopEdge) names.push_back("top");
  if (edges & kBottomEdge) names.push_back("bottom");
  if (names.empty()) return "no edge";
  if (names.size() == 1) return absl::StrCat("the ", names[0], " edge");
  const std::string last = names.back();
  names.pop_back();
  return absl::StrCat("the ", absl::StrJoin(names, ", "), " and ", last, " edges");
}

namespace {

// `box` extended beyond its cut edges to width / height `aspect_x` (left/right cuts) and
// `aspect_y` (top/bottom cuts); never shrunk.
faceapi::FaceBox Extend(const faceapi::FaceBox& box, cv::Size frame, float aspect_x, float aspect_y) {
  const unsigned edges = CutEdges(box, frame);
  faceapi::FaceBox out = box;
  if (edges & (kLeftEdge | kRightEdge)) {
    const float missing = std::max(0.f, box.h * aspect_x - box.w);
    const bool left = edges & kLeftEdge, right = edges & kRightEdge;
    out.x -= left && right ? missing / 2 : (left ? missing : 0);
    out.w += missing;
  }
  if (edges & (kTopEdge | kBottomEdge)) {
    const float missing = std::max(0.f, box.w / aspect_y - box.h);
    const bool top = edges & kTopEdge, bottom = edges & kBottomEdge;
    out.y -= top && bottom ? missing / 2 : (top ? missing : 0);
    out.h += missing;
  }
  return out;
}

}  // namespace

faceapi::FaceBox ExtendedFaceBox(const faceapi::FaceBox& box, cv::Size frame) {
  return Extend(box, frame, kWholeFaceAspect, kWholeFaceAspect);
}

unsigned OutsideEdges(const faceapi::Landmarks68& landmarks, cv::Size frame) {
  unsigned edges = 0;
  for (const faceapi::Point& p : landmarks) {
    if (p.x < 0) edges |= kLeftEdge;
    if (p.x > frame.width) edges |= kRightEdge;
    if (p.y < 0) edges |= kTopEdge;
    if (p.y > frame.height) edges |= kBottomEdge;
  }
  return edges;
}

float OutsideShare(const faceapi::Landmarks68& landmarks, cv::Size frame) {
  std::vector<cv::Point2f> pts, hull;
  for (const faceapi::Point& p : landmarks) pts.emplace_back(p.x, p.y);
  cv::convexHull(pts, hull);
  const double area = cv::contourArea(hull);
  if (area <= 0) return 0;
  const std::vector<cv::Point2f> rect = {{0, 0},
                                         {static_cast<float>(frame.width), 0},
                                         {static_cast<float>(frame.width), static_cast<float>(frame.height)},
                                         {0, static_cast<float>(frame.height)}};
  std::vector<cv::Point2f> inside;
  const double kept = cv::intersectConvexConvex(hull, rect, inside, /*handleNested=*/true);
  return static_cast<float>(std::clamp(1.0 - std::max(0.0, kept) / area, 0.0, 1.0));
}

float BoxOutsideShare(const faceapi::FaceBox& box, cv::Size frame) {
  if (CutEdges(box, frame) == 0) return 0;
  const faceapi::FaceBox e = Extend(box, frame, kShareAspectX, kShareAspectY);
  const float area = e.area();
  if (area <= 0) return 0;
  const float w = std::min<float>(e.x + e.w, frame.width) - std::max(e.x, 0.f);
  const float h = std::min<float>(e.y + e.h, frame.height) - std::max(e.y, 0.f);
  return std::clamp(1.f - std::max(0.f, w) * std::max(0.f, h) / area, 0.f, 1.f);
}

float FaceOutsideShare(const faceapi::FaceBox& box, const faceapi::Landmarks68& landmarks, cv::Size frame) {
  return std::max(OutsideShare(landmarks, frame), BoxOutsideShare(box, frame));
}

double Similarity::Scale() const { return std::hypot(a, b); }

Similarity FitSimilarity(const std::vector<cv::Point2f>& from, const std::vector<cv::Point2f>& to,
                         const std::vector<float>& w) {
  const size_t n = std::min(from.size(), to.size());
  double sw = 0, fx = 0, fy = 0, tx = 0, ty = 0;
  size_t used = 0;
  for (size_t i = 0; i < n; ++i) {
    const double wi = w.empty() ? 1.0 : w[i];
    if (wi <= 0) continue;
    sw += wi, fx += wi * from[i].x, fy += wi * from[i].y, tx += wi * to[i].x, ty += wi * to[i].y, ++used;
  }
  if (used < 2) return {};
  fx /= sw, fy /= sw, tx /= sw, ty /= sw;
  double num_a = 0, num_b = 0, den = 0;
  for (size_t i = 0; i < n; ++i) {
    const double wi = w.empty() ? 1.0 : w[i];
    if (wi <= 0) continue;
    const double x = from[i].x - fx, y = from[i].y - fy, u = to[i].x - tx, v = to[i].y - ty;
    num_a += wi * (x * u + y * v), num_b += wi * (x * v - y * u), den += wi * (x * x + y * y);
  }
  if (den <= 0) return {};
  Similarity s{num_a / den, num_b / den, 0, 0};
  s.tx = tx - (s.a * fx - s.b * fy);
  s.ty = ty - (s.b * fx + s.a * fy);
  return s;
}

std::string CutFaceNote(const std::string& what, const faceapi::FaceBox& b, unsigned edges, float outside_share) {
  return absl::StrCat(what, ": the face at (", std::lround(b.x), ",", std::lround(b.y), " ", std::lround(b.w), "x",
                      std::lround(b.h), ") is cut by ", EdgeNames(edges), " of the frame (",
                      std::lround(outside_share * 100), "% of it outside): not swapped");
}

}  // namespace fusion
