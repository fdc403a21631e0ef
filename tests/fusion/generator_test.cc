// Classical generator: contract, geometry direction, Lab conversion, colour transfer, ratio.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "fusion_fixture.h"
#include "models/generator/classical_generator.h"
#include "models/generator/face_crop.h"

namespace fusion::models {
namespace {

// Astronaut as source, Grace Hopper as target, aligned 256 crops (committed landmarks).
GeneratorInputs AstronautToGrace(double ratio) {
  const cv::Mat a = cv::imread(testing::FacePath("astronaut_eileen_collins_512.png"));
  const cv::Mat g = cv::imread(testing::FacePath("grace_hopper_512x600.jpg"));
  auto src = AlignFaceCrop(a, testing::CommittedLandmarks("astronaut_eileen_collins_512.png")[0], kCropSize);
  auto dst = AlignFaceCrop(g, testing::CommittedLandmarks("grace_hopper_512x600.jpg")[0], kCropSize);
  EXPECT_TRUE(src.ok() && dst.ok());
  return {BgrToTensor(src->bgr), LandmarksToTensor(src->landmarks), BgrToTensor(dst->bgr),
          LandmarksToTensor(dst->landmarks), ratio};
}

at::Tensor HullCoverage(const at::Tensor& landmarks, int size) {
  std::vector<cv::Point2f> pts;
  const at::Tensor l = landmarks.squeeze(0);
  for (int i = 0; i < l.size(0); ++i) pts.emplace_back(l[i][0].item<float>(), l[i][1].item<float>());
  std::vector<cv::Point2f> hull;
  cv::convexHull(pts, hull);
  std::vector<cv::Point> poly;
  for (auto& p : hull) poly.emplace_back(cvRound(p.x), cvRound(p.y));
  cv::Mat m = cv::Mat::zeros(size, size, CV_8U);
  cv::fillConvexPoly(m, poly, cv::Scalar(1));
  cv::dilate(m, m, cv::Mat());  // one pixel of slack for the raster edge
  return at::from_blob(m.data, {1, 1, size, size}, at::kByte).clone().to(at::kBool);
}

TEST(ClassicalGenerator, RatioZeroReturnsTheTargetCropExactly) {
  auto gen = ClassicalGenerator::Create({});
  ASSERT_TRUE(gen.ok());
  const GeneratorInputs in = AstronautToGrace(0.0);
  auto out = (*gen)->Fuse(in);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(at::equal(*out, in.target));
}

TEST(ClassicalGenerator, RatioOneChangesTheFaceAndNothingOutsideItsHull) {
  auto gen = ClassicalGenerator::Create({});
  const GeneratorInputs in = AstronautToGrace(1.0);
  auto out = (*gen)->Fuse(in);
  ASSERT_TRUE(out.ok()) << out.status();
  const at::Tensor inside = HullCoverage(in.target_landmarks, kCropSize).expand_as(in.target);
  const at::Tensor diff = (*out - in.target).abs();
  EXPECT_EQ(diff.masked_select(~inside).max().item<float>(), 0.0f);
  const float mean_inside = diff.masked_select(inside).mean().item<float>();
  std::printf("astronaut->grace ratio 1: mean |change| inside the hull %.4f\n", mean_inside);
  EXPECT_GT(mean_inside, 0.03f);
  // ratio scales the change linearly.
  GeneratorInputs half = in;
  half.ratio = 0.5;
  auto out_half = (*gen)->Fuse(half);
  ASSERT_TRUE(out_half.ok());
  EXPECT_LT((*out_half - (in.target + (*out - in.target) * 0.5)).abs().max().item<float>(), 1e-5f);
}

TEST(ClassicalGenerator, WarpMovesSourcePixelsOntoTargetLandmarks) {
  // Source = target shifted by (+5,+3) px with its landmarks shifted alike: the warp must undo it.
  auto gen = ClassicalGenerator::Create({.colour_transfer = false});
  GeneratorInputs in = AstronautToGrace(1.0);
  in.source = at::roll(in.target, {3, 5}, {2, 3}).contiguous();
  in.source_landmarks = in.target_landmarks + at::tensor({5.0f, 3.0f}).view({1, 1, 2});
  auto out = (*gen)->Fuse(in);
  ASSERT_TRUE(out.ok()) << out.status();
  const at::Tensor inside = HullCoverage(in.target_landmarks, kCropSize).expand_as(in.target);
  EXPECT_LT((*out - in.target).abs().masked_select(inside).max().item<float>(), 1e-4f);
}

TEST(ClassicalGenerator, ColourTransferMatchesTheTargetsLabMeans) {
  auto gen = ClassicalGenerator::Create({});
  const GeneratorInputs in = AstronautToGrace(1.0);
  auto out = (*gen)->Fuse(in);
  ASSERT_TRUE(out.ok());
  const at::Tensor inside = HullCoverage(in.target_landmarks, kCropSize).squeeze(0).squeeze(0);
  // Erode away the raster edge, then compare channel means over the face.
  const at::Tensor face = inside.logical_and(at::roll(inside, {4, 4}, {0, 1}))
                              .logical_and(at::roll(inside, {-4, -4}, {0, 1}));
  const at::Tensor lab_out = RgbToLab(*out).squeeze(0), lab_tgt = RgbToLab(in.target).squeeze(0),
                   lab_src = RgbToLab(in.source).squeeze(0);
  for (int c = 0; c < 3; ++c) {
    const float mo = lab_out[c].masked_select(face).mean().item<float>();
    const float mt = lab_tgt[c].masked_select(face).mean().item<float>();
    std::printf("Lab channel %d: fused mean %.2f target mean %.2f\n", c, mo, mt);
    EXPECT_NEAR(mo, mt, 1.5f) << "channel " << c;
  }
}

TEST(ClassicalGenerator, LabConversionHasKnownValuesAndRoundTrips) {
  const at::Tensor rgb = at::tensor({1.0f, 1.0f, 1.0f, 0.0f, 1.0f, 0.0f}).view({1, 3, 1, 2});
  const at::Tensor lab = RgbToLab(rgb);  // pixel 0 white, pixel 1 red (sRGB)
  EXPECT_NEAR(lab[0][0][0][0].item<float>(), 100.0f, 0.01f);
  EXPECT_NEAR(lab[0][1][0][0].item<float>(), 0.0f, 0.01f);
  EXPECT_NEAR(lab[0][0][0][1].item<float>(), 53.24f, 0.02f);
  EXPECT_NEAR(lab[0][1][0][1].item<float>(), 80.09f, 0.05f);
  EXPECT_NEAR(lab[0][2][0][1].item<float>(), 67.20f, 0.05f);
  const at::Tensor img = at::rand({1, 3, 16, 16});
  EXPECT_LT((LabToRgb(RgbToLab(img)) - img).abs().max().item<float>(), 1e-4f);
}

TEST(ClassicalGenerator, RejectsInputsThatBreakTheContract) {
  auto gen = ClassicalGenerator::Create({});
  GeneratorInputs in = AstronautToGrace(1.0);
  GeneratorInputs bad = in;
  bad.source = in.source.slice(2, 0, 128);
  auto r = (*gen)->Fuse(bad);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("'source'"), std::string::npos) << r.status();
  bad = in;
  bad.target_landmarks = in.target_landmarks.slice(1, 0, 5);
  EXPECT_NE((*gen)->Fuse(bad).status().message().find("target_landmarks"), std::string::npos);
  bad = in;
  bad.ratio = 1.5;
  EXPECT_EQ((*gen)->Fuse(bad).status().code(), absl::StatusCode::kInvalidArgument);
  bad = in;
  bad.target_landmarks = in.target_landmarks + 1e6;
  EXPECT_EQ((*gen)->Fuse(bad).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace fusion::models
