#include "models/faceapi/align.h"

#include <algorithm>
#include <cmath>

#include <opencv2/imgproc.hpp>

namespace fusion::faceapi {
namespace {

Point Mean(const Landmarks68& pts, int first, int last) {  // [first, last)
  Point m;
  for (int i = first; i < last; ++i) {
    m.x += pts[i].x;
    m.y += pts[i].y;
  }
  m.x /= (last - first);
  m.y /= (last - first);
  return m;
}

double Dist(Point a, Point b) { return std::hypot(a.x - b.x, a.y - b.y); }

// Canonical positions (fractions of the crop side) of: right-eye centre (image left), left-eye
// centre, nose tip (30), mouth corners (48, 54). The ArcFace 112x112 template, normalised.
constexpr double kTemplate[5][2] = {{38.2946 / 112, 51.6963 / 112}, {73.5318 / 112, 51.5014 / 112},
                                    {56.0252 / 112, 71.7366 / 112}, {41.5493 / 112, 92.3655 / 112},
                                    {70.7299 / 112, 92.2041 / 112}};

}  // namespace

FaceBox DlibAlignBox(const Landmarks68& pts) {
  const Point le = Mean(pts, 36, 42), re = Mean(pts, 42, 48), mo = Mean(pts, 48, 68);
  const double size = std::floor((Dist(mo, le) + Dist(mo, re)) / 2 / 0.45);
  const double rx = (le.x + re.x + mo.x) / 3, ry = (le.y + re.y + mo.y) / 3;
  const double x = std::floor(std::max(0.0, rx - 0.5 * size));
  const double y = std::floor(std::max(0.0, ry - 0.43 * size));
  return {static_cast<float>(x), static_cast<float>(y), static_cast<float>(size), static_cast<float>(size), 1.f};
}

Similarity EstimateSimilarity(const Point* src, const Point* dst, int n) {
  double msx = 0, msy = 0, mdx = 0, mdy = 0;
  for (int i = 0; i < n; ++i) {
    msx += src[i].x; msy += src[i].y; mdx += dst[i].x; mdy += dst[i].y;
  }
  msx /= n; msy /= n; mdx /= n; mdy /= n;
  // For 2-D similarity the least-squares solution is closed form: with centred points,
  // a = sum(s.d)/sum(|s|^2), b = sum(s x d)/sum(|s|^2).
  double dot = 0, cross = 0, norm = 0;
  for (int i = 0; i < n; ++i) {
    const double sx = src[i].x - msx, sy = src[i].y - msy, dx = dst[i].x - mdx, dy = dst[i].y - mdy;
    dot += sx * dx + sy * dy;
    cross += sx * dy - sy * dx;
    norm += sx * sx + sy * sy;
  }
  const double a = norm > 0 ? dot / norm : 1, b = norm > 0 ? cross / norm : 0;
  return {a, -b, mdx - (a * msx - b * msy), b, a, mdy - (b * msx + a * msy)};
}

Similarity SimilarityFromLandmarks(const Landmarks68& pts, int size) {
  const Point src[5] = {Mean(pts, 36, 42), Mean(pts, 42, 48), pts[30], pts[48], pts[54]};
  Point dst[5];
  for (int i = 0; i < 5; ++i) {
    dst[i] = {static_cast<float>(kTemplate[i][0] * size), static_cast<float>(kTemplate[i][1] * size)};
  }
  return EstimateSimilarity(src, dst, 5);
}

cv::Mat AlignFace(const cv::Mat& rgb, const Landmarks68& pts, int size) {
  const Similarity s = SimilarityFromLandmarks(pts, size);
  const cv::Mat m = (cv::Mat_<double>(2, 3) << s[0], s[1], s[2], s[3], s[4], s[5]);
  cv::Mat out;
  cv::warpAffine(rgb, out, m, cv::Size(size, size), cv::INTER_LINEAR, cv::BORDER_CONSTANT, cv::Scalar::all(0));
  return out;
}

}  // namespace fusion::faceapi
