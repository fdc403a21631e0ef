// Faces cut by the frame edge (frame_edge.h) with the real networks: Grace Hopper cropped so
// that 20, 40 or 60% of her face box lies outside the frame on each side. The landmarks of a cut
// face come from a canvas padded beyond the frame and are compared with the uncut photo's; a face
// too far outside is left as it is and named in the job's degradations; a face inside the frame
// is swapped exactly as without the check.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "absl/strings/str_cat.h"
#include "models/faceapi/face_landmark_68.h"
#include "geometry/frame_edge.h"
#include "loader/model_store.h"
#include "pipeline/stages.h"
#include "pipeline_env.h"
#include "host_copy.h"
#include "made_cut.h"

namespace fusion {
namespace {


Picture Pic(const cv::Mat& bgr) {
  Picture p;
  p.what = "target image";
  p.bgr = bgr;
  cv::cvtColor(bgr, p.rgb, cv::COLOR_BGR2RGB);
  return p;
}

// Detect and landmarks of `bgr` (the stages' own functions on host copies of the models).
Picture Landmarked(const cv::Mat& bgr) {
  Picture p = Pic(bgr);
  EXPECT_TRUE(DetectFaces(*HostCopyOf("ssd_mobilenetv1"), 0, DetectSettings{}, p).ok());
  EXPECT_TRUE(FindLandmarks(*HostCopyOf("face_landmark_68"), p).ok());
  return p;
}

const cv::Mat& GraceBgr() {
  static const cv::Mat m = Decode(Grace(), cv::IMREAD_COLOR);
  return m;
}

// Grace's face box and points in the whole photo.
const DetectedFace& WholeFace() {
  static const DetectedFace f = [] {
    Picture p = Landmarked(GraceBgr());
    EXPECT_EQ(p.faces.size(), 1u);
    return p.faces.at(0);
  }();
  return f;
}

// The photo cropped so that `share` of the face box lies beyond `edge`; *offset: where the crop
// starts in the photo.
cv::Mat Cut(CutEdge edge, double share, cv::Point* offset) {
  const faceapi::FaceBox& b = WholeFace().box;
  const cv::Mat& g = GraceBgr();
  cv::Rect r(0, 0, g.cols, g.rows);
  if (edge == kRightEdge) r.width = static_cast<int>(std::lround(b.x + b.w * (1 - share)));
  if (edge == kBottomEdge) r.height = static_cast<int>(std::lround(b.y + b.h * (1 - share)));
  if (edge == kLeftEdge) r.x = static_cast<int>(std::lround(b.x + b.w * share));
  if (edge == kTopEdge) r.y = static_cast<int>(std::lround(b.y + b.h * share));
  if (edge == kLeftEdge) r.width = g.cols - r.x;
  if (edge == kTopEdge) r.height = g.rows - r.y;
  *offset = r.tl();
  return g(r).clone();
}

// Mean distance (px) of `pts` (in the crop) from the whole photo's points (shifted into the crop),
// in units of the face box's width.
double PointError(const faceapi::Landmarks68& pts, cv::Point offset) {
  const faceapi::Landmarks68& truth = WholeFace().landmarks;
  double sum = 0;
  for (size_t i = 0; i < pts.size(); ++i) {
    sum += std::hypot(pts[i].x + offset.x - truth[i].x, pts[i].y + offset.y - truth[i].y);
  }
  return sum / pts.size() / WholeFace().box.w;
}

// The net on the clipped box (what FindLandmarks did before the canvas).
faceapi::Landmarks68 ClippedBoxPoints(const Picture& p) {
  auto pts = HostCopyOf("face_landmark_68")->landmarks->Detect(p.rgb, p.faces.at(0).box);
  EXPECT_TRUE(pts.ok());
  return *pts;
}

void SaveWithPoints(const std::string& name, const Picture& p, const faceapi::Landmarks68& pts) {
  const char* dir = std::getenv("FUSION_TEST_OUT_DIR");  // for looking at: unset in CI
  if (dir == nullptr) return;
  cv::Mat m = p.bgr.clone();
  for (const faceapi::Point& q : pts) cv::circle(m, cv::Point(std::lround(q.x), std::lround(q.y)), 2, {0, 255, 0}, -1);
  cv::imwrite(std::string(dir) + "/" + name + ".png", m);
}

struct Case {
  CutEdge edge;
  double share;
};

TEST(FrameEdge, CutFacesGetPointsBeyondTheFrameAndTooFarOutsideAreSetAside) {
  const char* names[] = {"", "left", "right", "", "top", "", "", "", "bottom"};
  for (CutEdge edge : {kLeftEdge, kRightEdge, kTopEdge, kBottomEdge}) {
    for (double share : {0.2, 0.4, 0.6}) {
      cv::Point offset;
      Picture p = Landmarked(Cut(edge, share, &offset));
      const std::string name = absl::StrCat(names[edge], static_cast<int>(share * 100));
      SCOPED_TRACE(name);
      ASSERT_EQ(p.faces.size(), 1u);
      const faceapi::Landmarks68 before = ClippedBoxPoints(p);
      const float outside = OutsideShare(p.faces[0].landmarks, p.rgb.size());
      const float box_outside = BoxOutsideShare(p.faces[0].box, p.rgb.size());
      const double err = PointError(p.faces[0].landmarks, offset), err_before = PointError(before, offset);
      std::printf("%-9s box (%.0f,%.0f %.0fx%.0f) edges %u: outside %.2f (points) %.2f (box); point error %.3f (clipped box %.3f)\n",
                  name.c_str(), p.faces[0].box.x, p.faces[0].box.y, p.faces[0].box.w, p.faces[0].box.h,
                  CutEdges(p.faces[0].box, p.rgb.size()), outside, box_outside, err, err_before);
      SaveWithPoints(name, p, p.faces[0].landmarks);
      SaveWithPoints(name + "_clipped", p, before);
      EXPECT_NE(CutEdges(p.faces[0].box, p.rgb.size()) & edge, 0u);
      // Up to 40% cut the refit brings the points closer, or keeps them within 4% of the face
      // where the clipped box's were already that close (left40 in fp32 on an AVX2 CPU: 0.0297
      // against 0.0292). The 60% cuts at the right and top: the refit follows the net's squeezed
      // face (point error 0.42 and 0.25 against 0.37 and 0.21; set aside all the same).
      if (share <= 0.4) {
        if (err_before < 0.04) {
          EXPECT_LT(err, 0.04);
        } else {
          EXPECT_LT(err, err_before);
        }
      }
      // A video's tracked face (kMaxOutsideShareTracked) is swapped up to 40% out. (60% out is
      // measured at 0.46-0.50 of the face at the left and bottom, and the net's squeezed face at
      // the right and top reads less: no verdict asserted there.)
      Picture tracked = p;
      SetAsideCutFaces(tracked, kMaxOutsideShareTracked);
      if (share <= 0.4) EXPECT_EQ(tracked.faces.size(), 1u);
      SetAsideCutFaces(p);
      // 20% of the SSD box is 0.26-0.30 of the face's box (the tiny detector's, wider): either
      // verdict is right for it; the 12% cuts are swapped (ARolledFaceCutByAnEighthIs...).
      if (share >= 0.4) {
        EXPECT_TRUE(p.faces.empty());
        ASSERT_EQ(p.cut.size(), 1u);
        EXPECT_NE(p.cut[0].edges & edge, 0u);
      }
    }
  }
}

TEST(FrameEdge, AFaceInsideTheFrameKeepsTheNetsPointsOnItsBox) {
  // The path of every face inside the frame, as before the check: the net on the detector's box.
  Picture p = Landmarked(GraceBgr());
  ASSERT_EQ(p.faces.size(), 1u);
  EXPECT_EQ(CutEdges(p.faces[0].box, p.rgb.size()), 0u);
  const faceapi::Landmarks68 direct = ClippedBoxPoints(p);
  for (size_t i = 0; i < direct.size(); ++i) {
    EXPECT_EQ(p.faces[0].landmarks[i].x, direct[i].x);
    EXPECT_EQ(p.faces[0].landmarks[i].y, direct[i].y);
  }
  // 0 up to float rounding (2e-8 in fp32 on an AVX2 CPU: a point a hair beyond the frame).
  EXPECT_LT(FaceOutsideShare(p.faces[0].box, p.faces[0].landmarks, p.rgb.size()), 1e-6f);
  SetAsideCutFaces(p);
  EXPECT_EQ(p.faces.size(), 1u);
  EXPECT_TRUE(p.cut.empty());
}

TEST(FrameEdge, AJobLeavesAFaceTooFarOutsideAsItIsAndNamesIt) {
  // 60% outside: beside another face the detector's box of the 40% cut stops 5 px short of the
  // edge and narrower, and the share comes out 0.20 (the estimate's noise, frame_edge.h).
  cv::Point offset;
  const cv::Mat cut = Cut(kRightEdge, 0.6, &offset);
  // Alone: nothing to swap, the error names the face.
  auto alone = Swap(Ratio(1), Png(cut));
  EXPECT_EQ(alone.status().code(), absl::StatusCode::kFailedPrecondition) << alone.status();
  EXPECT_THAT(std::string(alone.status().message()),
              ::testing::HasSubstr("no face of the target image is inside the frame enough to swap: target image: the "
                                   "face at ("));
  EXPECT_THAT(std::string(alone.status().message()), ::testing::HasSubstr("is cut by the right edge of the frame ("));
  // Beside a whole Grace: she is swapped, the cut face's pixels stay as they are.
  cv::Mat pair(GraceBgr().rows, GraceBgr().cols + cut.cols, CV_8UC3);
  GraceBgr().copyTo(pair(cv::Rect(0, 0, GraceBgr().cols, GraceBgr().rows)));
  cut.copyTo(pair(cv::Rect(GraceBgr().cols, 0, cut.cols, cut.rows)));
  Recorder rec;
  auto out = Swap(Ratio(1), Png(pair), &rec);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->report.faces_swapped(), 1u) << out->report.DebugString() << pair.cols;
  ASSERT_EQ(out->report.faces_size(), 1);
  EXPECT_LT(out->report.faces(0).box(0), GraceBgr().cols);  // the whole face
  ASSERT_EQ(out->report.degradations_size(), 1) << out->report.DebugString();
  EXPECT_THAT(out->report.degradations(0), ::testing::MatchesRegex(
      "target image: the face at \\([0-9]+,[0-9]+ [0-9]+x[0-9]+\\) is cut by the right edge of the frame \\([0-9]+% of it "
      "outside\\): not swapped"));
  EXPECT_EQ(rec.degradations, std::vector<std::string>{out->report.degradations(0)});
  const cv::Mat result = Decode(out->image, cv::IMREAD_COLOR);
  const cv::Rect right(GraceBgr().cols + 8, 0, cut.cols - 8, cut.rows);  // clear of the whole face's blend
  EXPECT_EQ(cv::norm(result(right), pair(right), cv::NORM_INF), 0);
}

// Grace rolled by `roll` degrees and cut so that `share` of her box (the tiny detector's reference
// box, golden_faceapi.json; rotated with her) lies beyond `side` (made_cut.h), detected and
// landmarked by the stages' own functions.
constexpr float kShareTolerance = 0.07f;  // the estimate's measured accuracy (frame_edge.h)
struct MadeCase {
  double roll;
  made_cut::Side side;
  double share;
};

Picture MadeCut(const MadeCase& c, double* truth, std::string* name) {
  const made_cut::Made m = made_cut::Make(GraceBgr(), cv::Rect2f(142.2f, 137.1f, 240.7f, 214.7f), c.roll, c.side, c.share);
  *truth = m.truth;
  *name = absl::StrCat("grace_roll", c.roll, "_", made_cut::SideName(c.side), std::lround(c.share * 100));
  return Landmarked(m.bgr);
}

TEST(FrameEdge, ARolledFaceCutByMoreThanAThirdIsSetAsideWithItsShareMeasured) {
  // Before the mean-face fit: roll 30 right 40% estimated 0.16 (swapped), roll -30 left 40% 0.2x.
  for (const MadeCase& c : std::vector<MadeCase>{{30, made_cut::kRight, 0.4}, {0, made_cut::kLeft, 0.4}, {-15, made_cut::kLeft, 0.4}, {15, made_cut::kBottom, 0.4}}) {
    double truth = 0;
    std::string name;
    Picture p = MadeCut(c, &truth, &name);
    SCOPED_TRACE(name);
    ASSERT_EQ(p.faces.size(), 1u);
    SaveWithPoints(name, p, p.faces[0].landmarks);
    const float share = FaceOutsideShare(p.faces[0].box, p.faces[0].landmarks, p.rgb.size());
    EXPECT_NEAR(share, truth, kShareTolerance);
    SetAsideCutFaces(p);
    EXPECT_TRUE(p.faces.empty());
    ASSERT_EQ(p.cut.size(), 1u);
    EXPECT_NEAR(p.cut[0].outside_share, share, 1e-6);
  }
}

TEST(FrameEdge, ARolledFaceCutByAnEighthIsSwappedWithItsShareMeasured) {
  for (const MadeCase& c : std::vector<MadeCase>{{30, made_cut::kLeft, 0.12}, {-15, made_cut::kRight, 0.12}, {0, made_cut::kTop, 0.12}}) {
    double truth = 0;
    std::string name;
    Picture p = MadeCut(c, &truth, &name);
    SCOPED_TRACE(name);
    ASSERT_EQ(p.faces.size(), 1u);
    const float share = FaceOutsideShare(p.faces[0].box, p.faces[0].landmarks, p.rgb.size());
    EXPECT_NEAR(share, truth, kShareTolerance);
    SetAsideCutFaces(p);
    EXPECT_EQ(p.faces.size(), 1u);
    EXPECT_TRUE(p.cut.empty());
  }
  // A job on one of them: swapped, nothing degraded (FUSION_TEST_OUT_DIR: the result to look at).
  const MadeCase c{15, made_cut::kLeft, 0.12};
  const made_cut::Made m = made_cut::Make(GraceBgr(), cv::Rect2f(142.2f, 137.1f, 240.7f, 214.7f), c.roll, c.side, c.share);
  auto out = Swap(Ratio(1), Png(m.bgr));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->report.faces_swapped(), 1u);
  EXPECT_EQ(out->report.degradations_size(), 0) << out->report.DebugString();
  if (const char* dir = std::getenv("FUSION_TEST_OUT_DIR")) {
    std::ofstream(std::string(dir) + "/swapped_rolled_cut.png", std::ios::binary) << out->image;
  }
}

