// The geometry of faces cut by the frame edge (frame_edge.h) on made boxes and points: no model.
#include <gtest/gtest.h>

#include "pipeline/frame_edge.h"

namespace fusion {
namespace {

const cv::Size kFrame(400, 300);

faceapi::Landmarks68 Square(float x0, float y0, float side) {  // 68 points on a square's outline
  faceapi::Landmarks68 l;
  for (size_t i = 0; i < l.size(); ++i) {
    const float t = static_cast<float>(i % 17) / 16 * side;
    const int k = static_cast<int>(i / 17);
    l[i] = k == 0 ? faceapi::Point{x0 + t, y0} : k == 1 ? faceapi::Point{x0 + side, y0 + t}
         : k == 2 ? faceapi::Point{x0 + side - t, y0 + side} : faceapi::Point{x0, y0 + side - t};
  }
  return l;
}

TEST(FrameEdgeGeometry, ABoxInsideOrOfAWholeFacesAspectIsNotCut) {
  EXPECT_EQ(CutEdges({100, 100, 80, 100}, kFrame), 0u);
  EXPECT_EQ(CutEdges({0, 100, 80, 100}, kFrame), 0u);    // touches the left edge, whole aspect
  EXPECT_EQ(CutEdges({100, 100, 40, 100}, kFrame), 0u);  // narrow but inside
  const faceapi::FaceBox b{100, 100, 80, 100};
  const faceapi::FaceBox e = ExtendedFaceBox(b, kFrame);
  EXPECT_EQ(e.x, b.x);
  EXPECT_EQ(e.w, b.w);
  EXPECT_EQ(BoxOutsideShare(b, kFrame), 0.f);
}

TEST(FrameEdgeGeometry, ANarrowBoxAtTheEdgeIsExtendedBeyondIt) {
  // Right edge: 40 px of a 100-px-tall face, extended to 0.8 x 100 = 80 px.
  const faceapi::FaceBox right{360, 100, 40, 100};
  EXPECT_EQ(CutEdges(right, kFrame), static_cast<unsigned>(kRightEdge));
  faceapi::FaceBox e = ExtendedFaceBox(right, kFrame);
  EXPECT_FLOAT_EQ(e.x, 360);
  EXPECT_FLOAT_EQ(e.w, 80);
  EXPECT_FLOAT_EQ(BoxOutsideShare(right, kFrame), 1 - 40.f / 75);  // kShareAspectX 0.75
  // Left edge, 2 px short of it (within the tolerance): extended to the left.
  e = ExtendedFaceBox({2, 100, 40, 100}, kFrame);
  EXPECT_FLOAT_EQ(e.x, -38);
  EXPECT_FLOAT_EQ(e.w, 80);
  // Top edge: a flat box, extended upwards to width / 0.8.
  e = ExtendedFaceBox({100, 0, 80, 50}, kFrame);
  EXPECT_EQ(CutEdges({100, 0, 80, 50}, kFrame), static_cast<unsigned>(kTopEdge));
  EXPECT_FLOAT_EQ(e.y, -50);
  EXPECT_FLOAT_EQ(e.h, 100);
  EXPECT_EQ(EdgeNames(kRightEdge), "the right edge");
  EXPECT_EQ(EdgeNames(kLeftEdge | kTopEdge), "the left and top edges");
}

TEST(FrameEdgeGeometry, TheOutsideShareIsThePointsHullsAreaBeyondTheFrame) {
  EXPECT_FLOAT_EQ(OutsideShare(Square(100, 100, 100), kFrame), 0);
  EXPECT_NEAR(OutsideShare(Square(350, 100, 100), kFrame), 0.5, 1e-4);   // half beyond the right
  EXPECT_NEAR(OutsideShare(Square(-25, -25, 100), kFrame), 1 - 0.5625, 1e-4);  // a corner
  EXPECT_EQ(OutsideEdges(Square(-25, -25, 100), kFrame), static_cast<unsigned>(kLeftEdge | kTopEdge));
  // The larger of the points' and the box's share.
  EXPECT_NEAR(FaceOutsideShare({360, 100, 40, 100}, Square(300, 100, 90), kFrame), 1 - 40.f / 75, 1e-4);
  EXPECT_NEAR(FaceOutsideShare({350, 100, 50, 100}, Square(350, 100, 100), kFrame), 0.5, 1e-4);
  EXPECT_EQ(CutFaceNote("target image", {360.4f, 100, 40, 100}, kRightEdge, 0.467f),
            "target image: the face at (360,100 40x100) is cut by the right edge of the frame (47% of it outside): "
            "not swapped");
}

}  // namespace
}  // namespace fusion
