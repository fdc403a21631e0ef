// Face tracking geometry for video: what carries a face from one frame to the next between
// detections, what tells a scene cut, and what steadies the points over time. OpenCV, no
// LibTorch: the networks (detector, landmark net) run in the pipeline (daemon/pipeline/
// video_faces.h), which calls these between them (docs/ARCHITECTURE.md#the-life-of-a-video-frame).
//
// - BoxRelation: where the detector puts a face's box relative to its 68 points, measured at a
//   detection and reused to make a detector-like box from points on frames without detection,
//   so the landmark net sees the same kind of crop on tracked frames as on detected ones.
// - FacePatch / PatchSimilarity: a 48x48 gray patch of the face aligned by its eye centres, and
//   the zero-mean normalised correlation of two patches in [-1, 1]: a track whose patch no longer
//   resembles the one at its last detection has lost its face (it slid onto background or
//   another face).
// - Thumbnail / IsSceneCut: a hard cut tells itself by a large change of the whole frame's gray
//   levels and of their histogram at once (a pan or a zoom changes the first, hardly the second).
// - OneEuroPoints: the One-Euro filter (Casiez, Roussel, Vogel, CHI 2012) over a face's 68
//   points, split in two: the pose (centre and spread, the head's motion) filtered with a
//   constant velocity (alpha-beta) whose gain rises with the surprise, so a steadily moving face
//   is followed without lag, and the shape (the points
//   about the centre) smoothed harder, since the landmark net's noise is there and expressions
//   change slowly next to it.
// Thread-safety: value types and pure functions; an OneEuroPoints is used by one thread.
#pragma once

#include <opencv2/core.hpp>

#include "models/faceapi/types.h"

namespace fusion::geometry {

// A face's box in the units of its points' spread: centre offset and size over `Spread`.
struct BoxRelation {
  float dx = 0, dy = 0;  // box centre minus points' centre, over the spread
  float w = 0, h = 0;    // box size over the spread
};
// The points' centre (mean of the 68) and spread (twice their RMS distance from the centre,
// about the face's width; at least 1).
faceapi::Point PointsCentre(const faceapi::Landmarks68& l);
float PointsSpread(const faceapi::Landmarks68& l);
BoxRelation RelationOf(const faceapi::FaceBox& box, const faceapi::Landmarks68& l);
// The box `rel` puts around `l` (score 0).
faceapi::FaceBox BoxFrom(const BoxRelation& rel, const faceapi::Landmarks68& l);
// The most a prediction scales a face from one frame to the next: a zoom grows a face by a few
// percent a frame, while the landmark net fits a face to the box it is shown, so carrying a
// larger measured change on fed back into the next box (bench/video's zoom720: a rolled face's
// box swung 151 -> 136 -> 162 -> 96 px in four frames at a bound of 25%).
inline constexpr float kMaxPredictedScaleStep = 1.05f;
// `l` moved by the motion from `before` to `now` (each point by the mean displacement; the
// spread scaled by their spread's ratio about the centre, within kMaxPredictedScaleStep either
// way): where the face will be one frame on.
faceapi::Landmarks68 Extrapolate(const faceapi::Landmarks68& before, const faceapi::Landmarks68& now);

inline constexpr int kPatchSide = 48;
// The face's gray patch (CV_32F, kPatchSide square, zero mean, unit norm) aligned so that its eye
// centres (points 36-41, 42-47) land at fixed places; `image` is CV_8U gray or CV_8UC3 BGR (only
// the patch is turned gray). Outside the frame: the border replicated.
cv::Mat FacePatch(const cv::Mat& image, const faceapi::Landmarks68& l);
// Zero-mean normalised correlation of two FacePatch results, in [-1, 1].
float PatchSimilarity(const cv::Mat& a, const cv::Mat& b);
// Below this a tracked face is lost. Measured on the bench clips (docs/PERFORMANCE.md#video-jobs):
// the same face across frames 0.75-0.99, the patch on background or a neighbour <= 0.45.
inline constexpr float kMinPatchSimilarity = 0.55f;

// A frame's gray thumbnail (CV_8U, 160 px wide) for IsSceneCut.
cv::Mat Thumbnail(const cv::Mat& bgr);
// A hard cut between two consecutive frames' thumbnails: mean absolute gray difference above
// kCutMeanDifference and gray histograms (32 bins) apart by more than kCutHistogramDistance
// (Bhattacharyya).
inline constexpr double kCutMeanDifference = 25;
inline constexpr double kCutHistogramDistance = 0.25;
bool IsSceneCut(const cv::Mat& previous, const cv::Mat& current);
// The two measures, for tests and figures.
double MeanDifference(const cv::Mat& a, const cv::Mat& b);
double HistogramDistance(const cv::Mat& a, const cv::Mat& b);

class OneEuroPoints {
 public:
  struct Params {
    // The pose (the points' centre and spread): what moves with the head, averaged over 68
    // points, so little noise; followed closely when it moves.
    // Chosen on bench/video (docs/PERFORMANCE.md#video-jobs): 0.3 and 1.0 lag the raw points by
    // 0.03 face widths on average on the pan (0.1 and 0.1: 0.17, a visible slide) and flicker
    // 1.08 there.
    double min_cutoff_hz = 0.3;  // cutoff of a face where it is predicted: lower = steadier
    double beta = 1.0;           // cutoff added per face width per second of surprise
    // The shape (the points about the centre, over the spread): where the landmark net's noise
    // is; expressions change it slowly next to that noise.
    double shape_cutoff_hz = 0.3;
    double shape_beta = 2.0;     // per face width per second of shape change
    double d_cutoff_hz = 1.0;    // cutoff of the speed estimates
  };
  OneEuroPoints() = default;
  explicit OneEuroPoints(Params p) : p_(p) {}
  // The steadied points for `raw`, `dt_s` seconds after the previous call (the first call and
  // the first after Reset return `raw` unchanged).
  faceapi::Landmarks68 Filter(const faceapi::Landmarks68& raw, double dt_s);
  void Reset() { started_ = false; }

  // Everything Filter() remembers, so a filter can be carried across a restart (a video job
  // resumed at a chunk, pipeline/video_checkpoint.proto): Restore(state()) changes nothing.
  struct State {
    bool started = false;
    double cx = 0, cy = 0, s = 1, vx = 0, vy = 0, vs = 0;
    faceapi::Landmarks68 shape{};
    double speed = 0, shape_speed = 0;
  };
  State state() const { return {started_, cx_, cy_, s_, vx_, vy_, vs_, shape_, speed_, shape_speed_}; }
  void Restore(const State& st) {
    started_ = st.started;
    cx_ = st.cx, cy_ = st.cy, s_ = st.s, vx_ = st.vx, vy_ = st.vy, vs_ = st.vs;
    shape_ = st.shape;
    speed_ = st.speed, shape_speed_ = st.shape_speed;
  }

 private:
  Params p_;
  bool started_ = false;
  double cx_ = 0, cy_ = 0, s_ = 1;   // the steadied pose
  double vx_ = 0, vy_ = 0, vs_ = 0;  // its velocity, per second
  faceapi::Landmarks68 shape_{};     // the steadied shape
  double speed_ = 0, shape_speed_ = 0;
};

}  // namespace fusion::geometry