TEST(FrameEdge, AFaceCutAtTheBottomThatLooksTurnedIsNamedCutByTheEdge) {
  // The astronaut (the tiny detector's reference box, golden_faceapi.json) cut by 35% at the
  // bottom: the detector, shown the cut face in its quarter turns, likes a turn better (bench/edge:
  // 28 of 828 made cuts, 26 at the top or bottom). Before: "is turned sideways ...; store the
  // image upright".
  const cv::Mat astronaut = Decode(Astronaut(), cv::IMREAD_COLOR);
  const made_cut::Made m = made_cut::Make(astronaut, cv::Rect2f(163.5f, 75.8f, 115.4f, 110.5f), 0, made_cut::kBottom, 0.35);
  Picture p = Pic(m.bgr);
  ASSERT_TRUE(DetectFaces(*HostCopyOf("ssd_mobilenetv1"), 0, DetectSettings{}, p).ok());
  ASSERT_EQ(p.turned.size(), 1u);
  EXPECT_EQ(p.turned[0].cut_edges, static_cast<unsigned>(kBottomEdge));
  auto out = Swap(Ratio(1), Png(m.bgr));
  EXPECT_EQ(out.status().code(), absl::StatusCode::kFailedPrecondition) << out.status();
  EXPECT_THAT(std::string(out.status().message()),
              ::testing::MatchesRegex("no upright face in the target image: target image: the face at \\([0-9]+,[0-9]+ "
                                      "[0-9]+x[0-9]+\\) is cut by the bottom edge of the frame, or turned sideways \\(the "
                                      "detector scores it [0-9.]+ righted, [0-9.]+ as it is\\): not swapped"));
}

}  // namespace
}  // namespace fusion
