// Cancellation inside a running stage, with the real networks (pipeline_env.h): a job cancelled
// between the faces of a per-face stage, the tiles of a tiled enhance or the detection passes
// ends CANCELLED before the stage ends, naming the stage and the unit that did not run; the
// OOM ladder passes it through at once, so no lease and no reservation remain.
#include <gtest/gtest.h>

#include <climits>

#include <opencv2/core.hpp>

#include "pipeline_env.h"

namespace fusion {
namespace {

// Says "cancelled" at its `at`-th look at the flag (1-based) once `stage` has started (its
// progress lines, "detect (target image: pass 2 of 9)", count as the stage), and counts its
// looks there: the runner looks once before each unit (face, tile, detection pass) of the stage
// and once more at the next stage's boundary. `at` INT_MAX never cancels.
class CancelInStage : public Recorder {
 public:
  CancelInStage(std::string stage, int at) : stage_(std::move(stage)), at_(at) {}
  bool Cancelled() const override {
    if (started.empty() || started.back().rfind(stage_, 0) != 0) return false;
    return ++looks >= at_;
  }
  mutable int looks = 0;

 private:
  const std::string stage_;
  const int at_;
};

// Three copies of the small Grace side by side (768x300): three target faces.
const std::string& ThreeGraces() {
  static const std::string b = [] {
    const cv::Mat one = Decode(SmallGrace(), cv::IMREAD_COLOR);
    cv::Mat three;
    cv::hconcat(std::vector<cv::Mat>{one, one, one}, three);
    return Png(three);
  }();
  return b;
}

TEST(Cancel, CancelBetweenTilesEndsTheEnhanceStageEarlyAndLeavesNoLease) {
  // Enhance x2 of the one 256-px face crop, forced into the ladder's first tile size (128 px):
  // 2x2 tiles.
  v1::JobOptions o = Ratio(1);
  o.set_enhance_scale(2);
  E().faults.Set("enhance", FaultMode::kFailUntiled);
  CancelInStage whole("enhance", INT_MAX);
  auto base = Swap(o, SmallGrace(), &whole);
  CancelInStage rec("enhance", 3);  // looks: face 1, tile 1, tile 2 -> cancelled before tile 2
  auto out = Swap(o, SmallGrace(), &rec);
  E().faults.Set("enhance", FaultMode::kNone);
  ASSERT_TRUE(base.ok()) << base.status();
  ASSERT_EQ(StageOf(base->report, "enhance")->tile(), 128u);
  EXPECT_EQ(whole.looks, 1 + 4 + 1);  // the face, its 4 tiles, the blend stage's boundary
  EXPECT_EQ(out.status().code(), absl::StatusCode::kCancelled) << out.status();
  EXPECT_EQ(out.status().message(), "job cancelled during stage 'enhance' (face 1 of 1, tile 2 of 4)");
  EXPECT_EQ(rec.looks, 3);  // one tile of the four ran
  ASSERT_FALSE(rec.started.empty());
  EXPECT_EQ(rec.started.back(), "enhance") << "a later stage started";
  ExpectAtRest();
}

TEST(Cancel, CancelBetweenFacesEndsThePerFaceStageEarly) {
  CancelInStage whole("generate", INT_MAX);
  auto base = Swap(Ratio(1), ThreeGraces(), &whole);
  ASSERT_TRUE(base.ok()) << base.status();
  ASSERT_EQ(base->report.faces_swapped(), 3u);
  EXPECT_EQ(whole.looks, 3 + 1);  // three faces, the blend stage's boundary
  CancelInStage rec("generate", 2);
  auto out = Swap(Ratio(1), ThreeGraces(), &rec);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kCancelled) << out.status();
  EXPECT_EQ(out.status().message(), "job cancelled during stage 'generate' (face 2 of 3)");
  EXPECT_EQ(rec.looks, 2);  // one face of three was generated
  EXPECT_EQ(rec.started.back(), "generate");
  ExpectAtRest();
}

TEST(Cancel, CancelBetweenDetectionPassesNamesTheImageAndPass) {
  // Images this small take two SSD passes each (the whole image, and the second look at 0.6x:
  // multiscale.h) and one orientation pass (its face): the source's three ran, the target's
  // first is where the cancel is seen.
  CancelInStage rec("detect", 4);
  auto out = Swap(Ratio(1), SmallGrace(), &rec);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kCancelled) << out.status();
  EXPECT_EQ(out.status().message(), "job cancelled during stage 'detect' (target image, pass 1 of 2)");
  EXPECT_EQ(rec.looks, 4);
  EXPECT_EQ(rec.started, (std::vector<std::string>{"decode", "detect", "detect (source image: pass 1 of 2)",
                                                   "detect (source image: pass 2 of 2)"}));
  CancelInStage turn("detect", 3);  // at the source's orientation pass
  out = Swap(Ratio(1), SmallGrace(), &turn);
  EXPECT_EQ(out.status().message(), "job cancelled during stage 'detect' (source image, orientation pass 1 of 1)");
  ExpectAtRest();
}

// The result's encode is one unit that cannot stop (seconds for a large result) and was no
// stage: a cancel (or the drain deadline) during the last stage let it run; now it is a
// checkpoint of its own.
TEST(Cancel, ACancelDuringTheLastStageEndsTheJobBeforeTheEncode) {
  CancelInStage rec("score", 2);  // looks: face 1 of the score stage, then the encode's
  auto out = Swap(Ratio(1), SmallGrace(), &rec);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kCancelled) << out.status();
  EXPECT_EQ(out.status().message(), "job cancelled before stage 'encode'");
  EXPECT_EQ(rec.looks, 2);
  ExpectAtRest();
}

TEST(Cancel, CancelInTheCpuFallbackPassesThroughTheLadder) {
  // Every device attempt fails: the CPU fallback runs the per-face loop, and is cancelled there.
  E().faults.Set("generate", FaultMode::kFailDevice);
  CancelInStage rec("generate", 2);
  auto out = Swap(Ratio(1), ThreeGraces(), &rec);
  E().faults.Set("generate", FaultMode::kNone);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kCancelled) << out.status();
  EXPECT_EQ(out.status().message(), "job cancelled during stage 'generate' (face 2 of 3)");
  EXPECT_TRUE(rec.degradations.empty()) << "a cancelled stage reports no degradation";
  ExpectAtRest();
}

}  // namespace
}  // namespace fusion
