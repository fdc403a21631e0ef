// Face tracking geometry (face_track.h).
#include "geometry/face_track.h"

#include <algorithm>
#include <cmath>

#include <opencv2/imgproc.hpp>

namespace fusion::geometry {

faceapi::Point PointsCentre(const faceapi::Landmarks68& l) {
  double x = 0, y = 0;
  for (const faceapi::Point& p : l) x += p.x, y += p.y;
  return {static_cast<float>(x / l.size()), static_cast<float>(y / l.size())};
}

float PointsSpread(const faceapi::Landmarks68& l) {
  // Twice the RMS distance to the centre: every point weighs in, so the landmark net's noise on
  // one point hardly moves it (a bounding box's width follows its two extreme points).
  const faceapi::Point c = PointsCentre(l);
  double sum = 0;
  for (const faceapi::Point& p : l) sum += (p.x - c.x) * (p.x - c.x) + (p.y - c.y) * (p.y - c.y);
  return std::max(2.0f * static_cast<float>(std::sqrt(sum / l.size())), 1.f);
}

BoxRelation RelationOf(const faceapi::FaceBox& box, const faceapi::Landmarks68& l) {
  const faceapi::Point c = PointsCentre(l);
  const float s = PointsSpread(l);
  return {(box.x + box.w / 2 - c.x) / s, (box.y + box.h / 2 - c.y) / s, box.w / s, box.h / s};
}

faceapi::FaceBox BoxFrom(const BoxRelation& rel, const faceapi::Landmarks68& l) {
  const faceapi::Point c = PointsCentre(l);
  const float s = PointsSpread(l);
  const float w = rel.w * s, h = rel.h * s;
  return {c.x + rel.dx * s - w / 2, c.y + rel.dy * s - h / 2, w, h, 0.f};
}

faceapi::Landmarks68 Extrapolate(const faceapi::Landmarks68& before, const faceapi::Landmarks68& now) {
  const faceapi::Point c0 = PointsCentre(before), c1 = PointsCentre(now);
  const float k = std::clamp(PointsSpread(now) / PointsSpread(before), 1 / kMaxPredictedScaleStep, kMaxPredictedScaleStep);
  faceapi::Landmarks68 next;
  for (size_t i = 0; i < now.size(); ++i) {
    next[i] = {c1.x + (c1.x - c0.x) + (now[i].x - c1.x) * k, c1.y + (c1.y - c0.y) + (now[i].y - c1.y) * k};
  }
  return next;
}

namespace {

cv::Point2f EyeCentre(const faceapi::Landmarks68& l, int first) {
  cv::Point2f c(0, 0);
  for (int i = first; i < first + 6; ++i) c += cv::Point2f(l[i].x, l[i].y);
  return c / 6.f;
}

}  // namespace

cv::Mat FacePatch(const cv::Mat& image, const faceapi::Landmarks68& l) {
  // The similarity that maps the eye centres to (14, 18) and (34, 18): the patch spans the face
  // from the brows to below the mouth.
  const cv::Point2f a = EyeCentre(l, 36), b = EyeCentre(l, 42);
  const cv::Point2f d = b - a;
  const double len = std::max(1e-3, static_cast<double>(std::hypot(d.x, d.y)));
  const double scale = 20.0 / len;
  const double cs = scale * d.x / len, sn = scale * d.y / len;
  // [cs sn; -sn cs] rotates the eye line level and scales it to 20 px; a goes to (14, 18).
  cv::Matx23d m(cs, sn, 0, -sn, cs, 0);
  m(0, 2) = 14 - (cs * a.x + sn * a.y);
  m(1, 2) = 18 - (-sn * a.x + cs * a.y);
  cv::Mat patch;
  cv::warpAffine(image, patch, m, cv::Size(kPatchSide, kPatchSide), cv::INTER_LINEAR, cv::BORDER_REPLICATE);
  if (patch.channels() == 3) cv::cvtColor(patch, patch, cv::COLOR_BGR2GRAY);
  patch.convertTo(patch, CV_32F);
  patch -= cv::mean(patch)[0];
  const double norm = cv::norm(patch);
  if (norm > 1e-6) patch /= norm;
  return patch;
}

float PatchSimilarity(const cv::Mat& a, const cv::Mat& b) {
  if (a.empty() || b.empty() || a.size() != b.size()) return -1.f;
  return static_cast<float>(a.dot(b));
}

cv::Mat Thumbnail(const cv::Mat& bgr) {
  cv::Mat small, gray;
  const int w = 160, h = std::max(1, bgr.rows * w / std::max(1, bgr.cols));
  cv::resize(bgr, small, cv::Size(w, h), 0, 0, cv::INTER_AREA);
  cv::cvtColor(small, gray, cv::COLOR_BGR2GRAY);
  return gray;
}

double MeanDifference(const cv::Mat& a, const cv::Mat& b) {
  cv::Mat d;
  cv::absdiff(a, b, d);
  return cv::mean(d)[0];
}

double HistogramDistance(const cv::Mat& a, const cv::Mat& b) {
  const int bins = 32;
  const float range[] = {0, 256};
  const float* ranges[] = {range};
  const int channel = 0;
  cv::Mat ha, hb;
  cv::calcHist(&a, 1, &channel, cv::Mat(), ha, 1, &bins, ranges);
  cv::calcHist(&b, 1, &channel, cv::Mat(), hb, 1, &bins, ranges);
  return cv::compareHist(ha, hb, cv::HISTCMP_BHATTACHARYYA);
}

bool IsSceneCut(const cv::Mat& previous, const cv::Mat& current) {
  if (previous.empty() || previous.size() != current.size()) return true;
  return MeanDifference(previous, current) > kCutMeanDifference &&
         HistogramDistance(previous, current) > kCutHistogramDistance;
}

faceapi::Landmarks68 OneEuroPoints::Filter(const faceapi::Landmarks68& raw, double dt_s) {
  const faceapi::Point c = PointsCentre(raw);
  const double s = PointsSpread(raw);
  if (!started_ || dt_s <= 0) {
    started_ = true;
    cx_ = c.x, cy_ = c.y, s_ = s;
    for (size_t i = 0; i < raw.size(); ++i) shape_[i] = {static_cast<float>((raw[i].x - c.x) / s), static_cast<float>((raw[i].y - c.y) / s)};
    speed_ = shape_speed_ = 0;
    vx_ = vy_ = vs_ = 0;
    return raw;
  }
  const auto alpha = [dt_s](double cutoff_hz) {
    const double tau = 1.0 / (2 * M_PI * cutoff_hz);
    return 1.0 / (1.0 + tau / dt_s);
  };
  // The pose (centre, spread) as an alpha-beta filter with constant velocity: a face that keeps
  // moving is predicted, not lagged behind; the gain rises with the surprise (how far the points
  // land from the prediction, face widths per second), as One-Euro's cutoff rises with speed.
  const double px = cx_ + vx_ * dt_s, py = cy_ + vy_ * dt_s, ps = s_ + vs_ * dt_s;
  const double rx = c.x - px, ry = c.y - py, rs = s - ps;
  const double surprise = (std::hypot(rx, ry) + std::abs(rs)) / s_;
  speed_ += alpha(p_.d_cutoff_hz) * (surprise / dt_s - speed_);
  const double a = alpha(p_.min_cutoff_hz + p_.beta * speed_);
  const double g = a * a / (2 - a);  // the velocity gain of a critically damped alpha-beta filter
  cx_ = px + a * rx, cy_ = py + a * ry, s_ = ps + a * rs;
  vx_ += g * rx / dt_s, vy_ += g * ry / dt_s, vs_ += g * rs / dt_s;
  // The shape: the points about the centre over the spread, its speed in face widths per second.
  faceapi::Landmarks68 n;
  double changed = 0;
  for (size_t i = 0; i < raw.size(); ++i) {
    n[i] = {static_cast<float>((raw[i].x - c.x) / s), static_cast<float>((raw[i].y - c.y) / s)};
    changed += std::hypot(n[i].x - shape_[i].x, n[i].y - shape_[i].y);
  }
  shape_speed_ += alpha(p_.d_cutoff_hz) * (changed / raw.size() / dt_s - shape_speed_);
  const float b = static_cast<float>(alpha(p_.shape_cutoff_hz + p_.shape_beta * shape_speed_));
  faceapi::Landmarks68 out;
  for (size_t i = 0; i < raw.size(); ++i) {
    shape_[i].x += b * (n[i].x - shape_[i].x);
    shape_[i].y += b * (n[i].y - shape_[i].y);
    out[i] = {static_cast<float>(cx_ + s_ * shape_[i].x), static_cast<float>(cy_ + s_ * shape_[i].y)};
  }
  return out;
}

}  // namespace fusion::geometry
