// Multi-scale detection with the real detectors on the MIT group photos (fetched), the mosaic
// and no-face images, scored against tests/data/faces/ground_truth.json (see ground_truth.h).
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include <opencv2/imgproc.hpp>

#include "faceapi_fixture.h"
#include "ground_truth.h"
#include "models/faceapi/image.h"
#include "models/faceapi/multiscale.h"
#include "models/faceapi/ops.h"
#include "models/faceapi/ssd_mobilenet_v1.h"

namespace fusion::faceapi {
namespace {

Score ScoreGroups(const FaceDetector& det, const char* label) {
  Score total;
  for (const Truth& t : GroupPhotos()) {
    auto dets = DetectMultiScale(det, t.rgb);
    EXPECT_TRUE(dets.ok()) << dets.status();
    const Score s = ScoreDetections(t, *dets);
    std::printf("%s %s: %d of %d faces, %d false boxes%s\n", label, t.name.c_str(), s.found, s.faces,
                s.false_boxes, s.false_list.c_str());
    total.found += s.found;
    total.faces += s.faces;
    total.false_boxes += s.false_boxes;
  }
  std::printf("%s group photos: %d of %d faces, %d false boxes\n", label, total.found, total.faces, total.false_boxes);
  return total;
}

// The pyramid from min_face_px 40: SSD (the pipeline's default) finds all 21 faces and nothing
// else. TinyFaceDetector finds 20 (sample2 loses one) and puts a box on sample6's clothes
// (score 0.65); on clutter it is worse (bench/detect), which is why SSD is the default. The
// tiny test pins its recall only.
TEST(MultiScaleDetection, TinyFaceDetectorFinds20Of21GroupFaces) {
  const Score s = ScoreGroups(Tiny(), "tiny");
  EXPECT_EQ(s.faces, 21);
  EXPECT_GE(s.found, 20);
}

TEST(MultiScaleDetection, SsdMobilenetV1FindsAll21GroupFacesWithoutFalseBoxes) {
  const Score s = ScoreGroups(Ssd(), "ssd");
  EXPECT_EQ(s.found, 21);
  EXPECT_EQ(s.false_boxes, 0);
}

TEST(MultiScaleDetection, SsdMobilenetV1FindsAll12MosaicFacesWithoutFalseBoxes) {
  const Truth m = Mosaic(GroupPhotos());
  MultiScaleOptions o;
  o.min_face_px = 80;  // its faces are 190-300 px; 40 would scan 4x the pixels for nothing here
  auto dets = DetectMultiScale(Ssd(), m.rgb, o);
  ASSERT_TRUE(dets.ok()) << dets.status();
  const Score s = ScoreDetections(m, *dets);
  // 13 people: 12 required faces plus one too occluded to require (an ignore region).
  std::printf("ssd mosaic: %d of %d required faces (+%zu ignore), %d false boxes%s\n", s.found, s.faces,
              m.ignore.size(), s.false_boxes, s.false_list.c_str());
  EXPECT_EQ(s.faces + static_cast<int>(m.ignore.size()), 13);
  EXPECT_EQ(s.found, 12);
  EXPECT_EQ(s.false_boxes, 0);
}

// Deterministic no-face images: a smooth colour gradient and a crop of a group photo below
// the faces (clothes and background).
std::vector<cv::Mat> NoFaceImages() {
  cv::Mat gradient(720, 1280, CV_8UC3);
  for (int y = 0; y < gradient.rows; ++y) {
    for (int x = 0; x < gradient.cols; ++x) {
      gradient.at<cv::Vec3b>(y, x) = cv::Vec3b(x * 255 / 1279, y * 255 / 719, (x + y) * 255 / 1998);
    }
  }
  const cv::Mat sample1 = GroupPhotos()[0].rgb;
  return {gradient, sample1(cv::Rect(0, 760, 1920, 520)).clone()};
}

TEST(MultiScaleDetection, NoFaceImagesGiveNoDetection) {
  for (const cv::Mat& img : NoFaceImages()) {
    auto tiny = DetectMultiScale(Tiny(), img);
    ASSERT_TRUE(tiny.ok()) << tiny.status();
    EXPECT_TRUE(tiny->empty()) << img.cols << "x" << img.rows << ": tiny found " << tiny->size();
    auto ssd = DetectMultiScale(Ssd(), img);
    ASSERT_TRUE(ssd.ok()) << ssd.status();
    EXPECT_TRUE(ssd->empty()) << img.cols << "x" << img.rows << ": ssd found " << ssd->size();
  }
}

TEST(MultiScaleDetection, SsdTilesCoverTheImageAtTheFixedInput) {
  const std::vector<DetectionPass> passes = PlanPasses(Ssd(), 3840, 2896, {});
  cv::Mat covered = cv::Mat::zeros(2896, 3840, CV_8U);
  for (const DetectionPass& p : passes) {
    EXPECT_EQ(p.input_size, 512);
    EXPECT_EQ(p.region & cv::Rect(0, 0, 3840, 2896), p.region);
    if (p.level == 0) covered(p.region).setTo(1);
  }
  EXPECT_EQ(cv::countNonZero(covered), 3840 * 2896);
  // A 512-px image: the whole image at the input, then the second look (SSD's 64-96 px gap).
  const std::vector<DetectionPass> small = PlanPasses(Ssd(), 512, 512, {});
  ASSERT_EQ(small.size(), 2u);
  EXPECT_EQ(small[0].fill, 1.0f);
  EXPECT_TRUE(small[1].coarsest);
  EXPECT_EQ(small[1].region, cv::Rect(0, 0, 512, 512));
  EXPECT_FLOAT_EQ(small[1].fill, kSsdMobilenetV1Traits.second_look);
}

TEST(SsdMobilenetV1, FindsTheAstronautAndGraceHopperWhereTinyDoes) {
  for (const auto& [file, key] : {std::pair{"astronaut_eileen_collins_512.png", "astronaut.png"},
                                  std::pair{"grace_hopper_512x600.jpg", "grace_hopper.jpg"}}) {
    auto boxes = Ssd().Detect(Face(file));
    ASSERT_TRUE(boxes.ok()) << boxes.status();
    ASSERT_EQ(boxes->size(), 1u) << file;
    std::printf("ssd %s: (%.1f, %.1f, %.1f, %.1f) score %.3f, IoU vs tiny golden %.3f\n", file, (*boxes)[0].x,
                (*boxes)[0].y, (*boxes)[0].w, (*boxes)[0].h, (*boxes)[0].score, IoU((*boxes)[0], GoldenBox(key)));
    EXPECT_GT((*boxes)[0].score, 0.9f);
    EXPECT_GT(IoU((*boxes)[0], GoldenBox(key)), 0.5f);  // a different box convention, same face
  }
}

TEST(SsdMobilenetV1, DeviceBytesEqualTheCatalogueAndInputIsFixed) {
  EXPECT_EQ(Ssd().DeviceBytes(), (*Catalogue().Get("ssd_mobilenetv1"))->device_bytes);
  EXPECT_EQ(Ssd().Detect(Face("astronaut_eileen_collins_512.png"), 416).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// Tiled stems (ops::TiledPrefix) against the whole forward on real images: the network outputs
// agree up to float summation order, at every tile size the OOM ladder tries.
// Measured at 256/128/64-px tiles: tiny 0 (bit-identical), ssd <= 9.6e-7 (boxes and scores).
constexpr double kMaxTiledOutputDiff = 1e-5;

double MaxDiff(const at::Tensor& a, const at::Tensor& b) { return (a - b).abs().max().item<double>(); }

TEST(TiledDetection, TinyStemInTilesGivesTheWholeForwardOutput) {
  for (int input : {416, 640}) {  // 416: the 1280-px working image; 640: a larger scale
    const at::Tensor x = ToBatchTensor(GroupPhotos()[0].rgb, input, /*center=*/false);
    const at::Tensor whole = Tiny().Forward(x);
    for (int tile : {256, 128, 64}) {
      const double d = MaxDiff(Tiny().Forward(x, tile), whole);
      std::printf("tiny @%d, %d-px tiles: max abs output difference %.3g\n", input, tile, d);
      EXPECT_LE(d, kMaxTiledOutputDiff) << "input " << input << " tile " << tile;
    }
  }
}

TEST(TiledDetection, SsdStemInTilesGivesTheWholeForwardOutput) {
  const at::Tensor x = ToBatchTensor(GroupPhotos()[0].rgb, SsdMobilenetV1::kInputSize, /*center=*/false);
  const auto [boxes, scores] = Ssd().Forward(x);
  for (int tile : {256, 128, 64}) {
    const auto [tboxes, tscores] = Ssd().Forward(x, tile);
    const double db = MaxDiff(tboxes, boxes), ds = MaxDiff(tscores, scores);
    std::printf("ssd, %d-px tiles: max abs difference boxes %.3g, scores %.3g\n", tile, db, ds);
    EXPECT_LE(db, kMaxTiledOutputDiff) << "tile " << tile;
    EXPECT_LE(ds, kMaxTiledOutputDiff) << "tile " << tile;
  }
}

TEST(TiledDetection, TiledMultiScaleDetectionFindsTheSameBoxes) {
  for (const FaceDetector* det : {static_cast<const FaceDetector*>(&Tiny()), static_cast<const FaceDetector*>(&Ssd())}) {
    const cv::Mat rgb = GroupPhotos()[0].rgb;
    MultiScaleOptions o;
    o.min_face_px = 120;  // the faces are 210-250 px: fewer passes, the same comparison
    auto whole = DetectMultiScale(*det, rgb, o);
    o.tile_px = 64;
    auto tiled = DetectMultiScale(*det, rgb, o);
    ASSERT_TRUE(whole.ok()) << whole.status();
    ASSERT_TRUE(tiled.ok()) << tiled.status();
    ASSERT_EQ(tiled->size(), whole->size());
    ASSERT_FALSE(whole->empty());
    float shift = 0;
    for (size_t i = 0; i < whole->size(); ++i) {
      const FaceBox &a = (*whole)[i], &b = (*tiled)[i];
      for (float d : {a.x - b.x, a.y - b.y, a.w - b.w, a.h - b.h}) shift = std::max(shift, std::abs(d));
    }
    std::printf("%s tiled (64 px) vs whole: %zu boxes, max coordinate shift %.4f px\n",
                det == &Tiny() ? "tiny" : "ssd", whole->size(), shift);
    EXPECT_LE(shift, 0.01f);
  }
}

// for_each_pass running passes on two threads at once (as the pipeline does, parallel.h) gives
// the boxes of the passes in order, bit for bit: each pass's boxes are kept apart and merged in
// pass order. The hook sees every pass it is given once (it is called once per phase: the
// ungated levels, then each gated level's chosen tiles).
TEST(MultiScaleDetection, ConcurrentPassesGiveTheSameBoxesInTheSameOrder) {
  const cv::Mat rgb = GroupPhotos()[0].rgb;
  MultiScaleOptions o;
  o.min_face_px = 120;  // the faces are 210-250 px: fewer passes, the same comparison
  auto in_order = DetectMultiScale(Ssd(), rgb, o);
  std::atomic<size_t> ran{0};
  size_t passes = 0;
  o.for_each_pass = [&](size_t n, const std::function<absl::Status(size_t)>& body) {
    passes += n;
    std::atomic<size_t> next{0};
    std::vector<absl::Status> st(n);
    auto work = [&] {
      for (size_t i; (i = next.fetch_add(1)) < n; ++ran) st[i] = body(i);
    };
    std::thread helper(work);
    work();
    helper.join();
    for (const absl::Status& s : st) {
      if (!s.ok()) return s;
    }
    return absl::OkStatus();
  };
  auto concurrent = DetectMultiScale(Ssd(), rgb, o);
  ASSERT_TRUE(in_order.ok()) << in_order.status();
  ASSERT_TRUE(concurrent.ok()) << concurrent.status();
  EXPECT_GT(passes, 1u);
  EXPECT_EQ(ran.load(), passes);
  ASSERT_EQ(concurrent->size(), in_order->size());
  ASSERT_FALSE(in_order->empty());
  for (size_t i = 0; i < in_order->size(); ++i) {
    const FaceBox &a = (*in_order)[i], &b = (*concurrent)[i];
    EXPECT_EQ(a.x, b.x);
    EXPECT_EQ(a.y, b.y);
    EXPECT_EQ(a.w, b.w);
    EXPECT_EQ(a.h, b.h);
    EXPECT_EQ(a.score, b.score);
  }
}

TEST(TiledDetection, AWindowThatDoesNotScaleByTheStrideIsAnError) {
  const at::Tensor x = at::zeros({1, 3, 64, 64});
  EXPECT_THROW(ops::TiledPrefix(x, [](const at::Tensor& t) { return t; }, 8, 32, 32), c10::Error);
  const at::Tensor ok = ops::TiledPrefix(x + 1, [](const at::Tensor& t) { return at::avg_pool2d(t, {8, 8}); }, 8, 8, 16);
  EXPECT_EQ(ok.sizes(), (std::vector<int64_t>{1, 3, 8, 8}));
  EXPECT_EQ(ok.sum().item<float>(), 3 * 64.0f);
}


// Proposal gating (multiscale.h): level 0 runs windows around level 1's proposals instead of its
// 15 tiles. On the 3-face group photo: 12 passes instead of 23 (measured), the full scan's boxes.
TEST(MultiScaleDetection, GatedLevelsKeepTheFullScansBoxesWithFewerPasses) {
  const Truth t = GroupPhotos()[0];  // GroupPhotos() returns a copy
  MultiScaleOptions o;
  size_t ran = 0;
  o.before_pass = [&ran](size_t, size_t) { return ++ran, absl::OkStatus(); };
  auto gated = DetectMultiScale(Ssd(), t.rgb, o);
  const size_t gated_passes = ran;
  ran = 0;
  o.gate_tiles = false;
  auto full = DetectMultiScale(Ssd(), t.rgb, o);
  ASSERT_TRUE(gated.ok()) << gated.status();
  ASSERT_TRUE(full.ok()) << full.status();
  const size_t planned = PlanPasses(Ssd(), t.rgb.cols, t.rgb.rows, o).size();
  std::printf("ssd %s: gated %zu of %zu passes, %zu boxes; full %zu passes, %zu boxes\n", t.name.c_str(),
              gated_passes, planned, gated->size(), ran, full->size());
  EXPECT_EQ(ran, planned);
  EXPECT_LT(gated_passes, planned - 5);  // level 0 is 15 of the 23
  ASSERT_EQ(gated->size(), full->size());
  for (const FaceBox& g : *gated) {
    float best = 0;
    for (const FaceBox& f : *full) best = std::max(best, IoU(g, f));
    EXPECT_GE(best, 0.9f) << "gated box at " << g.x << "," << g.y;
  }
  const Score s = ScoreDetections(t, *gated);
  EXPECT_EQ(s.found, s.faces);
  EXPECT_EQ(s.false_boxes, 0);
}

}  // namespace
}  // namespace fusion::faceapi
