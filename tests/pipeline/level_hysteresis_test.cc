// FindLandmarks' roll hysteresis (DetectedFace::levelled, faceapi/level_roll.h) with the real
// networks: Grace Hopper turned by 20 degrees is under kLevelMinDeg, so an image job looks at her
// as she is; a video track that was looked at level in the frame before looks at her level again
// (from kLevelKeepDeg), so a face rolled by about 25 degrees keeps one shape from frame to frame.
#include <gtest/gtest.h>

#include <cmath>

#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "loader/model_store.h"
#include "models/faceapi/level_roll.h"
#include "pipeline/stages.h"
#include "pipeline_env.h"
#include "host_copy.h"

namespace fusion {
namespace {

// Grace turned by `deg` degrees about the photo's centre (counter-clockwise on screen), detected.
Picture Turned(double deg) {
  const cv::Mat bgr = Decode(Grace(), cv::IMREAD_COLOR);
  cv::Mat turned;
  const cv::Mat m = cv::getRotationMatrix2D(cv::Point2f(bgr.cols / 2.f, bgr.rows / 2.f), deg, 1.0);
  cv::warpAffine(bgr, turned, m, bgr.size(), cv::INTER_LINEAR, cv::BORDER_REFLECT);
  Picture p;
  p.what = "target image";
  p.bgr = turned;
  cv::cvtColor(turned, p.rgb, cv::COLOR_BGR2RGB);
  EXPECT_TRUE(DetectFaces(*HostCopyOf("ssd_mobilenetv1"), 0, DetectSettings{}, p).ok());
  return p;
}

double MeanPointDistance(const faceapi::Landmarks68& a, const faceapi::Landmarks68& b) {
  double sum = 0;
  for (size_t i = 0; i < a.size(); ++i) sum += std::hypot(a[i].x - b[i].x, a[i].y - b[i].y);
  return sum / a.size();
}

TEST(LevelHysteresis, ATrackLookedAtLevelKeepsBeingLookedAtLevelUnderTheThreshold) {
  Picture as_is = Turned(20);
  ASSERT_EQ(as_is.faces.size(), 1u);
  Picture kept = as_is;
  kept.faces[0].levelled = true;  // the track was looked at level in the frame before
  ASSERT_TRUE(FindLandmarks(*HostCopyOf("face_landmark_68"), as_is).ok());
  ASSERT_TRUE(FindLandmarks(*HostCopyOf("face_landmark_68"), kept).ok());
  const float roll = std::fabs(faceapi::EyeLineDeg(as_is.faces[0].landmarks));
  std::printf("turned 20 degrees: eye line %.1f degrees; points %.2f px apart as is / looked at level\n", roll,
              MeanPointDistance(as_is.faces[0].landmarks, kept.faces[0].landmarks));
  ASSERT_GT(roll, faceapi::kLevelKeepDeg);
  ASSERT_LT(roll, faceapi::kLevelMinDeg);
  EXPECT_FALSE(as_is.faces[0].levelled);
  EXPECT_TRUE(kept.faces[0].levelled);
  EXPECT_GT(MeanPointDistance(as_is.faces[0].landmarks, kept.faces[0].landmarks), 0.5);
  // Turned by 35 degrees the face is looked at level either way, and the flag says so.
  Picture steep = Turned(35);
  ASSERT_EQ(steep.faces.size(), 1u);
  ASSERT_TRUE(FindLandmarks(*HostCopyOf("face_landmark_68"), steep).ok());
  EXPECT_TRUE(steep.faces[0].levelled);
}

}  // namespace
}  // namespace fusion
