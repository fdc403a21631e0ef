// Upside-down check (upside_down.h).
#include "models/faceapi/upside_down.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>

#include "models/faceapi/image.h"
#include "base/status_macros.h"

namespace fusion::faceapi {
namespace {

// Mean of `grey` inside the convex polygon of points a..b of `pts` moved by `shift` (grey's
// pixels; 0 when the polygon covers no pixel of it).
double MeanIn(const cv::Mat& grey, const Landmarks68& pts, int a, int b, cv::Point2f shift, cv::Point2f origin) {
  std::vector<cv::Point> poly;
  for (int i = a; i <= b; ++i) {
    poly.emplace_back(cvRound(pts[i].x + shift.x - origin.x), cvRound(pts[i].y + shift.y - origin.y));
  }
  cv::Mat mask(grey.size(), CV_8U, cv::Scalar(0));
  cv::fillConvexPoly(mask, poly, cv::Scalar(255));
  if (cv::countNonZero(mask) == 0) return 0;
  return cv::mean(grey, mask)[0];
}

}  // namespace

float EyeContrast(const cv::Mat& rgb, const Landmarks68& p, const FaceBox& box) {
  if (rgb.empty() || rgb.type() != CV_8UC3) return 0;
  // The neighbourhood read: the box and the points, clipped to the image.
  float x0 = box.x, y0 = box.y, x1 = box.x + box.w, y1 = box.y + box.h;
  for (const Point& q : p) {
    x0 = std::min(x0, q.x), y0 = std::min(y0, q.y), x1 = std::max(x1, q.x), y1 = std::max(y1, q.y);
  }
  const cv::Rect near = cv::Rect(cv::Point(static_cast<int>(std::floor(x0)) - 1, static_cast<int>(std::floor(y0)) - 1),
                                 cv::Point(static_cast<int>(std::ceil(x1)) + 2, static_cast<int>(std::ceil(y1)) + 2)) &
                        cv::Rect(0, 0, rgb.cols, rgb.rows);
  if (near.empty()) return 0;
  cv::Mat grey;
  cv::cvtColor(rgb(near), grey, cv::COLOR_RGB2GRAY);
  const cv::Point2f origin(static_cast<float>(near.x), static_cast<float>(near.y));
  const cv::Point2f le((p[36].x + p[39].x) / 2, (p[36].y + p[39].y) / 2), re((p[42].x + p[45].x) / 2, (p[42].y + p[45].y) / 2);
  const cv::Point2f mouth((p[48].x + p[54].x) / 2, (p[48].y + p[54].y) / 2);
  const cv::Point2f down = (mouth - (le + re) * 0.5f) * 0.35f;
  const double eyes = (MeanIn(grey, p, 36, 41, {0, 0}, origin) + MeanIn(grey, p, 42, 47, {0, 0}, origin)) / 2;
  const double cheeks = (MeanIn(grey, p, 36, 41, down, origin) + MeanIn(grey, p, 42, 47, down, origin)) / 2;
  // The spread over the box (the landmark net's crop, CropBox), inside `near`.
  Point crop_origin;
  const cv::Mat crop = CropBox(rgb, box, &crop_origin);
  double sd = 1;
  if (!crop.empty()) {
    const cv::Rect in = cv::Rect(static_cast<int>(crop_origin.x) - near.x, static_cast<int>(crop_origin.y) - near.y,
                                 crop.cols, crop.rows) &
                        cv::Rect(0, 0, grey.cols, grey.rows);
    if (!in.empty()) {
      cv::Scalar mean, dev;
      cv::meanStdDev(grey(in), mean, dev);
      sd = std::max(1.0, dev[0]);
    }
  }
  return static_cast<float>((cheeks - eyes) / sd);
}

float DetectorUpsideDownLogit(const FaceOrientation& o) {
  auto logit = [](float s) {
    const double q = std::clamp(static_cast<double>(s), 1e-4, 1 - 1e-4);
    return std::log(q / (1 - q));
  };
  return static_cast<float>(logit(o.scores[2]) - logit(o.scores[0]));
}

absl::StatusOr<Landmarks68> DetectTurned180(const FaceLandmark68Net& net, const cv::Mat& rgb, const FaceBox& box) {
  Point origin;
  const cv::Mat crop = CropBox(rgb, box, &origin);
  if (crop.empty()) return net.Detect(rgb, box);  // its error for a box outside the image
  cv::Mat turned;
  cv::rotate(crop, turned, cv::ROTATE_180);
  const float w = static_cast<float>(turned.cols), h = static_cast<float>(turned.rows);
  ASSIGN_OR_RETURN(Landmarks68 pts, net.Detect(turned, {0, 0, w, h, box.score}));
  // Detect's points are continuous (a pixel i spans [i, i + 1]): the turn maps x to w - x.
  for (Point& q : pts) q = {origin.x + w - q.x, origin.y + h - q.y};
  return pts;
}

}  // namespace fusion::faceapi
