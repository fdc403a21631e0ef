// End-to-end classical swap (generator + blend) on real faces: the byte-exact and ratio-0
// guarantees of issue 4, in both blend modes.
#include <gtest/gtest.h>

#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "fusion_fixture.h"
#include "models/blend/blend.h"
#include "models/quality/blotch.h"

namespace fusion::models {
namespace {

struct Case {
  std::string target;
  BlendMode mode;
};

std::string ModeName(BlendMode m) { return m == BlendMode::kFull ? "full" : "simple"; }

void PrintTo(const Case& c, std::ostream* os) { *os << c.target << " " << ModeName(c.mode); }

cv::Mat Load(const std::string& name) {
  const std::string path = testing::FacePath(name);
  EXPECT_FALSE(path.empty()) << name << " missing: run scripts/fetch-models.sh (the setup's fetch step)";
  return path.empty() ? cv::Mat() : cv::imread(path, cv::IMREAD_COLOR);
}

// Max abs difference per region: outside the face hull (the blend writes nothing there; a
// stricter region than the dilated mask), and inside it.
struct Diff {
  double outside = 0, inside = 0, mean_inside = 0;
};

Diff Compare(const cv::Mat& a, const cv::Mat& b, const cv::Mat& hull) {
  cv::Mat d;
  cv::absdiff(a, b, d);
  Diff r;
  cv::Mat dmax = d.reshape(1, d.rows * d.cols);  // per-pixel channels as columns
  cv::reduce(dmax, dmax, 1, cv::REDUCE_MAX);
  dmax = dmax.reshape(1, d.rows);
  cv::minMaxLoc(dmax, nullptr, &r.outside, nullptr, nullptr, hull == 0);
  cv::minMaxLoc(dmax, nullptr, &r.inside, nullptr, nullptr, hull);
  r.mean_inside = cv::mean(dmax, hull)[0];
  return r;
}

class SwapTest : public ::testing::TestWithParam<Case> {};

TEST_P(SwapTest, OutsideTheFaceMaskOutputIsByteIdenticalAndRatioZeroKeepsTheTarget) {
  const cv::Mat source = Load("astronaut_eileen_collins_512.png");
  const cv::Mat target = Load(GetParam().target);
  ASSERT_FALSE(source.empty() || target.empty());
  const auto src_lm = testing::CommittedLandmarks("astronaut_eileen_collins_512.png")[0];
  const auto faces = testing::CommittedLandmarks(GetParam().target);
  ASSERT_FALSE(faces.empty());
  for (double ratio : {1.0, 0.0}) {
    cv::Mat frame = target.clone();
    cv::Mat hulls = cv::Mat::zeros(target.size(), CV_8U);
    for (const auto& face : faces) {
      ASSERT_TRUE(testing::SwapFace(source, src_lm, face, ratio, GetParam().mode, &frame).ok());
      hulls |= FaceHullMask(face, target.size());
    }
    const Diff d = Compare(testing::PngRoundTrip(frame), target, hulls);
    std::printf("%s %s ratio %.0f: max diff outside %.0f, inside %.0f, mean inside %.2f\n",
                GetParam().target.c_str(), ModeName(GetParam().mode).c_str(), ratio, d.outside,
                d.inside, d.mean_inside);
    EXPECT_EQ(d.outside, 0.0);
    if (ratio == 0.0) {
      // Full mode: within 2 levels at a few pixels (the Poisson membrane of faces over 192 px
      // is solved at reduced resolution from 8-bit levels: colour-correction round-off that
      // flips a level there spreads a little); 1 before, when solved at full size (30 s for a
      // 1100-px face).
      EXPECT_LE(d.inside, GetParam().mode == BlendMode::kFull ? 2.0 : 0.0);
      EXPECT_LT(d.mean_inside, 0.05);
    } else {
      EXPECT_GT(d.mean_inside, 8.0);  // the face really changed
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    AstronautOnto, SwapTest,
    ::testing::Values(Case{"grace_hopper_512x600.jpg", BlendMode::kFull},
                      Case{"grace_hopper_512x600.jpg", BlendMode::kSimple},
                      Case{"faceapi_group_sample1.jpg", BlendMode::kFull},
                      Case{"faceapi_group_sample1.jpg", BlendMode::kSimple}),
    [](const auto& info) {
      return (info.param.target.rfind("grace", 0) == 0 ? std::string("Grace") : std::string("Sample1")) +
             (info.param.mode == BlendMode::kFull ? "Full" : "Simple");
    });

// A grey source face carries almost no chroma. The face must still take the target's colour,
// with no spots in either mode: the blotch metric (models/quality/blotch.h) over Grace's face.
// Measured: before (moment matching) full 8.1% / p99.5 34 for the colour astronaut; a grey
// source's 4.5x chroma gain made green/cyan blotches. Now (target's low frequencies) see the
// printed figures; the goal of issue #10 is <= 3% and p99.5 <= 30.
TEST(Blend, GreySourceGetsTheTargetsColourWithoutBlotches) {
  cv::Mat grey;
  cv::cvtColor(Load("astronaut_eileen_collins_512.png"), grey, cv::COLOR_BGR2GRAY);
  cv::cvtColor(grey, grey, cv::COLOR_GRAY2BGR);
  const cv::Mat target = Load("grace_hopper_512x600.jpg");
  const auto src_lm = testing::CommittedLandmarks("astronaut_eileen_collins_512.png")[0];
  const auto dst_lm = testing::CommittedLandmarks("grace_hopper_512x600.jpg")[0];
  const cv::Rect2f face(142.2f, 137.1f, 240.7f, 214.7f);  // the detector's box (golden_faceapi.json)
  for (BlendMode mode : {BlendMode::kFull, BlendMode::kSimple}) {
    cv::Mat out = target.clone();
    ASSERT_TRUE(testing::SwapFace(grey, src_lm, dst_lm, 1.0, mode, &out).ok());
    auto score = quality::ScoreBlotches(out, target, face);
    ASSERT_TRUE(score.ok()) << score.status();
    std::printf("grey source, %s: blotch fraction %.2f%%, p99.5 %.1f\n", mode == BlendMode::kFull ? "full" : "simple",
                100 * score->fraction, score->p995);
    EXPECT_LE(score->fraction, 0.03);
    EXPECT_LE(score->p995, 30.0);
    // Not the target unchanged: the face did change (mean |change| inside the box, 8-bit levels).
    EXPECT_GT(cv::mean(cv::abs(out(cv::Rect(face)) - target(cv::Rect(face))))[0], 3.0);
  }
}

TEST(Blend, FeatherWeightIsZeroOutsideTheHullAndOneDeepInside) {
  // A constant change of +40/255 in simple mode: pixels deep in the face get all of it.
  const auto lm = testing::CommittedLandmarks("grace_hopper_512x600.jpg")[0];
  cv::Mat frame(600, 512, CV_8UC3, cv::Scalar(100, 100, 100));
  BlendInput in{cv::Mat(64, 64, CV_32FC3, cv::Scalar::all(140 / 255.0)),
                cv::Mat(64, 64, CV_32FC3, cv::Scalar::all(100 / 255.0)),
                cv::Matx23d(0.1, 0, 0, 0, 0.1, 0), lm};  // whole frame maps into the crop
  BlendOptions simple;
  simple.mode = BlendMode::kSimple;
  ASSERT_TRUE(BlendFace(in, simple, &frame).ok());
  const cv::Mat hull = FaceHullMask(lm, frame.size());
  const int r = FeatherRadiusPx(lm, simple);
  cv::Mat deep;
  cv::erode(hull, deep, cv::getStructuringElement(cv::MORPH_RECT, cv::Size(4 * r + 3, 4 * r + 3)));
  double lo, hi;
  cv::minMaxLoc(frame.reshape(1), &lo, &hi);
  EXPECT_EQ(lo, 100.0);
  EXPECT_EQ(hi, 140.0);
  EXPECT_EQ(cv::mean(frame, deep)[0], 140.0);
  EXPECT_EQ(cv::mean(frame, hull == 0)[0], 100.0);
  std::printf("feather radius %d px for a %d px^2 hull\n", r, cv::countNonZero(hull));
}

TEST(Blend, RejectsMismatchedCrops) {
  cv::Mat frame(32, 32, CV_8UC3);
  BlendInput in{cv::Mat(8, 8, CV_32FC3), cv::Mat(9, 9, CV_32FC3), cv::Matx23d(), {}};
  const absl::Status s = BlendFace(in, {}, &frame);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("fused_crop"), std::string::npos) << s;
}

}  // namespace
}  // namespace fusion::models
