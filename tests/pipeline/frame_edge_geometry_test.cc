// The geometry of faces cut by the frame edge (frame_edge.h) on made boxes and points: no model.
#include <gtest/gtest.h>

#include <cmath>

#include <opencv2/imgproc.hpp>

#include "geometry/frame_edge.h"

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
  EXPECT_EQ(CutFaceNote("target image", {360.4f, 100, 40, 100}, kRightEdge, 0.467f),
            "target image: the face at (360,100 40x100) is cut by the right edge of the frame (47% of it outside): "
            "not swapped");
}

// The mean face placed by `s`, as 68 points.
faceapi::Landmarks68 Placed(const Similarity& s) {
  const std::vector<cv::Point2f> mean = MeanFacePoints();
  faceapi::Landmarks68 l;
  for (size_t i = 0; i < l.size(); ++i) l[i] = {s(mean[i]).x, s(mean[i]).y};
  return l;
}

Similarity Rolled(double degrees, double scale, double tx, double ty) {
  const double r = degrees * M_PI / 180;
  return {scale * std::cos(r), scale * std::sin(r), tx, ty};
}

TEST(FrameEdgeGeometry, FitSimilarityRecoversARollScaleAndShift) {
  const Similarity truth = Rolled(25, 30, 200, 150);
  const std::vector<cv::Point2f> mean = MeanFacePoints();
  std::vector<cv::Point2f> to;
  for (const cv::Point2f& p : mean) to.push_back(truth(p));
  const Similarity fit = FitSimilarity(mean, to);
  EXPECT_NEAR(fit.a, truth.a, 1e-4);
  EXPECT_NEAR(fit.b, truth.b, 1e-4);
  EXPECT_NEAR(fit.tx, 200, 1e-3);
  EXPECT_NEAR(fit.ty, 150, 1e-3);
  EXPECT_NEAR(fit.Scale(), 30, 1e-4);
  // Weights: the points given weight 0 do not count (here moved far away).
  std::vector<float> w(to.size(), 1.f);
  for (size_t i = 0; i < 17; ++i) to[i].x += 500, w[i] = 0;
  EXPECT_NEAR(FitSimilarity(mean, to, w).tx, 200, 1e-3);
  EXPECT_EQ(FitSimilarity({{1, 1}}, {{5, 5}}).a, 1);  // one point: the identity
}

TEST(FrameEdgeGeometry, TheMeanFaceFittedToPointsInsideTheFrameGivesTheShareOfItsBoxOutside) {
  // A face rolled 30 degrees whose right part lies beyond the right edge: its points beyond
  // (and near) the edge are moved as a net's guesses would be, the fit uses the others.
  const Similarity truth = Rolled(30, 28, 385, 150);
  faceapi::Landmarks68 l = Placed(truth);
  for (faceapi::Point& p : l) {
    if (p.x > 398) p.x = 399;  // squeezed against the edge
  }
  const FaceFit fit = FitMeanFace(l, kFrame);
  ASSERT_TRUE(fit.ok);
  EXPECT_NEAR(fit.to_frame.a, truth.a, 0.5);
  EXPECT_NEAR(fit.to_frame.b, truth.b, 0.5);
  // The truth: the face's box placed by the true similarity, its area beyond x = 400.
  std::vector<cv::Point2f> box;
  for (const cv::Point2f& c : MeanFaceBox()) box.push_back(truth(c));
  const std::vector<cv::Point2f> frame = {{0, 0}, {400, 0}, {400, 300}, {0, 300}};
  std::vector<cv::Point2f> in;
  const double share = 1 - cv::intersectConvexConvex(box, frame, in) / std::abs(cv::contourArea(box));
  EXPECT_GT(share, 0.25);
  EXPECT_NEAR(FittedOutsideShare(fit, kFrame), share, 0.01);
  EXPECT_NEAR(FaceOutsideShare({330, 100, 70, 97}, l, kFrame), share, 0.01);
  // The same face inside the frame: nothing outside; its box for the net is the face's size.
  const FaceFit inside = FitMeanFace(Placed(Rolled(30, 28, 200, 150)), kFrame);
  ASSERT_TRUE(inside.ok);
  EXPECT_EQ(inside.points, 68);
  EXPECT_FLOAT_EQ(FittedOutsideShare(inside, kFrame), 0);
  const faceapi::FaceBox net = FittedNetBox(inside);
  EXPECT_NEAR(net.x + net.w / 2, 200, 0.5 * 28);  // the net's box reaches higher: the forehead
  EXPECT_NEAR(net.w, 28 * 2.4, 0.1 * 28);
}

TEST(FrameEdgeGeometry, AFaceWithTooFewPointsInsideTheFrameIsMostlyOutside) {
  // 60 of the 68 points beyond the left edge: no fit; at least 1 - 10/68 outside.
  faceapi::Landmarks68 l = Placed(Rolled(0, 28, -40, 150));
  size_t inside = 0;
  for (const faceapi::Point& p : l) inside += p.x >= 0.04f * 2 * 28;
  ASSERT_LT(inside, static_cast<size_t>(kFitMinPoints));
  EXPECT_FALSE(FitMeanFace(l, kFrame).ok);
  EXPECT_GE(FaceOutsideShare({0, 90, 20, 120}, l, kFrame), 1 - 10.f / 68);
  EXPECT_FALSE(TouchesFrameEdge({100, 100, 80, 100}, kFrame));
  EXPECT_TRUE(TouchesFrameEdge({1, 100, 80, 100}, kFrame));
  EXPECT_TRUE(TouchesFrameEdge({100, 100, 80, 199}, kFrame));
}

}  // namespace
}  // namespace fusion
