// Faces cut by the frame edge: the box a cut face would have whole, and how much of it lies
// outside the frame. No LibTorch, no model: geometry on the detector's box and the 68 points.
//
// The detectors clip their boxes to the image, so a face that the frame edge cuts comes back as
// a narrow box (cut at the left or right) or a flat one (cut at the top or bottom). The landmark
// net, given that box, fits a whole face into the visible part (a second mouth, an eye along the
// edge). ExtendedFaceBox restores the missing part of the box beyond the frame, so the net sees
// the visible part where it would lie in the whole face's crop (the rest of its input zero, as
// the net's own square padding), and its 68 points may lie outside the frame. FaceOutsideShare
// then says how much of the face is outside (its points' convex hull, or its extended box): above
// kMaxOutsideShare no swap is credible (the generator and the blend see too little of the face)
// and the face is left as it is and named in the job's degradations (CutFaceNote).
// Measured on Grace Hopper cut by 20/40/60% of her box on each side (frame_edge_test.cc): the
// points' error falls from 0.018-0.41 to 0.007-0.30 box widths; the shares of the 20% cuts are
// 0.06-0.23, of the 40% and 60% cuts 0.28-0.87. The estimate is good to about +-0.1 (the 40% cut
// beside a second face: the detector's box stops 5 px short of the edge and the share is 0.20).
// Units: pixels of the frame (x right, y down). Thread-safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include <opencv2/core/types.hpp>

#include "models/faceapi/types.h"

namespace fusion {

// A detector box's width / height for a whole face (SSD MobileNet v1 on the bundled faces: the
// astronaut 0.77, Grace 0.90, sample1's 0.75-0.85, sample3's 0.59-0.74): the aspect a cut box is
// extended back to for the landmark net.
inline constexpr float kWholeFaceAspect = 0.8f;
// A box edge within this many pixels of the frame edge, or this share of the box's longer side,
// counts as touching it (the detectors' boxes stop a few pixels short of it).
inline constexpr float kEdgeTolerancePx = 2.0f;
inline constexpr float kEdgeToleranceShare = 0.03f;
// Above this share of the face outside the frame (FaceOutsideShare), the face is not swapped:
// between the highest share of Grace Hopper cut by 20% of her box on any side (0.23, at the
// bottom) and the lowest cut by 40% (0.28, at the top), tests/pipeline/frame_edge_test.cc.
inline constexpr float kMaxOutsideShare = 0.25f;

// Which frame edges a box touches and is cut by: bits of kLeft..kBottom (0 = the box is inside
// the frame or, touching an edge, has a whole face's aspect along that axis).
enum CutEdge : unsigned { kLeftEdge = 1, kRightEdge = 2, kTopEdge = 4, kBottomEdge = 8 };
unsigned CutEdges(const faceapi::FaceBox& box, cv::Size frame);
// "the left edge", "the right and top edges", ... for the bits of CutEdges.
std::string EdgeNames(unsigned edges);

// The box of the whole face: `box` extended beyond the cut edges (CutEdges) to kWholeFaceAspect
// (a face cut at both the left and the right is extended evenly). A box with no cut edge comes
// back unchanged.
faceapi::FaceBox ExtendedFaceBox(const faceapi::FaceBox& box, cv::Size frame);

// The frame edges that points of `landmarks` lie beyond (bits of CutEdge).
unsigned OutsideEdges(const faceapi::Landmarks68& landmarks, cv::Size frame);

// The share (0..1) of the convex hull of `landmarks` outside the frame [0, w) x [0, h); 0 for
// a degenerate hull (zero area).
float OutsideShare(const faceapi::Landmarks68& landmarks, cv::Size frame);

// The share (0..1) outside the frame of `box` extended as ExtendedFaceBox does but to the
// aspects that miss the least of a whole face (kShareAspectX for a cut at the left or right, the
// narrow end of whole boxes; kShareAspectY at the top or bottom, the wide end): 0 for a box with
// no cut edge. Grace Hopper cut by 20% of her box on any side: 0.01 - 0.12.
inline constexpr float kShareAspectX = 0.75f;
inline constexpr float kShareAspectY = 0.9f;
float BoxOutsideShare(const faceapi::FaceBox& box, cv::Size frame);

// How much of a face is outside the frame: the larger of its points' share (OutsideShare) and its
// extended box's (BoxOutsideShare). The points alone say too little when most of the face is
// outside (the net then fits a face into what it sees: Grace cut by 60% at the right gives 19%),
// the box alone too much for a whole face whose box is narrower than kWholeFaceAspect.
float FaceOutsideShare(const faceapi::FaceBox& box, const faceapi::Landmarks68& landmarks, cv::Size frame);

// A similarity transform p -> [a -b; b a] p + (tx, ty): rotation, uniform scale, shift.
struct Similarity {
  double a = 1, b = 0, tx = 0, ty = 0;
  cv::Point2f operator()(cv::Point2f p) const {
    return {static_cast<float>(a * p.x - b * p.y + tx), static_cast<float>(b * p.x + a * p.y + ty)};
  }
  double Scale() const;
};
// The least-squares similarity taking from[i] onto to[i] (weights w[i] >= 0, all 1 when empty):
// the closed form of Horn / Umeyama in 2-D. The identity when the weighted points are fewer than
// two or coincide.
Similarity FitSimilarity(const std::vector<cv::Point2f>& from, const std::vector<cv::Point2f>& to,
                         const std::vector<float>& w = {});

// "target image: the face at (x,y WxH) is cut by the right edge of the frame (41% of it outside):
// not swapped" (the job's degradation; the box is the detector's, in frame pixels).
std::string CutFaceNote(const std::string& what, const faceapi::FaceBox& box, unsigned edges, float outside_share);

}  // namespace fusion
