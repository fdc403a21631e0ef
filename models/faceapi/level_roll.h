// Roll-levelled landmarks: the 68 points of a face rolled in the image plane, found on the face
// turned level.
//
// FaceLandmark68Net (face-api) was trained on upright faces: on a face rolled by 40-60 degrees it
// returns an upright face's shape across the rolled head (its eye line off by half the roll or
// more), and the swap pastes a distorted face there. Method: the eye line of the points found
// (the centres of points 36-41 and 42-47) gives the roll; when it is kLevelMinDeg or more, the
// box's region of the image is turned about the box's centre so the eyes are level (one
// warpAffine into a canvas of the box's shape, bilinear, zero outside the image), the net runs
// on that canvas, and its points are turned back; then again with the new points' roll, up to `rounds`
// times, while the canvas was kLevelResidualDeg or more off level (a first estimate of a
// strongly rolled face is short of its roll).
// kLevelMinDeg 25, from the quality bench (docs/QUALITY.md; 321 faces): at 15 degrees identity
// moved both ways, 315 -> 310 of 321 under 0.6; at 25, 315 stay, the mean margin 0.352 -> 0.354,
// and of the 56 results that moved by more than 0.005, 39 came nearer the source (-0.084 to
// +0.073, mean -0.015).
// Measured (tests/models/level_roll_test.cc: mean point error over the eye distance, against the
// upright portrait's points turned with it): Grace Hopper and the astronaut rolled by 60 degrees
// 0.373 -> 0.022 and 0.436 -> 0.078, by 45 degrees 0.161 -> 0.082 and 0.137 -> 0.102; looked at
// in jobs, a 45-55-degree face's swap has its eyes and mouth in place where before it had a
// second mouth's outline (docs/QUALITY.md).
// Thread-safety: a pure function; the net must be safe for concurrent const use.
#pragma once

#include <opencv2/core/mat.hpp>

#include "absl/status/statusor.h"
#include "models/faceapi/face_landmark_68.h"
#include "models/faceapi/types.h"

namespace fusion::faceapi {

inline constexpr float kLevelMinDeg = 25.0f;
// A video track whose face was looked at level in the frame before keeps being looked at level
// down to this roll (a hysteresis: bench/video's zoom720 has faces rolled by 24-31 degrees from
// frame to frame, and the two shapes alternating shook the swapped face and lost its track).
inline constexpr float kLevelKeepDeg = 15.0f;
inline constexpr float kLevelResidualDeg = 5.0f;
// Memory: the canvas is at most kLevelCanvasPx on its longer side (twice the net's 112-px input);
// a larger box's surroundings (the square of its diagonal) are first scaled down to it with
// INTER_AREA, so a rolled face thousands of pixels wide costs ~0.5 MB of host memory, not the
// box's size.
inline constexpr double kLevelCanvasPx = 224;

// The eye line's angle in degrees, image axes (y down): positive when the image-right eye
// (points 42-47) is lower, i.e. the face is rolled clockwise on screen.
float EyeLineDeg(const Landmarks68& pts);

// The points of the face in `box` of `rgb` (CV_8UC3 RGB), starting from `first` (the net's
// points on the box as it is), re-found on the face turned level when its roll is `min_deg`
// to 90 degrees (beyond 90 it is upside down: upside_down.h), at most `rounds` times; `first`
// unchanged otherwise. *levelled (when given): whether the points were found on the face turned
// level. Errors: the net's (a box outside the image).
absl::StatusOr<Landmarks68> LevelledLandmarks(const FaceLandmark68Net& net, const cv::Mat& rgb, const FaceBox& box,
                                              const Landmarks68& first, int rounds = 2,
                                              float min_deg = kLevelMinDeg, bool* levelled = nullptr);

}  // namespace fusion::faceapi
