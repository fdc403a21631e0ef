// The face-size pyramid of multiscale.h: the planned passes (finest level, tile overlap, bounds)
// for given image sizes and min_face_px, and recall on made collages (collage.h) of small faces
// on clutter, where every pasted face must be found and no box may land elsewhere.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>

#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <opencv2/photo.hpp>

#include "collage.h"
#include "models/faceapi/multiscale.h"
#include "models/faceapi/ssd_mobilenet_v1.h"

namespace fusion::faceapi {
namespace {

// Network pixels per image pixel of a pass.
double ScaleOf(const DetectionPass& p) {
  return p.input_size * static_cast<double>(p.fill) / std::max(p.region.width, p.region.height);
}

MultiScaleOptions MinFace(int px) {
  MultiScaleOptions o;
  o.min_face_px = px;
  return o;
}

TEST(PyramidPlan, FinestLevelMapsMinFacePxToTheDetectorsSmallestReliableFace) {
  for (const DetectorTraits& d : {kTinyFaceDetectorTraits, kSsdMobilenetV1Traits}) {
    for (int min_face : {40, 80, 200}) {
      const std::vector<DetectionPass> passes = PlanPasses(d, 4000, 3000, MinFace(min_face));
      ASSERT_FALSE(passes.empty());
      EXPECT_EQ(passes.front().level, 0);
      // The level's scale is face_min_px / min_face_px; a tile's input may round it up by < 1%.
      const double want = static_cast<double>(d.face_min_px) / min_face;
      EXPECT_NEAR(ScaleOf(passes.front()), want, 0.01 * want) << "min_face_px " << min_face;
    }
  }
  // Below face_min_px / max_upscale the finest level stops growing: 2x at most.
  const std::vector<DetectionPass> small = PlanPasses(kTinyFaceDetectorTraits, 1000, 1000, MinFace(8));
  EXPECT_NEAR(ScaleOf(small.front()), 2.0, 0.02);
}

TEST(PyramidPlan, LevelsHalveDownToTheWholeFrameAsOneFace) {
  for (const DetectorTraits& d : {kTinyFaceDetectorTraits, kSsdMobilenetV1Traits}) {
    const int w = 2560, h = 1280;
    const std::vector<DetectionPass> passes = PlanPasses(d, w, h, MinFace(40));
    std::map<int, double> scale_of_level;
    for (const DetectionPass& p : passes) {
      if (p.fill == 1.0f) scale_of_level[p.level] = std::max(scale_of_level[p.level], ScaleOf(p));
    }
    for (size_t k = 1; k + 1 < scale_of_level.size(); ++k) {  // the last one may be the whole image at 512 (SSD)
      EXPECT_NEAR(scale_of_level[k] / scale_of_level[k - 1], 0.5, 0.05) << "level " << k;
    }
    const DetectionPass& last = passes.back();
    EXPECT_TRUE(last.coarsest);
    EXPECT_EQ(last.region, cv::Rect(0, 0, w, h));
    // A face filling the frame (the short side) fits the band there, or the input is fixed.
    if (d.free_input) EXPECT_LE(h * ScaleOf(last), d.face_max_px * 1.1);
  }
}

TEST(PyramidPlan, TilesCoverEachLevelAndOverlapByItsLargestFace) {
  for (const DetectorTraits& d : {kTinyFaceDetectorTraits, kSsdMobilenetV1Traits}) {
    const int w = 5000, h = 3500;
    const std::vector<DetectionPass> passes = PlanPasses(d, w, h, MinFace(40));
    std::map<int, std::vector<cv::Rect>> tiles;
    std::map<int, double> scale;
    for (const DetectionPass& p : passes) tiles[p.level].push_back(p.region), scale[p.level] = ScaleOf(p);
    int tiled_levels = 0;
    for (const auto& [level, rects] : tiles) {
      cv::Mat covered = cv::Mat::zeros(h, w, CV_8U);
      for (const cv::Rect& r : rects) covered(r).setTo(1);
      EXPECT_EQ(cv::countNonZero(covered), w * h) << "level " << level;
      if (rects.size() < 2) continue;
      ++tiled_levels;
      // The largest face of the level in image pixels: face_max_px network pixels.
      const double largest = d.face_max_px / scale[level];
      for (const cv::Rect& a : rects) {
        for (const cv::Rect& b : rects) {
          const cv::Rect i = a & b;
          const bool row_neighbour = a.y == b.y && b.x > a.x && b.x < a.x + a.width;
          const bool column_neighbour = a.x == b.x && b.y > a.y && b.y < a.y + a.height;
          if (row_neighbour) EXPECT_GE(i.width, largest) << "level " << level;
          if (column_neighbour) EXPECT_GE(i.height, largest) << "level " << level;
        }
      }
    }
    EXPECT_GE(tiled_levels, 2);
  }
}

TEST(PyramidPlan, EveryPassIsBoundedAndTheCountFollowsTheArea) {
  struct Case {
    int w, h;
  };
  for (const Case c : {Case{512, 512}, Case{1920, 1280}, Case{2560, 1280}, Case{7728, 10304}, Case{10328, 7744}}) {
    for (int max_input : {1024, 640, 416}) {
      MultiScaleOptions o;
      o.max_input = max_input;
      const std::vector<DetectionPass> tiny = PlanPasses(kTinyFaceDetectorTraits, c.w, c.h, o);
      uint64_t px = 0;
      for (const DetectionPass& p : tiny) {
        EXPECT_LE(p.input_size, max_input);
        EXPECT_EQ(p.input_size % 32, 0);
        px += static_cast<uint64_t>(p.input_size) * p.input_size;
      }
      // Network pixels: the finest level's area (1.2^2 of the image at min_face_px 40) over all
      // levels (4/3) times the tile overlap, within 2.6x of that.
      const double finest = 1.44 * c.w * c.h * 4 / 3;
      EXPECT_LE(px, 2.6 * finest + 4 * 1024 * 1024) << c.w << "x" << c.h << " cap " << max_input;
      EXPECT_EQ(LargestPassInput(kTinyFaceDetectorTraits, c.w, c.h, o),
                std::max_element(tiny.begin(), tiny.end(), [](auto& a, auto& b) { return a.input_size < b.input_size; })->input_size);
    }
    for (const DetectionPass& p : PlanPasses(kSsdMobilenetV1Traits, c.w, c.h, {})) EXPECT_EQ(p.input_size, 512);
  }
  // A 512-px image: one level-0 pass at round32(512 * 1.2) = 640, not 1024.
  EXPECT_EQ(LargestPassInput(kTinyFaceDetectorTraits, 512, 512, {}), 640);
}

// Faces 40-80 px wide in a 2400x1600 collage on clutter (the case max(W,H)/3 scans missed):
// the default detector finds all but two (of 60) and puts no box anywhere else.
TEST(PyramidRecall, SsdFinds40To80PxFacesInA2400PxCollageWithoutFalseBoxes) {
  std::vector<float> widths;
  for (int i = 0; i < 60; ++i) widths.push_back(40.f + 40.f * (i % 11) / 10);
  const Truth t = MakeCollage(2400, 1600, FaceCrops(GroupPhotos()), widths, 11, "small faces");
  ASSERT_GE(t.faces.size(), 55u);
  auto dets = DetectMultiScale(Ssd(), t.rgb);
  ASSERT_TRUE(dets.ok()) << dets.status();
  const Score s = ScoreDetections(t, *dets);
  std::printf("ssd collage 2400x1600 of %d faces 40-80 px: %d found, %d false boxes%s\n", s.faces, s.found,
              s.false_boxes, s.false_list.c_str());
  for (const FaceBox& f : t.faces) {
    float best = 0;
    for (const FaceBox& d : *dets) best = std::max(best, IoU(d, f));
    if (best < 0.4f) std::printf("  missed (%.0f,%.0f %.0fx%.0f), best IoU %.2f\n", f.x, f.y, f.w, f.h, best);
  }
  if (std::getenv("FUSION_SAVE_COLLAGE") != nullptr) {
    cv::Mat bgr;
    cv::cvtColor(t.rgb, bgr, cv::COLOR_RGB2BGR);
    for (const FaceBox& b : t.faces) cv::rectangle(bgr, cv::Rect(b.x, b.y, b.w, b.h), {0, 255, 0}, 1);
    for (const FaceBox& b : *dets) cv::rectangle(bgr, cv::Rect(b.x, b.y, b.w, b.h), {0, 0, 255}, 1);
    cv::imwrite(std::getenv("FUSION_SAVE_COLLAGE"), bgr);
  }
  // Measured: 58 of 60 (96.7%; 59 without confirmation of weak boxes, multiscale.h). Missed: a
  // downward-looking 80-px face (sample1's left woman), which SSD finds in neither of its two
  // levels (80 and 40 network px), and a 72-px face whose only box scores below 0.72 in one
  // pass. The goal is 97%; no false box is worth more than that one face. With proposal gating
  // (multiscale.h, level 0 in windows around level 1's proposals): 59 of 60, the one missed a
  // 40-px face at (2313,320).
  EXPECT_GE(s.found, s.faces - 2);
  EXPECT_EQ(s.false_boxes, 0);
}

// SSD's single-pass response has a gap at 64-96 network px (detector.h). A 1280x720 frame at
// min_face_px 120 is one whole-image pass at 0.4 network px per image px, which puts a 241-px
// face at 96 px, in the gap: crops 0, 8 and 20 of the collage set were missed there (bench/detect
// `sweep ssd 1280 720 120`: 47 of 60 faces of 120-480 px before the second look, 54 after). The
// second look at 0.6x sees them at 58 px.
TEST(PyramidRecall, SsdSecondLookFindsFacesInTheGapOfItsSinglePassResponse) {
  const std::vector<FaceCrop> crops = FaceCrops(GroupPhotos());
  const int w = 1280, h = 720;
  MultiScaleOptions o = MinFace(120);
  ASSERT_EQ(PlanPasses(Ssd(), w, h, o).size(), 2u);  // the whole frame, and the second look
  for (size_t i : {0, 8, 20}) {
    Truth t;
    t.rgb = Clutter(w, h, 2000 + static_cast<uint32_t>(i));
    const float fw = 241;
    const double k = fw / crops[i].face.w;
    t.faces.push_back(Paste(t.rgb, crops[i], fw,
                            cv::Point(static_cast<int>(w * 0.4 - (crops[i].face.x + crops[i].face.w / 2) * k),
                                      static_cast<int>(h * 0.45 - (crops[i].face.y + crops[i].face.h / 2) * k))));
    auto dets = DetectMultiScale(Ssd(), t.rgb, o);
    ASSERT_TRUE(dets.ok()) << dets.status();
    const Score s = ScoreDetections(t, *dets);
    EXPECT_EQ(s.found, 1) << "crop " << i << " at 241 px";
    EXPECT_EQ(s.false_boxes, 0) << "crop " << i << s.false_list;
  }
}

// A face centred on the right edge of the first level-0 tile is cut there (and dropped); the
// overlap holds it whole in the next tile, so it is found once, whole. With proposal gating
// (the default) level 0 runs windows around level 1's proposals instead: found once as well.
TEST(PyramidRecall, AFaceOnATileSeamIsFoundWhole) {
  const std::vector<FaceCrop> crops = FaceCrops(GroupPhotos());
  const int w = 2400, h = 900;
  Truth t;
  t.rgb = Clutter(w, h, 5);
  const std::vector<DetectionPass> passes = PlanPasses(Ssd(), w, h, {});
  ASSERT_GT(passes.size(), 2u);
  ASSERT_EQ(passes[1].level, 0);
  const int seam = passes[0].region.x + passes[0].region.width;  // right edge of the first tile
  for (int i = 0; i < 2; ++i) {
    const FaceCrop& c = crops[3 + i];
    const float fw = 70;
    const double k = fw / c.face.w;
    t.faces.push_back(Paste(t.rgb, c, fw, cv::Point(static_cast<int>(seam - (c.face.x + c.face.w / 2) * k),
                                                   static_cast<int>(150 + 400 * i - c.face.y * k))));
  }
  for (bool gated : {false, true}) {  // the planned tiles, and the windows around proposals
    MultiScaleOptions o;
    o.gate_tiles = gated;
    auto dets = DetectMultiScale(Ssd(), t.rgb, o);
    ASSERT_TRUE(dets.ok()) << dets.status();
    const Score s = ScoreDetections(t, *dets);
    std::printf("faces on the tile seam at x=%d (%s): %d of %d found, %d false boxes%s\n", seam,
                gated ? "gated" : "every tile", s.found, s.faces, s.false_boxes, s.false_list.c_str());
    EXPECT_EQ(s.found, 2) << (gated ? "gated" : "every tile");
    EXPECT_EQ(s.false_boxes, 0) << (gated ? "gated" : "every tile");
  }
}

// A scripted detector: boxes given in image pixels, returned at every pass whose scale
// (network px per image px) lies in the box's [min_scale, max_scale).
class ScriptedDetector final : public FaceDetector {
 public:
  struct Box { FaceBox box; double min_scale, max_scale; };
  ScriptedDetector(int image_w, std::vector<Box> boxes, DetectorTraits traits = kTinyFaceDetectorTraits)
      : image_w_(image_w), boxes_(std::move(boxes)), traits_(traits) {}
  absl::StatusOr<std::vector<FaceBox>> Detect(const cv::Mat& rgb, int, int, float min_score) const override {
    const double s = static_cast<double>(rgb.cols) / image_w_;  // the passes here are whole-image
    const float threshold = min_score > 0 ? min_score : std::max(traits_.min_score, 0.5f);
    std::vector<FaceBox> out;
    for (const Box& b : boxes_) {
      if (s < b.min_scale || s >= b.max_scale || b.box.score <= threshold) continue;
      out.push_back({static_cast<float>(b.box.x * s), static_cast<float>(b.box.y * s), static_cast<float>(b.box.w * s),
                     static_cast<float>(b.box.h * s), b.box.score});
    }
    return out;
  }
  int DefaultInputSize() const override { return 416; }
  bool FreeInputSize() const override { return true; }
  DetectorTraits Traits() const override { return traits_; }

