// Made faces cut by the frame edge, with a known truth (frame_edge_test.cc, bench/edge): a photo
// rolled about a face's centre and framed so that a chosen share of the face's box, rotated with
// it, lies beyond one frame edge. Header-only, OpenCV only. Test and bench use only.
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>

namespace fusion::made_cut {

enum Side { kLeft, kRight, kTop, kBottom };
inline const char* SideName(Side s) {
  static const char* names[] = {"left", "right", "top", "bottom"};
  return names[s];
}

inline cv::Rect2f Bound(const std::vector<cv::Point2f>& poly) {
  if (poly.empty()) return {};
  float x0 = poly[0].x, x1 = x0, y0 = poly[0].y, y1 = y0;
  for (const cv::Point2f& p : poly) {
    x0 = std::min(x0, p.x), x1 = std::max(x1, p.x), y0 = std::min(y0, p.y), y1 = std::max(y1, p.y);
  }
  return {x0, y0, x1 - x0, y1 - y0};
}

inline double Area(const std::vector<cv::Point2f>& poly) {
  return poly.size() < 3 ? 0 : std::abs(cv::contourArea(poly));
}

// The part of the convex `poly` whose coordinate `axis` (0 x, 1 y) is <= t (keep_below) or >= t.
inline std::vector<cv::Point2f> ClipHalf(const std::vector<cv::Point2f>& poly, int axis, float t, bool keep_below) {
  std::vector<cv::Point2f> out;
  auto coord = [axis](const cv::Point2f& p) { return axis == 0 ? p.x : p.y; };
  auto in = [&](const cv::Point2f& p) { return keep_below ? coord(p) <= t : coord(p) >= t; };
  for (size_t i = 0; i < poly.size(); ++i) {
    const cv::Point2f a = poly[i], b = poly[(i + 1) % poly.size()];
    if (in(a)) out.push_back(a);
    if (in(a) != in(b)) out.push_back(a + (t - coord(a)) / (coord(b) - coord(a)) * (b - a));
  }
  return out;
}

// The part of `poly` inside [0, w] x [0, h].
inline std::vector<cv::Point2f> Inside(const std::vector<cv::Point2f>& poly, cv::Size s) {
  std::vector<cv::Point2f> in = ClipHalf(poly, 0, 0, false);
  in = ClipHalf(in, 0, static_cast<float>(s.width), true);
  in = ClipHalf(in, 1, 0, false);
  return ClipHalf(in, 1, static_cast<float>(s.height), true);
}

inline double ShareOutside(const std::vector<cv::Point2f>& poly, cv::Size s) {
  return 1 - Area(Inside(poly, s)) / Area(poly);
}

struct Made {
  cv::Mat bgr;                    // the made image
  std::vector<cv::Point2f> face;  // the face's box rotated with the photo, made-image pixels
  double truth = 0;               // the share of `face` outside the made image
};

// `bgr` rolled by `roll` degrees (counter-clockwise as seen) about the centre of `box` (the
// whole face), framed with 0.6 face sizes of context (mirrored beyond the photo), and the frame
// edge of `side` placed (whole pixels) so that `share` of the rotated box lies beyond it; share 0:
// not cut.
inline Made Make(const cv::Mat& bgr, const cv::Rect2f& box, double roll, Side side, double share) {
  const cv::Point2f c(box.x + box.width / 2, box.y + box.height / 2);
  const cv::Mat r = cv::getRotationMatrix2D(c, roll, 1.0);
  const std::vector<cv::Point2f> corners = {box.tl(), {box.x + box.width, box.y}, box.br(), {box.x, box.y + box.height}};
  std::vector<cv::Point2f> face;
  cv::transform(corners, face, r);
  const cv::Rect2f bound = Bound(face);
  const float pad = 0.6f * std::max(box.width, box.height);
  float x0 = bound.x - pad, x1 = bound.x + bound.width + pad, y0 = bound.y - pad, y1 = bound.y + bound.height + pad;
  if (share > 0) {
    const int axis = side == kLeft || side == kRight ? 0 : 1;
    const bool below = side == kLeft || side == kTop;  // outside lies below the line
    float lo = axis == 0 ? bound.x : bound.y, hi = axis == 0 ? bound.x + bound.width : bound.y + bound.height;
    for (int i = 0; i < 50; ++i) {  // bisection on the share beyond t
      const float t = (lo + hi) / 2;
      const double s = Area(ClipHalf(face, axis, t, below)) / Area(face);
      ((below ? s < share : s > share) ? lo : hi) = t;
    }
    const float t = std::round((lo + hi) / 2);
    (side == kLeft ? x0 : side == kRight ? x1 : side == kTop ? y0 : y1) = t;
  }
  x0 = std::round(x0), y0 = std::round(y0), x1 = std::round(x1), y1 = std::round(y1);
  cv::Mat m = r.clone();
  m.at<double>(0, 2) -= x0;
  m.at<double>(1, 2) -= y0;
  Made out;
  cv::warpAffine(bgr, out.bgr, m, cv::Size(static_cast<int>(x1 - x0), static_cast<int>(y1 - y0)), cv::INTER_LINEAR,
                 cv::BORDER_REFLECT101);
  for (cv::Point2f& p : face) p -= cv::Point2f(x0, y0);
  out.face = face;
  out.truth = ShareOutside(face, out.bgr.size());
  return out;
}

}  // namespace fusion::made_cut
