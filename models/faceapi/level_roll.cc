// Roll-levelled landmarks (level_roll.h).
#include "models/faceapi/level_roll.h"

#include <algorithm>
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
                                              const Landmarks68& first, int rounds, float min_deg, bool* levelled) {
  Landmarks68 pts = first;
  double roll = EyeLineDeg(pts);
  // Under min_deg: upright enough; over 90 degrees: upside down, the upside-down check's.
  const bool level = std::fabs(roll) >= min_deg && std::fabs(roll) <= 90;
  if (levelled != nullptr) *levelled = level;
  if (!level) return pts;
  // The canvas: the box's size, scaled down to kLevelCanvasPx on its longer side.
  const double k = std::min(1.0, kLevelCanvasPx / std::max(1.0f, std::max(box.w, box.h)));
  const int cw = std::max(1, static_cast<int>(std::lround(box.w * k))), ch = std::max(1, static_cast<int>(std::lround(box.h * k)));
  const double cx = box.x + box.w / 2.0, cy = box.y + box.h / 2.0;
  // The image square around the box's centre that holds the box turned any way, scaled by k
  // (INTER_AREA: the net sees ~112 px of a face that may be thousands wide).
  const double side = std::hypot(box.w, box.h) + 2;
  const cv::Rect around = cv::Rect(static_cast<int>(std::floor(cx - side / 2)), static_cast<int>(std::floor(cy - side / 2)),
                                   static_cast<int>(std::ceil(side)), static_cast<int>(std::ceil(side))) &
                          cv::Rect(0, 0, rgb.cols, rgb.rows);
  if (around.empty()) return pts;
  cv::Mat small;
  if (k < 1) {
    cv::resize(rgb(around), small, cv::Size(std::max(1, static_cast<int>(std::lround(around.width * k))),
                                            std::max(1, static_cast<int>(std::lround(around.height * k)))),
               0, 0, cv::INTER_AREA);
  } else {
    small = rgb(around);
  }
  const double sx = static_cast<double>(small.cols) / around.width, sy = static_cast<double>(small.rows) / around.height;
  double turned = 0;  // degrees counter-clockwise the canvas is turned from the image
  for (int round = 0; round < rounds; ++round) {
    if (std::fabs(roll - turned) < kLevelResidualDeg) break;  // the canvas is level enough
    turned = roll;
    // `small` -> canvas: turn by `turned` about the box's centre, which lands on the canvas's.
    const cv::Point2f c(static_cast<float>((cx - around.x) * sx), static_cast<float>((cy - around.y) * sy));
    cv::Mat m = cv::getRotationMatrix2D(c, turned, 1.0);
    m.at<double>(0, 2) += cw / 2.0 - c.x;
    m.at<double>(1, 2) += ch / 2.0 - c.y;
    cv::Mat canvas;
    cv::warpAffine(small, canvas, m, cv::Size(cw, ch), cv::INTER_LINEAR, cv::BORDER_CONSTANT, cv::Scalar::all(0));
    absl::StatusOr<Landmarks68> level =
        net.Detect(canvas, {0, 0, static_cast<float>(cw), static_cast<float>(ch), box.score});
    if (!level.ok()) return level.status();
    cv::Mat back;
    cv::invertAffineTransform(m, back);
    const double* b = back.ptr<double>(0);
    for (size_t i = 0; i < pts.size(); ++i) {
      const Point q = (*level)[i];
      const double u = b[0] * q.x + b[1] * q.y + b[2], v = b[3] * q.x + b[4] * q.y + b[5];  // `small` px
      pts[i] = {static_cast<float>(around.x + u / sx), static_cast<float>(around.y + v / sy)};
    }
    roll = EyeLineDeg(pts);
  }
  return pts;
}

}  // namespace fusion::faceapi
