// Face orientation check (face_orientation.h).
#include "models/faceapi/face_orientation.h"

#include <algorithm>
#include <cmath>

#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>

namespace fusion::faceapi {
namespace {

constexpr int kGrid = 4;  // cells per side of the 512-px input
constexpr int kInput = kGrid * kOrientationCellPx;
static_assert(kInput == kOrientationInputPx);

// The box's context square resized to one cell, zero outside the image. Only cell-sized
// buffers: the part of the square inside the image is resized straight from the image (a ROI).
cv::Mat ContextCell(const cv::Mat& rgb, const FaceBox& b) {
  const double side = std::max(1.0f, kOrientationCropFactor * std::max(b.w, b.h));
  const double x0 = b.x + b.w / 2 - side / 2, y0 = b.y + b.h / 2 - side / 2;
  const double s = kOrientationCellPx / side;  // cell px per image px
  cv::Mat cell(kOrientationCellPx, kOrientationCellPx, CV_8UC3, cv::Scalar::all(0));
  const cv::Rect want(static_cast<int>(std::floor(x0)), static_cast<int>(std::floor(y0)),
                      static_cast<int>(std::ceil(side)), static_cast<int>(std::ceil(side)));
  const cv::Rect in = want & cv::Rect(0, 0, rgb.cols, rgb.rows);
  if (in.empty()) return cell;
  const cv::Rect to(static_cast<int>(std::lround((in.x - x0) * s)), static_cast<int>(std::lround((in.y - y0) * s)),
                    std::max(1, static_cast<int>(std::lround(in.width * s))),
                    std::max(1, static_cast<int>(std::lround(in.height * s))));
  const cv::Rect inside = to & cv::Rect(0, 0, kOrientationCellPx, kOrientationCellPx);
  if (inside.empty()) return cell;
  cv::Mat part;
  cv::resize(rgb(in), part, to.size(), 0, 0, s < 1 ? cv::INTER_AREA : cv::INTER_LINEAR);
  part(inside - to.tl()).copyTo(cell(inside));
  return cell;
}

}  // namespace

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
  std::vector<FaceOrientation> out(boxes.size());
  static constexpr cv::RotateFlags kRotate[3] = {cv::ROTATE_90_CLOCKWISE, cv::ROTATE_180, cv::ROTATE_90_COUNTERCLOCKWISE};
  const int input = detector.FreeInputSize() ? kInput : 0;  // SSD: its fixed 512
  const size_t passes = (boxes.size() + kOrientationFacesPerPass - 1) / kOrientationFacesPerPass;
  for (size_t first = 0; first < boxes.size(); first += kOrientationFacesPerPass) {
    if (before_pass) {
      if (absl::Status st = before_pass(first / kOrientationFacesPerPass, passes); !st.ok()) return st;
    }
    const size_t n = std::min<size_t>(kOrientationFacesPerPass, boxes.size() - first);
    cv::Mat mosaic(kInput, kInput, CV_8UC3, cv::Scalar::all(0));
    for (size_t f = 0; f < n; ++f) {
      const cv::Mat cell = ContextCell(rgb, boxes[first + f]);
      for (int k = 0; k < 4; ++k) {
        const cv::Rect at(k * kOrientationCellPx, static_cast<int>(f) * kOrientationCellPx, kOrientationCellPx,
                          kOrientationCellPx);
        cv::Mat dst = mosaic(at);  // written in place (a square cell keeps its size turned)
        if (k == 0) {
          cell.copyTo(dst);
        } else {
          cv::rotate(cell, dst, kRotate[k - 1]);
        }
      }
    }
    absl::StatusOr<std::vector<FaceBox>> found = detector.Detect(mosaic, input, tile_px, /*min_score=*/0.05f);
    if (!found.ok()) return found.status();
    for (const FaceBox& d : *found) {
      const float cx = d.x + d.w / 2, cy = d.y + d.h / 2;
      const int col = static_cast<int>(cx) / kOrientationCellPx, row = static_cast<int>(cy) / kOrientationCellPx;
      if (col < 0 || col >= 4 || row < 0 || row >= static_cast<int>(n)) continue;
      const float ux = cx - col * kOrientationCellPx, uy = cy - row * kOrientationCellPx;  // within the cell
      const float q = kOrientationCellPx / 4.0f;
      if (ux < q || ux > 3 * q || uy < q || uy > 3 * q) continue;  // not the cell's face
      float& s = out[first + row].scores[col];
      s = std::max(s, d.score);
    }
  }
  for (FaceOrientation& o : out) o.upright_turns = UprightTurns(o.scores);
  return out;
}

}  // namespace fusion::faceapi
