// face-api networks against the numpy reference's goldens (tests/data/faces/golden_faceapi.json,
// made by shared/reference/faceapi_ref.py at detector input 416), with the real weights.
#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <tuple>
#include <vector>

#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>

#include "faceapi_fixture.h"
#include "models/faceapi/align.h"
#include "models/faceapi/image.h"
#include "models/faceapi/ops.h"

namespace fusion::faceapi {
namespace {

struct GoldenCase {
  const char* file;
  const char* key;
};
constexpr GoldenCase kCases[] = {{"astronaut_eileen_collins_512.png", "astronaut.png"},
                                 {"grace_hopper_512x600.jpg", "grace_hopper.jpg"}};
constexpr int kGoldenPoints[8] = {0, 8, 16, 30, 36, 45, 48, 54};

struct FacePass {
  FaceBox box;
  Landmarks68 pts;
  Descriptor desc;
};

FacePass RunAll(const cv::Mat& rgb) {
  auto boxes = Tiny().Detect(rgb, 416);
  EXPECT_TRUE(boxes.ok()) << boxes.status();
  EXPECT_EQ(boxes->size(), 1u);
  FacePass r;
  r.box = boxes->at(0);
  auto pts = Landmarks().Detect(rgb, r.box);
  EXPECT_TRUE(pts.ok()) << pts.status();
  r.pts = *pts;
  auto d = Recognition().Compute(rgb, r.pts);
  EXPECT_TRUE(d.ok()) << d.status();
  r.desc = *d;
  return r;
}

TEST(TinyFaceDetector, FindsTheGoldenBoxAtInput416) {
  for (const GoldenCase& c : kCases) {
    auto boxes = Tiny().Detect(Face(c.file), 416);
    ASSERT_TRUE(boxes.ok()) << boxes.status();
    ASSERT_EQ(boxes->size(), 1u) << c.file;
    const FaceBox& b = boxes->at(0);
    const float iou = IoU(b, GoldenBox(c.key));
    std::printf("%s: box (%.1f, %.1f, %.1f, %.1f) score %.4f IoU vs golden %.4f\n", c.file, b.x, b.y, b.w,
                b.h, b.score, iou);
    EXPECT_GT(iou, 0.9f) << c.file;
    EXPECT_NEAR(b.score, Golden()[c.key]["det_score"].get<float>(), 0.02) << c.file;
  }
}

TEST(FaceLandmark68Net, PointsAndAlignBoxMatchTheGoldenWithin2Px) {
  for (const GoldenCase& c : kCases) {
    const FacePass r = RunAll(Face(c.file));
    const auto& g = Golden()[c.key]["landmarks_px_0_8_16_30_36_45_48_54"];
    for (int i = 0; i < 8; ++i) {
      const Point p = r.pts[kGoldenPoints[i]];
      const float gx = g[i][0].get<float>(), gy = g[i][1].get<float>();
      EXPECT_LT(std::hypot(p.x - gx, p.y - gy), 2.0f)
          << c.file << " point " << kGoldenPoints[i] << " (" << p.x << "," << p.y << ") vs (" << gx << "," << gy << ")";
    }
    const FaceBox ab = DlibAlignBox(r.pts);
    std::printf("%s: align box (%.0f, %.0f, %.0f); point 36 (%.2f, %.2f)\n", c.file, ab.x, ab.y, ab.w,
                r.pts[36].x, r.pts[36].y);
    const auto& ga = Golden()[c.key]["align_box_xywh"];
    EXPECT_NEAR(ab.x, ga[0].get<float>(), 2.0) << c.file;
    EXPECT_NEAR(ab.y, ga[1].get<float>(), 2.0) << c.file;
    EXPECT_NEAR(ab.w, ga[2].get<float>(), 2.0) << c.file;
  }
}

TEST(FaceRecognitionNet, DescriptorMatchesTheGoldenWithinL2Of005) {
  for (const GoldenCase& c : kCases) {
    const FacePass r = RunAll(Face(c.file));
    Descriptor golden;
    const auto& g = Golden()[std::string(c.key) + "_descriptor"];
    ASSERT_EQ(g.size(), 128u);
    for (int i = 0; i < 128; ++i) golden[i] = g[i].get<float>();
    const float diff = DescriptorDistance(r.desc, golden);
    std::printf("%s: descriptor L2 difference vs golden %.4f\n", c.file, diff);
    EXPECT_LT(diff, 0.05f) << c.file;
  }
}

TEST(FaceRecognitionNet, MirrorIsTheSamePersonAndGraceHopperIsNot) {
  const cv::Mat astronaut = Face("astronaut_eileen_collins_512.png");
  cv::Mat mirror;
  cv::flip(astronaut, mirror, 1);
  const FacePass a = RunAll(astronaut), m = RunAll(mirror), g = RunAll(Face("grace_hopper_512x600.jpg"));
  const float d_mirror = DescriptorDistance(a.desc, m.desc), d_grace = DescriptorDistance(a.desc, g.desc);
  std::printf("astronaut vs mirror %.4f, astronaut vs grace %.4f (golden %.4f)\n", d_mirror, d_grace,
              Golden()["dist_astronaut_grace"].get<float>());
  EXPECT_LT(d_mirror, 0.3f);
  EXPECT_GT(d_grace, 0.6f);
}

// A head rolled by 30 degrees is described upright (FaceRecognitionNet rotates crops past
// 10 degrees of roll): the same person as the upright photo, and still not the astronaut. The
// landmarks come from the upright photo's, rotated with the image (the detector's box on a
// rotated face is what the pipeline has; the landmark net then finds the points).
TEST(FaceRecognitionNet, RolledHeadIsTheSamePersonAsUpright) {
  const cv::Mat grace = Face("grace_hopper_512x600.jpg");
  const FacePass upright = RunAll(grace), astronaut = RunAll(Face("astronaut_eileen_collins_512.png"));
  for (double deg : {-30.0, 30.0}) {
    const cv::Point2f c(upright.box.x + upright.box.w / 2, upright.box.y + upright.box.h / 2);
    const cv::Mat m = cv::getRotationMatrix2D(c, deg, 1.0);
    cv::Mat rolled;
    cv::warpAffine(grace, rolled, m, grace.size(), cv::INTER_LINEAR, cv::BORDER_REFLECT101);
    Landmarks68 pts;
    for (size_t i = 0; i < pts.size(); ++i) {
      const Point p = upright.pts[i];
      pts[i] = {static_cast<float>(m.at<double>(0, 0) * p.x + m.at<double>(0, 1) * p.y + m.at<double>(0, 2)),
                static_cast<float>(m.at<double>(1, 0) * p.x + m.at<double>(1, 1) * p.y + m.at<double>(1, 2))};
    }
    auto d = Recognition().Compute(rolled, pts);
    ASSERT_TRUE(d.ok()) << d.status();
    const float same = DescriptorDistance(*d, upright.desc), other = DescriptorDistance(*d, astronaut.desc);
    std::printf("grace rolled %+.0f deg: vs upright %.4f, vs astronaut %.4f\n", deg, same, other);
    EXPECT_LT(same, 0.25f) << deg;
    EXPECT_GT(other, 0.6f) << deg;
  }
}

TEST(FaceApiNets, DeviceBytesEqualTheCatalogue) {
  EXPECT_EQ(Tiny().DeviceBytes(), (*Catalogue().Get("tiny_face_detector"))->device_bytes);
  EXPECT_EQ(Landmarks().DeviceBytes(), (*Catalogue().Get("face_landmark_68"))->device_bytes);
  EXPECT_EQ(Recognition().DeviceBytes(), (*Catalogue().Get("face_recognition"))->device_bytes);
  EXPECT_EQ(Tiny().DeviceBytes(), 773284u);
}

TEST(FaceApiNets, ForwardShapesFollowTheInputContracts) {
  c10::NoGradGuard no_grad;
  EXPECT_EQ(Tiny().Forward(at::zeros({2, 3, 416, 416})).sizes().vec(), (std::vector<int64_t>{2, 25, 13, 13}));
  EXPECT_EQ(Tiny().Forward(at::zeros({1, 3, 608, 608})).sizes().vec(), (std::vector<int64_t>{1, 25, 19, 19}));
  EXPECT_EQ(Landmarks().Forward(at::zeros({3, 3, 112, 112})).sizes().vec(), (std::vector<int64_t>{3, 136}));
  EXPECT_EQ(Recognition().Forward(at::zeros({2, 3, 150, 150})).sizes().vec(), (std::vector<int64_t>{2, 128}));
  EXPECT_EQ(FaceLandmark68Net::Input().shape, (std::vector<int64_t>{-1, 3, 112, 112}));
  EXPECT_EQ(TinyFaceDetector::Input().channels, "RGB");
  EXPECT_TRUE(TinyFaceDetector::kTileable);
  EXPECT_FALSE(FaceRecognitionNet::kTileable);
}

TEST(FaceApiNets, MissingWeightFileNamesTheFetchCommand) {
  fusion::testing::TempDir empty;
  auto cat = models::ModelCatalogue::Create({.manifest = testing::CatalogueJson(), .models_dir = empty.path()});
  ASSERT_TRUE(cat.ok());
  auto net = TinyFaceDetector::Load(**cat, {});
  EXPECT_EQ(net.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(net.status().message().find("tiny_face_detector_model-weights_manifest.json"), std::string::npos);
  EXPECT_NE(net.status().message().find("scripts/fetch-models.sh"), std::string::npos);
}

TEST(TfSamePadding, IsAsymmetricForStride2OnEvenInputs) {
  const at::Tensor x = at::ones({1, 1, 112, 112});
  const at::Tensor p = ops::PadSame(x, 3, 2);
  EXPECT_EQ(p.sizes().vec(), (std::vector<int64_t>{1, 1, 113, 113}));
  EXPECT_EQ(p[0][0][0][0].item<float>(), 1.f);    // nothing before
  EXPECT_EQ(p[0][0][112][112].item<float>(), 0.f);  // one after
  EXPECT_EQ(ops::PadSame(x, 3, 1).size(2), 114);    // stride 1: symmetric 1
  EXPECT_EQ(ops::PadSame(at::ones({1, 1, 13, 13}), 2, 1).size(2), 14);
}

// ops::MaxPool is at::max_pool2d, value for value, in both modes and on odd and even sides
// (ceil_mode's partial last window included), with NaN and -inf inputs.
TEST(MaxPool, EqualsAtMaxPool2dExactly) {
  at::manual_seed(7);
  for (const auto& [k, s, ceil_mode] : std::vector<std::tuple<int, int, bool>>{
           {2, 2, true}, {2, 2, false}, {3, 2, false}, {3, 2, true}, {2, 1, false}, {3, 1, false}}) {
    for (const auto& [h, w] : std::vector<std::pair<int, int>>{{13, 13}, {16, 9}, {3, 4}, {104, 104}}) {
      at::Tensor x = at::randn({2, 5, h, w});
      x.index_put_({0, 1, 1, 2}, std::numeric_limits<float>::quiet_NaN());
      x.index_put_({1, 3, 0, 0}, -std::numeric_limits<float>::infinity());
      const at::Tensor want = at::max_pool2d(x, {k, k}, {s, s}, {0, 0}, {1, 1}, ceil_mode);
      const at::Tensor got = ops::MaxPool(x, k, s, ceil_mode);
      ASSERT_EQ(got.sizes(), want.sizes()) << k << "/" << s << " ceil " << ceil_mode << " on " << h << "x" << w;
      EXPECT_TRUE(at::equal(got.isnan(), want.isnan()));
      EXPECT_TRUE(at::equal(at::nan_to_num(got, 0.0), at::nan_to_num(want, 0.0)))
          << k << "/" << s << " ceil " << ceil_mode << " on " << h << "x" << w;
    }
  }
  EXPECT_THROW(ops::MaxPool(at::zeros({1, 1, 2, 2}), 3, 2), c10::Error);
}

TEST(Nms, KeepsTheBestOfOverlappingBoxesAndDistinctOnes) {
  std::vector<FaceBox> in = {{0, 0, 10, 10, 0.6f}, {1, 1, 10, 10, 0.9f}, {50, 50, 10, 10, 0.7f}};
  std::vector<FaceBox> out = Nms(in, 0.4f);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_FLOAT_EQ(out[0].score, 0.9f);
  EXPECT_FLOAT_EQ(out[1].score, 0.7f);
  EXPECT_NEAR(IoU({0, 0, 10, 10, 1}, {5, 0, 10, 10, 1}), 50.f / 150.f, 1e-6);
}

TEST(Similarity, RecoversAKnownRotationScaleAndShift) {
  const double a = 1.5 * std::cos(0.3), b = 1.5 * std::sin(0.3);
  Point src[4] = {{0, 0}, {10, 0}, {0, 20}, {7, 3}}, dst[4];
  for (int i = 0; i < 4; ++i) {
    dst[i] = {static_cast<float>(a * src[i].x - b * src[i].y + 5), static_cast<float>(b * src[i].x + a * src[i].y - 2)};
  }
  const Similarity s = EstimateSimilarity(src, dst, 4);
  EXPECT_NEAR(s[0], a, 1e-5);
  EXPECT_NEAR(s[3], b, 1e-5);
  EXPECT_NEAR(s[2], 5, 1e-4);
  EXPECT_NEAR(s[5], -2, 1e-4);
}

TEST(Similarity, AlignedAstronautHasEyesOnTheTemplate) {
  const cv::Mat rgb = Face("astronaut_eileen_collins_512.png");
  const FacePass r = RunAll(rgb);
  const Similarity s = SimilarityFromLandmarks(r.pts, 112);
  auto map = [&](Point p) { return Point{static_cast<float>(s[0] * p.x + s[1] * p.y + s[2]),
                                         static_cast<float>(s[3] * p.x + s[4] * p.y + s[5])}; };
  Point le{0, 0};
  for (int i = 36; i < 42; ++i) { le.x += r.pts[i].x / 6; le.y += r.pts[i].y / 6; }
  const Point m = map(le);
  EXPECT_NEAR(m.x, 38.3, 3.0);
  EXPECT_NEAR(m.y, 51.7, 3.0);
  const cv::Mat aligned = AlignFace(rgb, r.pts, 112);
  EXPECT_EQ(aligned.size(), cv::Size(112, 112));
  EXPECT_GT(cv::mean(aligned)[0], 40.0);  // a face, not black
}

// A face crop over kBatchPrescaleAbove times the net's input is scaled down first (image.h): the
// tensor is that of the crop scaled to twice the input with INTER_AREA, and Grace Hopper ten times
// larger (a 2400-px box) gets her landmarks (the small image's times ten) and her descriptor.
// Measured: the worst point 0.0047 of her eye distance, the descriptor 0.075 from the small
// image's (the whole crop resized bilinearly, as before: 0.0054 and 0.079; the x10 cubic upscale
// itself moves the descriptor).
TEST(FaceApi, AFaceCropManyTimesTheInputIsScaledDownFirstAndKeepsItsPointsAndDescriptor) {
  const cv::Mat small = Face("grace_hopper_512x600.jpg");
  cv::Mat big;
  cv::resize(small, big, cv::Size(), 10, 10, cv::INTER_CUBIC);
  const at::Tensor t = ToBatchTensor(big, 112, true);
  cv::Mat area;
  cv::resize(big, area, cv::Size(std::lround(big.cols * 224.0 / big.rows), 224), 0, 0, cv::INTER_AREA);
  EXPECT_TRUE(at::equal(t, ToBatchTensor(area, 112, true)));
  const FaceBox g = GoldenBox("grace_hopper.jpg");
  auto pts1 = Landmarks().Detect(small, g);
  auto pts10 = Landmarks().Detect(big, {g.x * 10, g.y * 10, g.w * 10, g.h * 10, 1});
  ASSERT_TRUE(pts1.ok() && pts10.ok());
  const float eyes = std::hypot((*pts1)[45].x - (*pts1)[36].x, (*pts1)[45].y - (*pts1)[36].y);
  double worst = 0;
  for (size_t i = 0; i < pts1->size(); ++i) {
    worst = std::max<double>(worst, std::hypot((*pts10)[i].x / 10 - (*pts1)[i].x, (*pts10)[i].y / 10 - (*pts1)[i].y) / eyes);
  }
  auto d1 = Recognition().Compute(small, *pts1);
  auto d10 = Recognition().Compute(big, *pts10);
  ASSERT_TRUE(d1.ok() && d10.ok());
  const float distance = DescriptorDistance(*d1, *d10);
  std::printf("grace x10: worst point %.4f of the eye distance, descriptor distance %.4f\n", worst, distance);
  EXPECT_LT(worst, 0.01);
  EXPECT_LT(distance, 0.09f);
}

}  // namespace
}  // namespace fusion::faceapi
