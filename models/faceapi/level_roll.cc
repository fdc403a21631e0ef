// Roll-levelled landmarks (level_roll.h).
#include "models/faceapi/level_roll.h"

#include <cmath>

#include <opencv2/imgproc.hpp>

namespace fusion::faceapi {
namespace {

Point Mean(const Landmarks68& pts, int first, int last) {
  Point m;
  for (int i = first; i <= last; ++i) m.x += pts[i].x, m.y += pts[i].y;
  const float n = static_cast<float>(last - first + 1);
  return {m.x / n, m.y / n};
}

}  // namespace

float EyeLineDeg(const Landmarks68& pts) {
  const Point r = Mean(pts, 36, 41), l = Mean(pts, 42, 47);
  return static_cast<float>(std::atan2(l.y - r.y, l.x - r.x) * 180.0 / CV_PI);
}

absl::StatusOr<Landmarks68> LevelledLandmarks(const FaceLandmark68Net& net, const cv::Mat& rgb, const FaceBox& box,
                                              const Landmarks68& first, int rounds) {
  Landmarks68 pts = first;
  const int w = std::max(1, static_cast<int>(std::lround(box.w))), h = std::max(1, static_cast<int>(std::lround(box.h)));
  const double cx = box.x + box.w / 2.0, cy = box.y + box.h / 2.0;
  double roll = EyeLineDeg(pts);
  if (std::fabs(roll) < kLevelMinDeg) return pts;
  double turned = 0;  // degrees counter-clockwise the canvas is turned from the image
  for (int round = 0; round < rounds; ++round) {
    if (std::fabs(roll - turned) < kLevelResidualDeg) break;  // the canvas is level enough
    turned = roll;
    // Image -> canvas: turn by `turned` about the box's centre, which lands on the canvas's.
    cv::Mat m = cv::getRotationMatrix2D(cv::Point2f(static_cast<float>(cx), static_cast<float>(cy)), turned, 1.0);
    m.at<double>(0, 2) += w / 2.0 - cx;
    m.at<double>(1, 2) += h / 2.0 - cy;
    cv::Mat canvas;
    cv::warpAffine(rgb, canvas, m, cv::Size(w, h), cv::INTER_LINEAR, cv::BORDER_CONSTANT, cv::Scalar::all(0));
    absl::StatusOr<Landmarks68> level = net.Detect(canvas, {0, 0, static_cast<float>(w), static_cast<float>(h), box.score});
    if (!level.ok()) return level.status();
    cv::Mat back;
    cv::invertAffineTransform(m, back);
    const double* b = back.ptr<double>(0);
    for (size_t i = 0; i < pts.size(); ++i) {
      const Point q = (*level)[i];
      pts[i] = {static_cast<float>(b[0] * q.x + b[1] * q.y + b[2]), static_cast<float>(b[3] * q.x + b[4] * q.y + b[5])};
    }
    roll = EyeLineDeg(pts);
  }
  return pts;
}

}  // namespace fusion::faceapi