 private:
  int image_w_;
  std::vector<Box> boxes_;
  DetectorTraits traits_;
};

TEST(PyramidMerge, AFaceSeenWithAnotherExtentAtAnotherLevelIsOneBoxAndNeighboursStayTwo) {
  const int w = 800, h = 600;
  const std::vector<DetectionPass> passes = PlanPasses(kTinyFaceDetectorTraits, w, h, MinFace(40));
  ASSERT_GE(passes.size(), 2u);
  ASSERT_TRUE(passes[0].region == cv::Rect(0, 0, w, h) && passes[1].region == cv::Rect(0, 0, w, h));
  const double s0 = ScaleOf(passes[0]), s1 = ScaleOf(passes[1]);
  // The collage's case: a tight 0.95 box at the finest level, a 0.55 box around it with hair at
  // the next (IoU 0.37 < nms_iou 0.4; the tight box, from another pass, confirms the weak one).
  // Two faces side by side whose boxes overlap by 10% of their area stay two.
  const ScriptedDetector det(w, {{{100, 100, 31, 46, 0.95f}, s0, 10.0},
                                 {{86, 95, 55, 71, 0.55f}, s1, s0},
                                 {{400, 200, 100, 120, 0.9f}, 0.0, 10.0},
                                 {{490, 200, 100, 120, 0.9f}, 0.0, 10.0}});
  auto dets = DetectMultiScale(det, cv::Mat(h, w, CV_8UC3, cv::Scalar::all(90)), MinFace(40));
  ASSERT_TRUE(dets.ok()) << dets.status();
  ASSERT_EQ(dets->size(), 3u);
  std::vector<float> xs;
  for (const FaceBox& b : *dets) xs.push_back(std::round(b.x));
  std::sort(xs.begin(), xs.end());
  EXPECT_EQ(xs, (std::vector<float>{100, 400, 490}));
  for (const FaceBox& b : *dets) {
    if (std::round(b.x) == 100) EXPECT_NEAR(b.w, 31, 0.5) << "the tight box is the one kept";
  }
}

// Box voting (multiscale.h): grid50's 150-px face, seen by two levels with two extents at nearly
// the same score (144x192 px at the coarser level, 105x144 px at the finer), gets nearly the same
// box whichever of the two scores a few thousandths higher (fp32 0.9465 / 0.9459, bf16 0.9450 /
// 0.9497): greedy NMS alone jumped from one extent to the other. A box scoring more than 0.02
// below does not move the merged one; a face seen with one extent keeps it.
TEST(PyramidMerge, NearTiedBoxesOfOneFaceAreVotedSoAFewThousandthsDoNotFlipItsExtent) {
  const int w = 800, h = 600;
  const std::vector<DetectionPass> passes = PlanPasses(kTinyFaceDetectorTraits, w, h, MinFace(40));
  ASSERT_GE(passes.size(), 2u);
  const double s0 = ScaleOf(passes[0]), s1 = ScaleOf(passes[1]);
  auto merged = [&](float fine, float coarse) {
    const ScriptedDetector det(w, {{{100, 100, 105, 144, fine}, s0, 10.0},
                                   {{80, 50, 144, 192, coarse}, s1, s0},
                                   {{500, 300, 100, 120, 0.9f}, 0.0, 10.0}});
    auto dets = DetectMultiScale(det, cv::Mat(h, w, CV_8UC3, cv::Scalar::all(90)), MinFace(40));
    EXPECT_TRUE(dets.ok()) << dets.status();
    EXPECT_EQ(dets->size(), 2u);
    FaceBox face{}, other{};
    for (const FaceBox& b : *dets) (b.x < 300 ? face : other) = b;
    EXPECT_FLOAT_EQ(other.x, 500);
    EXPECT_FLOAT_EQ(other.w, 100);
    EXPECT_FLOAT_EQ(other.h, 120);
    return face;
  };
  const FaceBox a = merged(0.9459f, 0.9465f), b = merged(0.9497f, 0.9450f);
  std::printf("voted box, fp32-like scores: %.1f,%.1f %.1fx%.1f; bf16-like: %.1f,%.1f %.1fx%.1f\n", a.x, a.y, a.w, a.h,
              b.x, b.y, b.w, b.h);
  EXPECT_NEAR(a.w, 124.8, 0.5);  // (144 * 1 + 105 * 0.97) / 1.97
  EXPECT_NEAR(b.w, 121.9, 0.5);  // (105 * 1 + 144 * 0.765) / 1.765
  EXPECT_NEAR(a.y, 74.6, 0.5);  // (50 * 1 + 100 * 0.97) / 1.97
  EXPECT_NEAR(b.y, 78.3, 0.5);  // 3.7 px from a's; the top box alone: 50 px (and 39 px in width)
  EXPECT_FLOAT_EQ(a.score, 0.9465f);
  EXPECT_FLOAT_EQ(b.score, 0.9497f);
  const FaceBox apart = merged(0.97f, 0.94f);  // 0.03 below: the top box alone
  EXPECT_FLOAT_EQ(apart.x, 100);
  EXPECT_FLOAT_EQ(apart.w, 105);
}

// Confirmation of a weak box (multiscale.h): SSD's rule (kept from 0.5, weak below 0.72, support
// from 0.3) on a free-input pyramid. A weak box seen by another level only below the threshold
// is confirmed and kept (sample4's laughing face in the bench's grid: 0.72 at one level,
// 0.3-0.5 at the others); a weak box no other pass sees is dropped (a cap badge); a box under
// the threshold is never kept, however many passes see it; a support box from the weak box's
// own pass does not confirm it.
TEST(PyramidMerge, AWeakBoxIsConfirmedByAnotherPassBelowTheThresholdButNotByItsOwn) {
  const int w = 800, h = 600;
  DetectorTraits traits = kTinyFaceDetectorTraits;
  traits.confirm_below = kSsdMobilenetV1Traits.confirm_below;
  traits.min_score = kSsdMobilenetV1Traits.min_score;
  traits.support_score = kSsdMobilenetV1Traits.support_score;
  const std::vector<DetectionPass> passes = PlanPasses(traits, w, h, MinFace(40));
  ASSERT_GE(passes.size(), 2u);
  ASSERT_TRUE(passes[0].region == cv::Rect(0, 0, w, h) && passes[1].region == cv::Rect(0, 0, w, h));
  const double s0 = ScaleOf(passes[0]), s1 = ScaleOf(passes[1]);
  const ScriptedDetector det(w, {{{100, 100, 60, 80, 0.70f}, s0, 10.0},   // weak, finest level
                                 {{104, 98, 58, 84, 0.40f}, s1, s0},      // its support, next level
                                 {{300, 100, 60, 80, 0.70f}, s0, 10.0},   // weak, seen once
                                 {{302, 100, 60, 80, 0.20f}, s1, s0},     // under the support score
                                 {{500, 100, 60, 80, 0.45f}, 0.0, 10.0},  // under the threshold
                                 {{100, 400, 60, 80, 0.70f}, s0, 10.0},   // weak, and its own
                                 {{102, 402, 60, 80, 0.40f}, s0, 10.0}},  // pass's support
                             traits);
  auto dets = DetectMultiScale(det, cv::Mat(h, w, CV_8UC3, cv::Scalar::all(90)), MinFace(40));
  ASSERT_TRUE(dets.ok()) << dets.status();
  ASSERT_EQ(dets->size(), 1u);
  EXPECT_EQ(std::round((*dets)[0].x), 100);
  EXPECT_EQ(std::round((*dets)[0].y), 100);
  EXPECT_FLOAT_EQ((*dets)[0].score, 0.70f);
  // Without a support score only kept boxes confirm: the first weak box is dropped as well.
  traits.support_score = 0;
  const ScriptedDetector unsupported(w, {{{100, 100, 60, 80, 0.70f}, s0, 10.0}, {{104, 98, 58, 84, 0.40f}, s1, s0}},
                                     traits);
  auto none = DetectMultiScale(unsupported, cv::Mat(h, w, CV_8UC3, cv::Scalar::all(90)), MinFace(40));
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_TRUE(none->empty());
}

// The rolled second look (multiscale.h): faces rolled by 40 degrees, 48-240 px, in a 2400x1600
// collage on clutter. SSD scores some of them under its threshold in every pass of the scan
// (the bench's grid50 face: 0.46 at best); their context views turned back by 15-30 degrees
// score 0.75-0.98. Without the second look (relook_rolls empty) fewer are found; with it, more,
// and no box lands anywhere else.
TEST(PyramidRecall, RolledFacesUnderTheThresholdAreFoundByTheRolledSecondLook) {
  std::vector<float> widths;
  for (int rep = 0; rep < 400; ++rep) {
    for (int i = 0; i <= 18; ++i) widths.push_back(48.f * std::pow(5.f, i / 18.f));
  }
  double area = 0;
  std::vector<float> fit;
  for (float f : widths) {
    area += 3.0 * f * f;
    if (area > 0.5 * 2400 * 1600) break;
    fit.push_back(f);
  }
  const Truth t = MakeCollage(2400, 1600, RolledCrops(FaceCrops(GroupPhotos()), 40), fit, 7, "rolled faces");
  MultiScaleOptions without;
  without.relook_rolls.clear();
  auto before = DetectMultiScale(Ssd(), t.rgb, without);
  ASSERT_TRUE(before.ok()) << before.status();
  auto after = DetectMultiScale(Ssd(), t.rgb);
  ASSERT_TRUE(after.ok()) << after.status();
  const Score b = ScoreDetections(t, *before), a = ScoreDetections(t, *after);
  std::printf("rolled 40 degrees, %d faces 48-240 px: %d found without the second look (%d boxes elsewhere%s), %d "
              "with it (%d%s)\n", a.faces, b.found, b.false_boxes, b.false_list.c_str(), a.found, a.false_boxes,
              a.false_list.c_str());
  // Measured: 31 and 35 of 37. The one box "elsewhere" in both is a real face's loose box (the
  // 68-px face at (866,1107) boxed 134x166 px, IoU < 0.4 with its tight crop box).
  EXPECT_GE(a.found, b.found + 2);
  EXPECT_LE(a.false_boxes, b.false_boxes);
  // Every box the second look adds is on a face.
  for (const FaceBox& d : *after) {
    bool old = false, on_face = false;
    for (const FaceBox& e : *before) old = old || IoU(d, e) > 0.9f;
    for (const FaceBox& f : t.faces) on_face = on_face || IoU(d, f) >= 0.2f;
    EXPECT_TRUE(old || on_face) << "(" << d.x << "," << d.y << " " << d.w << "x" << d.h << ") " << d.score;
  }
}

// The group photos with every face and ignore region painted out (cv::inpaint over 1.5x each
// box), as they are and rolled by 20 degrees: no box, with the rolled second look on.
TEST(PyramidRecall, GroupPhotosWithTheirFacesPaintedOutGiveNoBox) {
  int images = 0;
  for (const Truth& t : GroupPhotos()) {
    cv::Mat mask = cv::Mat::zeros(t.rgb.size(), CV_8U);
    std::vector<FaceBox> all = t.faces;
    all.insert(all.end(), t.ignore.begin(), t.ignore.end());
    for (const FaceBox& b : all) {
      const float cx = b.x + b.w / 2, cy = b.y + b.h / 2;
      cv::rectangle(mask, cv::Point(cx - 0.75f * b.w, cy - 0.75f * b.h), cv::Point(cx + 0.75f * b.w, cy + 0.75f * b.h),
                    cv::Scalar(255), cv::FILLED);
    }
    cv::Mat bare;
    cv::inpaint(t.rgb, mask, bare, 5, cv::INPAINT_TELEA);
    cv::Mat rolled;
    cv::warpAffine(bare, rolled, cv::getRotationMatrix2D(cv::Point2f(bare.cols / 2.f, bare.rows / 2.f), 20, 1.0),
                   bare.size(), cv::INTER_LINEAR, cv::BORDER_REFLECT);
    for (const cv::Mat* img : {&bare, &rolled}) {
      auto dets = DetectMultiScale(Ssd(), *img);
      ASSERT_TRUE(dets.ok()) << dets.status();
      for (const FaceBox& d : *dets) ADD_FAILURE() << "image " << images << ": (" << d.x << "," << d.y << " " << d.w << "x" << d.h << ") " << d.score;
      ++images;
    }
  }
  EXPECT_EQ(images, 12);
}

// A strip too thin to hold a face the scan keeps costs nothing (a 100000x1 PNG took 368 passes);
// a panorama keeps its passes.
TEST(PyramidPlan, AStripThinnerThanTheSmallestKeptFaceHasNoPasses) {
  for (const DetectorTraits& d : {kSsdMobilenetV1Traits, kTinyFaceDetectorTraits}) {
    EXPECT_TRUE(PlanPasses(d, 100000, 1, MinFace(40)).empty());
    EXPECT_TRUE(PlanPasses(d, 60000, 2, MinFace(40)).empty());
    EXPECT_TRUE(PlanPasses(d, 2, 60000, MinFace(40)).empty());
    EXPECT_FALSE(PlanPasses(d, 8000, 500, MinFace(40)).empty());
    EXPECT_FALSE(PlanPasses(d, 512, 40, MinFace(40)).empty());  // a 40-px strip may hold a 40-px face
  }
}

TEST(PyramidRecall, BadOptionsAreInvalidArgument) {
  const cv::Mat rgb(64, 64, CV_8UC3, cv::Scalar::all(90));
  MultiScaleOptions o;
  o.min_face_px = 0;
  EXPECT_EQ(DetectMultiScale(Ssd(), rgb, o).status().code(), absl::StatusCode::kInvalidArgument);
  o = {};
  o.max_input = 400;
  EXPECT_EQ(DetectMultiScale(Ssd(), rgb, o).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace fusion::faceapi
