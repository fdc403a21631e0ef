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

#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "absl/strings/str_cat.h"
#include "models/faceapi/face_landmark_68.h"
#include "pipeline/frame_edge.h"
#include "pipeline/model_store.h"
#include "pipeline/stages.h"
#include "pipeline_env.h"
#include "host_copy.h"

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
      EXPECT_LT(err, err_before);
      SetAsideCutFaces(p);
      if (share >= 0.4) {
        EXPECT_TRUE(p.faces.empty());
        ASSERT_EQ(p.cut.size(), 1u);
        EXPECT_NE(p.cut[0].edges & edge, 0u);
      } else {
        EXPECT_EQ(p.faces.size(), 1u);
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
  EXPECT_EQ(FaceOutsideShare(p.faces[0].box, p.faces[0].landmarks, p.rgb.size()), 0.f);
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

}  // namespace
}  // namespace fusion
