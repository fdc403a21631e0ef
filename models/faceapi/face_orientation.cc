// Face orientation check (face_orientation.h).
#include "models/faceapi/face_orientation.h"

#include <algorithm>
#include <cmath>

#include "models/faceapi/context_views.h"
#include "base/status_macros.h"

namespace fusion::faceapi {

int UprightTurns(const std::array<float, 4>& scores) {
  const int best = scores[3] > scores[1] ? 3 : 1;  // sideways only: see the header on 2
  if (scores[best] < kTurnedMinScore) return 0;
  auto logit = [](float p) {  // clamped: a score of 0 (no box) or 1 stays finite
    const double q = std::clamp(static_cast<double>(p), 1e-4, 1 - 1e-4);
    return std::log(q / (1 - q));
  };
  // Against the better of the face as it is and turned by 180 degrees: an upside-down face's
  // sideways views can beat its view as it is (sample1 stored upside down: 0.98 against 0.95),
  // but not its righted view; a sideways face turned by 180 degrees is sideways still.
  return logit(scores[best]) - logit(std::max(scores[0], scores[2])) >= kTurnedMarginLogit ? best : 0;
}

absl::StatusOr<std::vector<FaceOrientation>> EstimateOrientations(
    const FaceDetector& detector, const cv::Mat& rgb, const std::vector<FaceBox>& boxes, int tile_px,
    const std::function<absl::Status(size_t index, size_t count)>& before_pass) {
  if (rgb.empty() || rgb.type() != CV_8UC3) return absl::InvalidArgumentError("orientation: the image is not 8-bit RGB");
  // Four views a face, one row of the mosaic: as it is, turned by 90 degrees clockwise, by 180,
  // and by 90 degrees counter-clockwise (scores[k] = k clockwise quarter turns).
  std::vector<ContextView> views;
  for (const FaceBox& b : boxes) {
    for (int k = 0; k < 4; ++k) views.push_back({b, -90.0f * k});
  }
  ASSIGN_OR_RETURN(std::vector<ViewAnswer> seen, LookAgain(detector, rgb, views, /*min_score=*/0.05f, tile_px, before_pass));
  std::vector<FaceOrientation> out(boxes.size());
  for (size_t f = 0; f < boxes.size(); ++f) {
    for (int k = 0; k < 4; ++k) out[f].scores[k] = (seen)[4 * f + k].score;
    out[f].upright_turns = UprightTurns(out[f].scores);
  }
  return out;
}

}  // namespace fusion::faceapi
