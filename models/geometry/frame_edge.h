// Faces cut by the frame edge: the box a cut face would have whole, and how much of it lies
// outside the frame. No LibTorch, no model: geometry on the detector's box and the 68 points.
//
// The detectors clip their boxes to the image, so a face that the frame edge cuts comes back as
// a narrow box (cut at the left or right) or a flat one (cut at the top or bottom). The landmark
// net, given that box, fits a whole face into the visible part (a second mouth, an eye along the
// edge). ExtendedFaceBox restores the missing part of the box beyond the frame, so the net sees
// the visible part where it would lie in the whole face's crop (the rest of its input zero, as
// the net's own square padding), and its 68 points may lie outside the frame; the mean face
// fitted to the points inside the frame (FitMeanFace: a similarity, so rolled faces are followed)
// then gives the whole face's box for a second look (stages.h FindLandmarks). FaceOutsideShare
// says how much of the face is outside: the share of the fitted face's box (the ground truth's box
// in the mean face's frame, rotated with the face) beyond the frame. Above kMaxOutsideShare no
// swap is credible (the generator and the blend see too little of the face) and the face is left
// as it is and named in the job's degradations (CutFaceNote).
// Its accuracy on cut faces is measured by bench/edge (docs/QUALITY.md, "Faces cut by the frame
// edge").
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
// midway between the 10-15% cuts that should be swapped and the 35% ones that should not.
inline constexpr float kMaxOutsideShare = 0.25f;
// A video's tracked face is swapped up to this share outside the frame, and its track ends
// beyond it: a face that walks out of the frame keeps its new identity to the end rather than
// turning back into the original a quarter of the way out (a pop that a still image does not
// have); the crop's part beyond the frame is never pasted. bench/video's enter720 and pan1080
// have faces entering and leaving.
inline constexpr float kMaxOutsideShareTracked = 0.5f;

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

// How much of a face is outside the frame: FittedOutsideShare of FitMeanFace when the fit holds
// (its net box within kFitSizeRange of the detector's box along the uncut axis); else the larger
// of the points' share (OutsideShare) and the extended box's (BoxOutsideShare), at least
// 1 - kFitMinPoints / 68 when too few points are inside for a fit; 0 for a face whose box touches
// no edge and whose points are all inside (when no fit).
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

// The mean face fitted to a face's points: how a face cut by the frame edge lies beyond it.
// kMeanFace (frame_edge.cc) is the mean of the 68 points of the 23 uncut faces of bench/edge
// (the six group photos, Grace, the astronaut) after generalised Procrustes (centroid 0, RMS
// radius 1); kMeanFaceBox is their ground-truth box in that frame, kMeanFaceNetBox the SSD box
// the pipeline gave the net. The fit uses the points inside the frame by kFitMarginShare of the
// face's size (the net's points at and beyond the edge are guesses), then drops points farther
// from the fit than kFitTrim times the median distance and fits again (twice).
inline constexpr float kFitMarginShare = 0.04f;
inline constexpr float kFitTrim = 2.5f;
inline constexpr int kFitMinPoints = 10;
// A point's weight in the fit: its distance from the nearest frame edge over kFitWeightSpan face
// diameters (2 RMS radii), at least kFitMinWeight, at most 1.
inline constexpr float kFitWeightSpan = 1.0f;
inline constexpr float kFitMinWeight = 0.1f;
// FaceOutsideShare trusts a fit whose net box (FittedNetBox) is this many times the detector's
// box along the axis no edge cuts.
inline constexpr float kFitSizeRange[2] = {0.65f, 1.5f};
struct FaceFit {
  bool ok = false;        // at least kFitMinPoints points inside the frame
  Similarity to_frame;    // mean-face frame -> frame pixels
  int points = 0;         // the points the last fit used
};
FaceFit FitMeanFace(const faceapi::Landmarks68& landmarks, cv::Size frame);
// kMeanFace's 68 points and kMeanFaceBox's 4 corners (for tests and the bench).
std::vector<cv::Point2f> MeanFacePoints();
std::vector<cv::Point2f> MeanFaceBox();
// kMeanFaceBox placed by `fit`: the whole face's box, rotated with the face (frame pixels,
// clockwise from the top left of the upright face).
std::vector<cv::Point2f> FittedFaceBox(const FaceFit& fit);
// The share (0..1) of FittedFaceBox outside the frame.
float FittedOutsideShare(const FaceFit& fit, cv::Size frame);
// The axis-aligned box the net is given for the whole face (kMeanFaceNetBox placed by `fit`,
// its centre and size; the roll left to the net, as for an uncut rolled face).
faceapi::FaceBox FittedNetBox(const FaceFit& fit);
// Whether `box` touches a frame edge (kEdgeTolerancePx / kEdgeToleranceShare), whatever its aspect.
bool TouchesFrameEdge(const faceapi::FaceBox& box, cv::Size frame);

// "target image: the face at (x,y WxH) is cut by the right edge of the frame (41% of it outside):
// not swapped" (the job's degradation; the box is the detector's, in frame pixels).
std::string CutFaceNote(const std::string& what, const faceapi::FaceBox& box, unsigned edges, float outside_share);

}  // namespace fusion
