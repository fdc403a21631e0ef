// Faces cut by the frame edge (frame_edge.h).
#include "geometry/frame_edge.h"

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

// The share of the convex polygon `poly` outside the frame.
float PolygonOutsideShare(const std::vector<cv::Point2f>& poly, cv::Size frame) {
  const double area = std::abs(cv::contourArea(poly));
  if (area <= 0) return 0;
  const std::vector<cv::Point2f> rect = {{0, 0},
                                         {static_cast<float>(frame.width), 0},
                                         {static_cast<float>(frame.width), static_cast<float>(frame.height)},
                                         {0, static_cast<float>(frame.height)}};
  std::vector<cv::Point2f> inside;
  const double kept = cv::intersectConvexConvex(poly, rect, inside, /*handleNested=*/true);
  return static_cast<float>(std::clamp(1.0 - std::max(0.0, kept) / area, 0.0, 1.0));
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
  return PolygonOutsideShare(hull, frame);
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

namespace {

// bench/edge --calibrate (frame_edge.h).
constexpr float kMeanFace[68][2] = {
    {-1.3034f, -0.7047f}, {-1.2658f, -0.3540f}, {-1.1962f, -0.0188f}, {-1.1099f, 0.2700f},
    {-0.9846f, 0.5921f}, {-0.8042f, 0.8411f}, {-0.5982f, 1.0332f}, {-0.3513f, 1.2516f},
    {0.0398f, 1.3701f}, {0.4270f, 1.2526f}, {0.6909f, 1.0481f}, {0.8987f, 0.8664f},
    {1.0869f, 0.5802f}, {1.2251f, 0.2656f}, {1.2956f, -0.0435f}, {1.3769f, -0.3675f},
    {1.3749f, -0.7192f}, {-1.0862f, -1.0300f}, {-0.9278f, -1.1544f}, {-0.7356f, -1.1703f},
    {-0.5518f, -1.1371f}, {-0.3764f, -1.0670f}, {0.3045f, -1.0815f}, {0.4763f, -1.1405f},
    {0.6863f, -1.1838f}, {0.9104f, -1.1596f}, {1.0746f, -1.0430f}, {-0.0371f, -0.6462f},
    {-0.0419f, -0.3856f}, {-0.0580f, -0.1485f}, {-0.0733f, 0.0693f}, {-0.2501f, 0.1693f},
    {-0.1560f, 0.2201f}, {-0.0326f, 0.2501f}, {0.1026f, 0.2104f}, {0.2102f, 0.1864f},
    {-0.8227f, -0.7307f}, {-0.7098f, -0.7739f}, {-0.5325f, -0.7733f}, {-0.3724f, -0.6856f},
    {-0.5078f, -0.6249f}, {-0.6963f, -0.6428f}, {0.3396f, -0.6820f}, {0.5015f, -0.7806f},
    {0.6832f, -0.7783f}, {0.8047f, -0.7212f}, {0.6778f, -0.6285f}, {0.4930f, -0.6405f},
    {-0.4881f, 0.5532f}, {-0.3303f, 0.5017f}, {-0.1320f, 0.4656f}, {-0.0194f, 0.4819f},
    {0.0918f, 0.4555f}, {0.3329f, 0.5165f}, {0.5359f, 0.5682f}, {0.3240f, 0.7389f},
    {0.1546f, 0.8433f}, {-0.0202f, 0.8740f}, {-0.1706f, 0.8492f}, {-0.3344f, 0.7626f},
    {-0.4592f, 0.5666f}, {-0.1652f, 0.5658f}, {-0.0115f, 0.5762f}, {0.1446f, 0.5756f},
    {0.4824f, 0.5699f}, {0.1403f, 0.6816f}, {-0.0156f, 0.7062f}, {-0.1592f, 0.6879f}};
constexpr float kMeanFaceBox[4][2] = {{-1.7550f, -1.4675f}, {1.8649f, -1.4058f}, {1.6537f, 1.8029f}, {-1.8641f, 1.7501f}};
constexpr float kMeanFaceNetBox[4][2] = {{-1.1596f, -2.0383f}, {1.2348f, -2.1080f}, {1.2159f, 1.4068f}, {-1.2691f, 1.3784f}};

std::vector<cv::Point2f> Placed(const Similarity& s, const float (&pts)[4][2]) {
  std::vector<cv::Point2f> out;
  for (const auto& p : pts) out.push_back(s({p[0], p[1]}));
  return out;
}


}  // namespace

bool TouchesFrameEdge(const faceapi::FaceBox& b, cv::Size frame) {
  if (b.w <= 0 || b.h <= 0) return false;
  const float tol = std::max(kEdgeTolerancePx, kEdgeToleranceShare * std::max(b.w, b.h));
  return b.x <= tol || b.y <= tol || b.x + b.w >= frame.width - tol || b.y + b.h >= frame.height - tol;
}

FaceFit FitMeanFace(const faceapi::Landmarks68& landmarks, cv::Size frame) {
  std::vector<cv::Point2f> from, to;
  for (size_t i = 0; i < landmarks.size(); ++i) {
    from.emplace_back(kMeanFace[i][0], kMeanFace[i][1]);
    to.emplace_back(landmarks[i].x, landmarks[i].y);
  }
  // The face's size: the points' RMS radius (the mean face's is 1) from a fit to all of them.
  const double size = FitSimilarity(from, to).Scale();
  const float margin = static_cast<float>(kFitMarginShare * 2 * size);
  std::vector<float> w(from.size(), 0.f);
  int n = 0;
  for (size_t i = 0; i < to.size(); ++i) {
    const cv::Point2f& p = to[i];
    // Weighted by the distance from the nearest frame edge: the net's points near a cut edge are
    // squeezed towards the visible part, those on the far side are where the face is.
    const float d = std::min({p.x, p.y, frame.width - p.x, frame.height - p.y});
    if (d < margin) continue;
    w[i] = std::clamp(d / static_cast<float>(kFitWeightSpan * 2 * size), kFitMinWeight, 1.f);
    ++n;
  }
  FaceFit fit;
  if (n < kFitMinPoints) return fit;
  fit.to_frame = FitSimilarity(from, to, w);
  for (int round = 0; round < 2; ++round) {
    std::vector<float> d;
    for (size_t i = 0; i < to.size(); ++i) {
      if (w[i] > 0) d.push_back(static_cast<float>(cv::norm(fit.to_frame(from[i]) - to[i])));
    }
    std::nth_element(d.begin(), d.begin() + d.size() / 2, d.end());
    // (a floor: points that fit within 2% of the face's size are never dropped)
    const float limit = std::max(kFitTrim * d[d.size() / 2], static_cast<float>(0.02 * 2 * fit.to_frame.Scale()));
    int kept = 0;
    std::vector<float> next = w;
    for (size_t i = 0; i < to.size(); ++i) {
      if (w[i] > 0 && cv::norm(fit.to_frame(from[i]) - to[i]) > limit) next[i] = 0;
      kept += next[i] > 0;
    }
    if (kept < kFitMinPoints) break;
    w = next;
    n = kept;
    fit.to_frame = FitSimilarity(from, to, w);
  }
  fit.ok = true;
  fit.points = n;
  return fit;
}

std::vector<cv::Point2f> MeanFacePoints() {
  std::vector<cv::Point2f> out;
  for (const auto& p : kMeanFace) out.emplace_back(p[0], p[1]);
  return out;
}

std::vector<cv::Point2f> MeanFaceBox() { return Placed({}, kMeanFaceBox); }

std::vector<cv::Point2f> FittedFaceBox(const FaceFit& fit) { return Placed(fit.to_frame, kMeanFaceBox); }

float FittedOutsideShare(const FaceFit& fit, cv::Size frame) { return PolygonOutsideShare(FittedFaceBox(fit), frame); }

faceapi::FaceBox FittedNetBox(const FaceFit& fit) {
  const std::vector<cv::Point2f> c = Placed(fit.to_frame, kMeanFaceNetBox);
  const cv::Point2f centre = (c[0] + c[1] + c[2] + c[3]) * 0.25f;
  const float w = static_cast<float>((cv::norm(c[1] - c[0]) + cv::norm(c[2] - c[3])) / 2);
  const float h = static_cast<float>((cv::norm(c[3] - c[0]) + cv::norm(c[2] - c[1])) / 2);
  return {centre.x - w / 2, centre.y - h / 2, w, h, 0};
}

float FaceOutsideShare(const faceapi::FaceBox& box, const faceapi::Landmarks68& landmarks, cv::Size frame) {
  const FaceFit fit = FitMeanFace(landmarks, frame);
  if (fit.ok) {
    // The fit's size against the detector's box along the axis no edge cuts (a fit to too few or
    // too squeezed points is off by more): else the older estimate.
    const unsigned cut = CutEdges(box, frame);
    const faceapi::FaceBox net = FittedNetBox(fit);
    const float ratio = cut & (kLeftEdge | kRightEdge) ? net.h / box.h : cut ? net.w / box.w : net.h / box.h;
    if (ratio >= kFitSizeRange[0] && ratio <= kFitSizeRange[1]) return FittedOutsideShare(fit, frame);
  }
  if (!TouchesFrameEdge(box, frame) && OutsideEdges(landmarks, frame) == 0) return 0;
  const float older = std::max(OutsideShare(landmarks, frame), BoxOutsideShare(box, frame));
  // Too few points inside the frame for a fit: most of the face is outside.
  return fit.ok ? older : std::max(older, 1.f - kFitMinPoints / 68.f);
}

std::string CutFaceNote(const std::string& what, const faceapi::FaceBox& b, unsigned edges, float outside_share) {
  return absl::StrCat(what, ": the face at (", std::lround(b.x), ",", std::lround(b.y), " ", std::lround(b.w), "x",
                      std::lround(b.h), ") is cut by ", EdgeNames(edges), " of the frame (",
                      std::lround(outside_share * 100), "% of it outside): not swapped");
}

}  // namespace fusion
