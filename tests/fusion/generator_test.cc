// Classical generator: contract, geometry direction, Lab conversion, colour transfer, ratio.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "fusion_fixture.h"
#include "models/blend/swap_region.h"
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

// The swap region's hull (the 68 points and the forehead row above the brows; with
// `forehead` false the 68 points' hull only), dilated by a pixel.
at::Tensor HullCoverage(const at::Tensor& landmarks, int size, bool forehead = true) {
  std::vector<cv::Point2f> pts;
  const at::Tensor l = landmarks.squeeze(0);
  for (int i = 0; i < l.size(0); ++i) pts.emplace_back(l[i][0].item<float>(), l[i][1].item<float>());
  std::vector<cv::Point2f> hull;
  cv::convexHull(forehead ? SwapRegionPoints(pts) : pts, hull);
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

std::vector<cv::Point2f> Points(const at::Tensor& landmarks) {
  const at::Tensor l = landmarks.squeeze(0).contiguous();
  std::vector<cv::Point2f> pts;
  for (int i = 0; i < l.size(0); ++i) pts.emplace_back(l[i][0].item<float>(), l[i][1].item<float>());
  return pts;
}

// The forehead strip (swap_region.h) carries the brows whole and fades to the target above them:
// a white source onto a black target (no colour transfer) shows the output's weight directly.
TEST(ClassicalGenerator, TheChangeFadesAcrossTheForeheadStripAboveTheBrows) {
  auto gen = ClassicalGenerator::Create({.colour_transfer = false, .source_shape = 0.0});
  GeneratorInputs in = AstronautToGrace(1.0);
  in.source = at::ones_like(in.source);
  in.target = at::zeros_like(in.target);
  auto out = (*gen)->Fuse(in);
  ASSERT_TRUE(out.ok()) << out.status();
  const at::Tensor w = out->select(1, 0).squeeze(0);  // [S,S]
  const std::vector<cv::Point2f> lm = Points(in.target_landmarks), region = SwapRegionPoints(lm);
  auto at_point = [&](cv::Point2f p) { return w[cvRound(p.y)][cvRound(p.x)].item<float>(); };
  double brows = 0, halfway = 0, row = 0;
  for (int j = 0; j < kForeheadPoints; ++j) {
    brows += at_point(lm[17 + j] + cv::Point2f(0, 2)) / kForeheadPoints;  // just below the brow line
    halfway += at_point((lm[17 + j] + region[68 + j]) * 0.5f) / kForeheadPoints;
    row += at_point(region[68 + j]) / kForeheadPoints;
  }
  std::printf("weight: brows %.3f, halfway up the strip %.3f, forehead row %.3f\n", brows, halfway, row);
  EXPECT_GT(brows, 0.99);
  EXPECT_GT(halfway, 0.3);
  EXPECT_LT(halfway, 0.8);
  EXPECT_LT(row, 0.3);
  EXPECT_EQ(w.max().item<float>(), 1.0f);
}

double EyeSpacing(const std::vector<cv::Point2f>& p) {  // outer eye corners 36 and 45
  return cv::norm(p[45] - p[36]);
}
double NoseLength(const std::vector<cv::Point2f>& p) { return cv::norm(p[33] - p[27]); }

TEST(ClassicalGenerator, ShapeTowardSourceTakesTheSourcesProportionsAndKeepsTheJaw) {
  const std::vector<cv::Point2f> dst = Points(AstronautToGrace(1.0).target_landmarks);
  // A similarity image of the target (rotated 12 degrees, scaled 0.8, shifted): nothing moves.
  std::vector<cv::Point2f> sim;
  const double c = 0.8 * std::cos(0.21), sn = 0.8 * std::sin(0.21);
  for (const cv::Point2f& p : dst) sim.emplace_back(c * p.x - sn * p.y + 31, sn * p.x + c * p.y - 7);
  for (double w : {0.5, 1.0}) {
    const std::vector<cv::Point2f> out = ShapeTowardSource(sim, dst, w, w);
    for (int i = 0; i < kNumLandmarks; ++i) EXPECT_LT(cv::norm(out[i] - dst[i]), 1e-3) << "point " << i;
  }
  // A source whose eyes sit 20% further apart about their midpoint and whose nose is 15% longer:
  // at weight 1 the target's eye spacing / nose length ratio becomes the source's; at 0.5 it is
  // in between; the jaw (weight 0) does not move.
  std::vector<cv::Point2f> src = dst;
  const cv::Point2f eyes_mid = (dst[36] + dst[45]) * 0.5f;
  for (int i = 36; i <= 47; ++i) src[i] = eyes_mid + (dst[i] - eyes_mid) * 1.2f;
  for (int i = 28; i <= 35; ++i) src[i] = dst[27] + (dst[i] - dst[27]) * 1.15f;
  const double want = EyeSpacing(src) / NoseLength(src), was = EyeSpacing(dst) / NoseLength(dst);
  const std::vector<cv::Point2f> full = ShapeTowardSource(src, dst, 1.0, 0.0);
  const std::vector<cv::Point2f> half = ShapeTowardSource(src, dst, 0.5, 0.0);
  const double got_full = EyeSpacing(full) / NoseLength(full), got_half = EyeSpacing(half) / NoseLength(half);
  std::printf("eye spacing / nose length: target %.3f source %.3f, weight 1 %.3f, weight 0.5 %.3f\n", was, want,
              got_full, got_half);
  EXPECT_NEAR(got_full, want, 1e-3);
  EXPECT_GT(got_half, std::min(was, want) + 0.2 * std::abs(want - was));
  EXPECT_LT(got_half, std::max(was, want) - 0.2 * std::abs(want - was));
  for (int i = 0; i < 17; ++i) EXPECT_EQ(full[i], dst[i]) << "jaw point " << i;
  EXPECT_EQ(ShapeTowardSource(src, dst, 0.0, 0.0), dst);
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

// Share of face pixels whose (a, b) is more than 20 from the target's local (a, b) (a 31x31
// box blur of the target's Lab): the blotch metric's chroma distance, on the crop.
double ChromaOffShare(const at::Tensor& out, const at::Tensor& target, const at::Tensor& face) {
  const at::Tensor ab_out = RgbToLab(out).narrow(1, 1, 2);
  const at::Tensor ab_tgt = at::avg_pool2d(RgbToLab(target).narrow(1, 1, 2), {31, 31}, {1, 1}, {15, 15},
                                           /*ceil_mode=*/false, /*count_include_pad=*/false);
  const at::Tensor dist = (ab_out - ab_tgt).pow(2).sum(1).sqrt().squeeze(0);
  return dist.gt(20).logical_and(face).sum().item<double>() / face.sum().item<double>();
}

TEST(ClassicalGenerator, BrightSourceDetailOnAWarmTargetKeepsTheTargetsChromaInsteadOfClipping) {
  GeneratorInputs in = AstronautToGrace(1.0);
  // The quality bench's strongest cast (R x1.35, B x0.55) on the target; a source 1.6x brighter,
  // so that its highlights and skin texture push L past what the target's warm chroma allows.
  in.target = (in.target * at::tensor({1.35f, 1.0f, 0.55f}).view({1, 3, 1, 1})).clamp(0.0, 1.0);
  in.source = (in.source * 1.6).clamp(0.0, 1.0);
  auto fit = ClassicalGenerator::Create({});
  auto clip = ClassicalGenerator::Create({.gamut_fit = false});
  auto out_fit = (*fit)->Fuse(in);
  auto out_clip = (*clip)->Fuse(in);
  ASSERT_TRUE(out_fit.ok() && out_clip.ok());
  const at::Tensor inside = HullCoverage(in.target_landmarks, kCropSize).squeeze(0).squeeze(0);
  const at::Tensor face = inside.logical_and(at::roll(inside, {8, 8}, {0, 1}))
                              .logical_and(at::roll(inside, {-8, -8}, {0, 1}));
  const double off_fit = ChromaOffShare(*out_fit, in.target, face);
  const double off_clip = ChromaOffShare(*out_clip, in.target, face);
  std::printf("face pixels with chroma > 20 from the target's: gamut fit %.2f%%, per-channel clip %.2f%%\n",
              100 * off_fit, 100 * off_clip);
  EXPECT_GT(off_clip, 0.01);  // the case this guards: clipping drops the warm skin's chroma (1.4%)
  EXPECT_LT(off_fit, 0.1 * off_clip);
  // Where no pixel leaves the gamut, the fit changes nothing.
  GeneratorInputs plain = AstronautToGrace(1.0);
  auto a = (*fit)->Fuse(plain);
  auto b = (*clip)->Fuse(plain);
  ASSERT_TRUE(a.ok() && b.ok());
  const at::Tensor same = (*a - *b).abs().amax(1).squeeze(0).le(1e-5);
  // (0.88 at the default luminance_detail 1.5: its brighter highlights leave the gamut; 0.9+ at
  // 1.0; 0.849 once the region took in the forehead row above the brows, bright skin)
  EXPECT_GT(same.logical_and(face).sum().item<double>() / face.sum().item<double>(), 0.8);
}

TEST(ClassicalGenerator, ReducedResolutionLowPassStaysWithinThreeLevelsOfTheFullResolutionTransfer) {
  // The colour transfer's wide blurs at half resolution against the reference at full resolution,
  // on the plain pair and on the bright-source / warm-target pair (gamut fitting at work).
  auto reduced = ClassicalGenerator::Create({});
  auto full = ClassicalGenerator::Create({.reduced_low_pass = false});
  for (const bool cast : {false, true}) {
    GeneratorInputs in = AstronautToGrace(1.0);
    if (cast) {
      in.target = (in.target * at::tensor({1.35f, 1.0f, 0.55f}).view({1, 3, 1, 1})).clamp(0.0, 1.0);
      in.source = (in.source * 1.6).clamp(0.0, 1.0);
    }
    auto a = (*reduced)->Fuse(in);
    auto b = (*full)->Fuse(in);
    ASSERT_TRUE(a.ok() && b.ok());
    const at::Tensor levels = ((*a - *b).abs() * 255.0);
    const double worst = levels.max().item<double>(), mean = levels.mean().item<double>();
    std::printf("cast %d: reduced vs full low pass, worst %.2f levels, mean %.3f\n", cast, worst, mean);
    EXPECT_LT(worst, 3.5);
    EXPECT_LT(mean, 0.5);
    EXPECT_GT(worst, 0.0);  // the reduced path ran (it is not the full-resolution one)
  }
}

// The subject's-left half of the 68-point scheme (image right on a frontal face): jaw 9-16,
// brows 22-26, nose 34-35, eye 42-47, mouth 52-56, 63-65 (the mirror of classical_generator.cc's
// kLeftSide, without the midline).
constexpr int kRightHalf[] = {9,  10, 11, 12, 13, 14, 15, 16, 22, 23, 24, 25, 26, 34, 35,
                              42, 43, 44, 45, 46, 47, 52, 53, 54, 55, 56, 63, 64, 65};

TEST(ClassicalGenerator, ATurnedSourcesHiddenHalfComesFromTheMirrorOfItsVisibleHalf) {
  // A made turned source: the astronaut with her image-right half squeezed to 0.3 of its width
  // toward the nose line (so that half's hull is under half the other's: foreshortened) and every
  // pixel right of the nose line painted pure green, standing in for what a turned head hides
  // (the far cheek, a camera beside it). No green may reach the target's face: its right half
  // samples the mirror of the visible half, including the triangles across the midline.
  // (source_shape 0: a turned source skips that step, the frontal reference below must too.)
  auto gen = ClassicalGenerator::Create({.colour_transfer = false, .source_shape = 0.0});
  GeneratorInputs in = AstronautToGrace(1.0);
  std::vector<cv::Point2f> src = Points(in.source_landmarks);
  const cv::Point2f top = src[27], chin = src[8];
  auto nose_x = [&](float y) { return top.x + (chin.x - top.x) * (y - top.y) / (chin.y - top.y); };
  for (int i : kRightHalf) src[i].x = nose_x(src[i].y) + 0.3f * (src[i].x - nose_x(src[i].y));
  std::vector<float> flat;
  for (const cv::Point2f& p : src) flat.insert(flat.end(), {p.x, p.y});
  in.source_landmarks = at::from_blob(flat.data(), {1, kNumLandmarks, 2}, at::kFloat).clone();
  in.source = in.source.clone();
  for (int y = 0; y < kCropSize; ++y) {
    const int x0 = std::clamp(static_cast<int>(std::ceil(nose_x(static_cast<float>(y)))) + 1, 0, kCropSize);
    at::Tensor row = in.source.select(2, y).narrow(2, x0, kCropSize - x0);  // [1,3,W-x0]
    row.select(1, 0).fill_(0.0f);
    row.select(1, 1).fill_(1.0f);
    row.select(1, 2).fill_(0.0f);
  }
  auto out = (*gen)->Fuse(in);
  ASSERT_TRUE(out.ok()) << out.status();
  const at::Tensor inside = HullCoverage(in.target_landmarks, kCropSize).squeeze(0).squeeze(0);
  const at::Tensor o = out->squeeze(0);
  const at::Tensor green = (o[1] - at::maximum(o[0], o[2])).gt(0.25).logical_and(inside);
  const int64_t n_green = green.sum().item<int64_t>(), n_face = inside.sum().item<int64_t>();
  std::printf("turned source: %lld of %lld face pixels green\n", static_cast<long long>(n_green),
              static_cast<long long>(n_face));
  EXPECT_EQ(n_green, 0);
  // The visible half is warped as for a frontal source: away from the midline seam, the target's
  // left half is what the plain warp of the unsqueezed astronaut gives there.
  GeneratorInputs plain = AstronautToGrace(1.0);
  plain.source = in.source;
  auto ref = (*gen)->Fuse(plain);
  ASSERT_TRUE(ref.ok());
  const std::vector<cv::Point2f> dst = Points(in.target_landmarks);
  at::Tensor left = at::zeros({kCropSize, kCropSize}, at::kBool);
  for (int y = 0; y < kCropSize; ++y) {
    const float t = (y - dst[27].y) / (dst[8].y - dst[27].y);
    const int x1 = static_cast<int>(dst[27].x + t * (dst[8].x - dst[27].x)) - 24;  // > 6 seam sigmas
    if (x1 > 0) left[y].narrow(0, 0, x1).fill_(true);
  }
  // Compared over the 68 points' hull: the forehead row is placed from the mean of all brow
  // points, so squeezing the right brow moves the left forehead points too.
  left = left.logical_and(HullCoverage(in.target_landmarks, kCropSize, /*forehead=*/false).squeeze(0).squeeze(0));
  // Points of the left half did not move, so its triangles' affines are the same; the few pixels
  // that differ (2.2% of 8,703, up to 0.031) lie in triangles that reach into the squeezed half
  // (the forehead row's triangles reach across the midline above the brows: 0.6% before it).
  const at::Tensor dl = (*out - *ref).abs().amax(1).squeeze(0).masked_select(left);
  const double differ = dl.gt(1e-4).sum().item<double>() / static_cast<double>(dl.numel());
  std::printf("left half: %lld px, %.2f%% differ from the plain warp, by at most %.3f\n",
              static_cast<long long>(dl.numel()), 100 * differ, dl.max().item<float>());
  EXPECT_LT(differ, 0.03);
  EXPECT_LT(dl.max().item<float>(), 0.1f);
}

TEST(ClassicalGenerator, LuminanceDetailScalesTheSourcesDetailOverTheTargetsShading) {
  // L = blur(target L) + gain * detail: with no gamut fit the output's L is linear in the gain,
  // (L(1.5) - L(0)) = 1.5 (L(1) - L(0)) wherever no channel was clipped.
  const GeneratorInputs in = AstronautToGrace(1.0);
  std::vector<at::Tensor> l;
  for (double g : {0.0, 1.0, 1.5}) {
    auto gen = ClassicalGenerator::Create({.gamut_fit = false, .luminance_detail = g});
    auto out = (*gen)->Fuse(in);
    ASSERT_TRUE(out.ok()) << out.status();
    l.push_back(RgbToLab(*out).narrow(1, 0, 1).squeeze(0).squeeze(0));
    l.push_back(out->gt(0.01).logical_and(out->lt(0.99)).all(1).squeeze(0));
  }
  // Inside the 68 points' hull, 2 px clear of its edge: the forehead strip above it mixes the
  // face with the target in RGB (ForeheadRamp), which is not linear in Lab L.
  const at::Tensor hull68 = HullCoverage(in.target_landmarks, kCropSize, /*forehead=*/false).squeeze(0).squeeze(0);
  const at::Tensor inside = hull68.logical_and(at::roll(hull68, {3}, {0})).logical_and(at::roll(hull68, {-3}, {0}));
  const at::Tensor ok = inside.logical_and(l[1]).logical_and(l[3]).logical_and(l[5]);
  ASSERT_GT(ok.sum().item<int64_t>(), 10000);
  const at::Tensor d1 = l[2] - l[0], d15 = l[4] - l[0];
  const float err = (d15 - d1 * 1.5).abs().masked_select(ok).max().item<float>();
  const float spread = d1.masked_select(ok).std().item<float>();
  std::printf("detail (L units): std at gain 1 %.2f, gain 1.5 %.2f; max deviation from 1.5x %.3f\n", spread,
              d15.masked_select(ok).std().item<float>(), err);
  EXPECT_GT(spread, 2.0f);  // the astronaut's features are there to scale
  EXPECT_LT(err, 0.05f);
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
