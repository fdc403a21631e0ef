// The blotch metric (models/quality/blotch.h) on made images with known answers.
#include "models/quality/blotch.h"

#include <gtest/gtest.h>

#include <opencv2/imgproc.hpp>

namespace fusion::quality {
namespace {

// A warm skin-like flat target with a gentle horizontal gradient.
cv::Mat Skin() {
  cv::Mat m(400, 400, CV_8UC3);
  for (int y = 0; y < m.rows; ++y) {
    for (int x = 0; x < m.cols; ++x) m.at<cv::Vec3b>(y, x) = cv::Vec3b(120 + x / 20, 150, 210);
  }
  return m;
}

TEST(Blotch, TheTargetItselfHasNoBlotches) {
  const cv::Mat t = Skin();
  auto s = ScoreBlotches(t, t, {100, 100, 120, 120});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->fraction, 0.0);
  EXPECT_LT(s->p995, 1.0);
}

TEST(Blotch, ACyanSpotCountsExactlyItsShareOfTheInnerBox) {
  const cv::Mat t = Skin();
  cv::Mat r = t.clone();
  // Box 120x120 at (100,100): inner box (120,120)-(200,200), 80x80 = 6400 px. A 20x40 cyan
  // patch inside it is 800 px = 12.5%.
  r(cv::Rect(130, 140, 20, 40)).setTo(cv::Scalar(230, 200, 60));
  auto s = ScoreBlotches(r, t, {100, 100, 120, 120});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_DOUBLE_EQ(s->fraction, 800.0 / 6400.0);
  EXPECT_GT(s->p995, 60.0);
  // The same patch outside the inner box (in the outer sixth) does not count.
  cv::Mat edge = t.clone();
  edge(cv::Rect(100, 100, 19, 19)).setTo(cv::Scalar(230, 200, 60));
  EXPECT_EQ(ScoreBlotches(edge, t, {100, 100, 120, 120})->fraction, 0.0);
}

TEST(Blotch, LuminanceChangesAreNotBlotches) {
  const cv::Mat t = Skin();
  cv::Mat r;
  t.convertTo(r, CV_8UC3, 0.8);  // darker, same chromaticity: a, b move only a little
  auto s = ScoreBlotches(r, t, {100, 100, 120, 120});
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->fraction, 0.0);
}

TEST(Blotch, BadInputIsInvalidArgument) {
  const cv::Mat t = Skin();
  EXPECT_EQ(ScoreBlotches(t, cv::Mat(10, 10, CV_8UC3), {0, 0, 5, 5}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ScoreBlotches(t, t, {500, 500, 50, 50}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ScoreBlotches(t, t, {10, 10, 0, 40}).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace fusion::quality
