// The tracking geometry (face_track.h) on made points and images: no model.
#include <gtest/gtest.h>

#include <cmath>

#include <opencv2/imgproc.hpp>

#include "geometry/face_track.h"
#include "geometry/frame_edge.h"

namespace fusion::geometry {
namespace {

// The mean face (frame_edge.h) `scale` px per unit about (cx, cy), turned by `deg`.
faceapi::Landmarks68 Face(float cx, float cy, float scale, float deg = 0) {
  const std::vector<cv::Point2f> mean = MeanFacePoints();
  const float c = std::cos(deg * static_cast<float>(M_PI) / 180), s = std::sin(deg * static_cast<float>(M_PI) / 180);
  faceapi::Landmarks68 l;
  for (size_t i = 0; i < l.size(); ++i) {
    l[i] = {cx + scale * (c * mean[i].x - s * mean[i].y), cy + scale * (s * mean[i].x + c * mean[i].y)};
  }
  return l;
}

// A textured gray image: smoothed noise, the same for a seed.
cv::Mat Texture(int w, int h, int seed) {
  cv::Mat m(h, w, CV_8U);
  cv::RNG rng(seed);
  rng.fill(m, cv::RNG::UNIFORM, 0, 256);
  cv::GaussianBlur(m, m, cv::Size(0, 0), 2.5);
  cv::normalize(m, m, 0, 255, cv::NORM_MINMAX);
  return m;
}

TEST(FaceTrack, TheBoxFollowsThePointsItWasMeasuredOn) {
  const faceapi::Landmarks68 l = Face(200, 150, 40);
  const faceapi::FaceBox box{140, 80, 125, 150, 0.9f};
  const BoxRelation rel = RelationOf(box, l);
  const faceapi::FaceBox same = BoxFrom(rel, l);
  EXPECT_NEAR(same.x, box.x, 1e-3);
  EXPECT_NEAR(same.y, box.y, 1e-3);
  EXPECT_NEAR(same.w, box.w, 1e-3);
  EXPECT_NEAR(same.h, box.h, 1e-3);
  // The face 30 px right, 10 px down and 1.5 times larger: the box moves and grows with it
  // about the points' centre.
  const faceapi::FaceBox moved = BoxFrom(rel, Face(230, 160, 60));
  const faceapi::Point c = PointsCentre(l);
  EXPECT_NEAR(moved.w, 1.5f * box.w, 1e-2);
  EXPECT_NEAR(moved.h, 1.5f * box.h, 1e-2);
  EXPECT_NEAR(moved.x + moved.w / 2, 30 + c.x + 1.5f * (box.x + box.w / 2 - c.x), 1e-2);
  EXPECT_NEAR(moved.y + moved.h / 2, 10 + c.y + 1.5f * (box.y + box.h / 2 - c.y), 1e-2);
}

TEST(FaceTrack, ExtrapolationContinuesTheMotionAndTheScaling) {
  const faceapi::Landmarks68 next = Extrapolate(Face(100, 100, 40), Face(110, 95, 42));
  const faceapi::Landmarks68 want = Face(120, 90, 44.1f);
  for (size_t i = 0; i < next.size(); ++i) {
    EXPECT_NEAR(next[i].x, want[i].x, 0.05) << i;
    EXPECT_NEAR(next[i].y, want[i].y, 0.05) << i;
  }
  // A jump in size (a wrong fit) is not carried on beyond 5%, growing or shrinking.
  EXPECT_NEAR(PointsSpread(Extrapolate(Face(100, 100, 40), Face(100, 100, 80))),
              1.05f * PointsSpread(Face(100, 100, 80)), 0.01);
  EXPECT_NEAR(PointsSpread(Extrapolate(Face(100, 100, 80), Face(100, 100, 40))),
              PointsSpread(Face(100, 100, 40)) / 1.05f, 0.01);
}

TEST(FaceTrack, ThePatchOfTheSameFaceMatchesMovedTurnedAndScaled) {
  const cv::Mat image = Texture(640, 480, 7);
  const cv::Mat a = FacePatch(image, Face(300, 240, 40));
  EXPECT_NEAR(cv::norm(a), 1.0, 1e-4);
  EXPECT_NEAR(cv::mean(a)[0], 0.0, 1e-4);
  EXPECT_NEAR(PatchSimilarity(a, a), 1.0, 1e-5);
  // The image moved by (12, -7), turned by 10 degrees and scaled by 1.2 about the face: the
  // points moved the same way give the same patch up to resampling.
  cv::Matx23d m = cv::getRotationMatrix2D(cv::Point2f(300, 240), -10, 1.2);
  m(0, 2) += 12;
  m(1, 2) += -7;
  cv::Mat warped;
  cv::warpAffine(image, warped, m, image.size(), cv::INTER_LINEAR, cv::BORDER_REFLECT);
  const cv::Mat b = FacePatch(warped, Face(312, 233, 48, 10));
  EXPECT_GT(PatchSimilarity(a, b), 0.9f);
  // The points 60 px beside the face (on other texture) and another image: no match.
  EXPECT_LT(PatchSimilarity(a, FacePatch(image, Face(360, 240, 40))), 0.3f);
  EXPECT_LT(PatchSimilarity(a, FacePatch(Texture(640, 480, 8), Face(300, 240, 40))), 0.3f);
  EXPECT_EQ(PatchSimilarity(a, cv::Mat()), -1.f);
}

TEST(FaceTrack, ACutIsALargeChangeOfLevelsAndHistogramAtOnce) {
  cv::Mat bgr_a, bgr_b;
  cv::cvtColor(Texture(640, 360, 1), bgr_a, cv::COLOR_GRAY2BGR);
  // A pan: the same texture shifted by 40 px changes the levels a lot, the histogram hardly.
  cv::Mat shifted = cv::Mat::zeros(360, 640, CV_8UC3);
  bgr_a(cv::Rect(40, 0, 600, 360)).copyTo(shifted(cv::Rect(0, 0, 600, 360)));
  bgr_a(cv::Rect(0, 0, 40, 360)).copyTo(shifted(cv::Rect(600, 0, 40, 360)));
  const cv::Mat ta = Thumbnail(bgr_a), tpan = Thumbnail(shifted);
  EXPECT_EQ(ta.cols, 160);
  EXPECT_EQ(ta.rows, 90);
  EXPECT_FALSE(IsSceneCut(ta, tpan));
  EXPECT_FALSE(IsSceneCut(ta, ta));
  EXPECT_EQ(MeanDifference(ta, ta), 0.0);
  // Another picture, darker: both measures jump.
  cv::Mat other = Texture(640, 360, 2) * 0.5;
  cv::cvtColor(other, bgr_b, cv::COLOR_GRAY2BGR);
  const cv::Mat tb = Thumbnail(bgr_b);
  EXPECT_GT(MeanDifference(ta, tb), kCutMeanDifference);
  EXPECT_GT(HistogramDistance(ta, tb), kCutHistogramDistance);
  EXPECT_TRUE(IsSceneCut(ta, tb));
  EXPECT_TRUE(IsSceneCut(cv::Mat(), tb));  // the first frame starts afresh
}

TEST(FaceTrack, OneEuroHoldsAStillFaceAndFollowsAMovingOne) {
  cv::RNG rng(3);
  const auto noisy = [&](float cx) {
    faceapi::Landmarks68 l = Face(cx, 200, 40);
    for (faceapi::Point& p : l) p.x += static_cast<float>(rng.gaussian(1.0)), p.y += static_cast<float>(rng.gaussian(1.0));
    return l;
  };
  const double dt = 1.0 / 30;
  // Still: the steadied points move far less from frame to frame than the raw ones.
  OneEuroPoints still;
  faceapi::Landmarks68 prev_raw = noisy(300), prev = still.Filter(prev_raw, dt);
  EXPECT_EQ(prev[0].x, prev_raw[0].x);  // the first call passes through
  double raw_jitter = 0, jitter = 0;
  for (int t = 1; t < 60; ++t) {
    const faceapi::Landmarks68 raw = noisy(300);
    const faceapi::Landmarks68 out = still.Filter(raw, dt);
    if (t >= 10) {
      for (size_t i = 0; i < out.size(); ++i) {
        raw_jitter += std::hypot(raw[i].x - prev_raw[i].x, raw[i].y - prev_raw[i].y);
        jitter += std::hypot(out[i].x - prev[i].x, out[i].y - prev[i].y);
      }
    }
    prev_raw = raw;
    prev = out;
  }
  EXPECT_LT(jitter, 0.35 * raw_jitter);
  // Moving at 6 px a frame (about 1.7 face widths a second): after 20 frames the steadied centre
  // trails the true one by under 3 px (a filter tuned only for stillness lags by tens).
  OneEuroPoints moving;
  faceapi::Landmarks68 out;
  for (int t = 0; t < 20; ++t) out = moving.Filter(noisy(100 + 6.f * t), dt);
  EXPECT_LT(std::abs(PointsCentre(out).x - PointsCentre(Face(100 + 6.f * 19, 200, 40)).x), 3.f);
  moving.Reset();
  const faceapi::Landmarks68 fresh = noisy(500);
  EXPECT_EQ(moving.Filter(fresh, dt)[5].x, fresh[5].x);
}

}  // namespace
}  // namespace fusion::geometry
