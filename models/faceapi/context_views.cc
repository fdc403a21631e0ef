// Context views (context_views.h).
#include "models/faceapi/context_views.h"

#include <algorithm>
#include <cmath>

#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>
#include "base/status_macros.h"

namespace fusion::faceapi {
namespace {

// The square of `side` image px centred on (cx, cy) resized to a `cell` px square, zero outside
// the image. Only cell-sized buffers: the part of the square inside the image is resized straight
// from the image (a ROI).
cv::Mat ContextCell(const cv::Mat& rgb, double cx, double cy, double side, int cell_px) {
  const double x0 = cx - side / 2, y0 = cy - side / 2;
  const double s = cell_px / side;  // cell px per image px
  cv::Mat cell(cell_px, cell_px, CV_8UC3, cv::Scalar::all(0));
  const cv::Rect want(static_cast<int>(std::floor(x0)), static_cast<int>(std::floor(y0)),
                      static_cast<int>(std::ceil(side)), static_cast<int>(std::ceil(side)));
  const cv::Rect in = want & cv::Rect(0, 0, rgb.cols, rgb.rows);
  if (in.empty()) return cell;
  const cv::Rect to(static_cast<int>(std::lround((in.x - x0) * s)), static_cast<int>(std::lround((in.y - y0) * s)),
                    std::max(1, static_cast<int>(std::lround(in.width * s))),
                    std::max(1, static_cast<int>(std::lround(in.height * s))));
  const cv::Rect inside = to & cv::Rect(0, 0, cell_px, cell_px);
  if (inside.empty()) return cell;
  cv::Mat part;
  cv::resize(rgb(in), part, to.size(), 0, 0, s < 1 ? cv::INTER_AREA : cv::INTER_LINEAR);
  part(inside - to.tl()).copyTo(cell(inside));
  return cell;
}

// The angle in [0, 360).
double Normalised(double deg) {
  const double a = std::fmod(deg, 360.0);
  return a < 0 ? a + 360.0 : a;
}

// Writes the view's cell into `dst` (kViewCellPx square, in place).
void RenderView(const cv::Mat& rgb, const ContextView& v, cv::Mat dst) {
  const FaceBox& b = v.box;
  const double cx = b.x + b.w / 2.0, cy = b.y + b.h / 2.0;
  const double side = std::max(1.0, static_cast<double>(kViewCropFactor) * std::max(b.w, b.h));
  const double turn = Normalised(v.turn_deg);
  if (turn == 0 || turn == 90 || turn == 180 || turn == 270) {  // exact
    const cv::Mat cell = ContextCell(rgb, cx, cy, side, kViewCellPx);
    if (turn == 0) {
      cell.copyTo(dst);
    } else {
      cv::rotate(cell, dst, turn == 90 ? cv::ROTATE_90_COUNTERCLOCKWISE : turn == 180 ? cv::ROTATE_180
                                                                                     : cv::ROTATE_90_CLOCKWISE);
    }
    return;
  }
  // A cell sqrt(2) larger at the same scale, turned about its centre; its middle is the view.
  const int big = 2 * static_cast<int>(std::ceil(kViewCellPx * std::sqrt(2.0) / 2));
  const cv::Mat large = ContextCell(rgb, cx, cy, side * big / kViewCellPx, big);
  cv::Mat m = cv::getRotationMatrix2D(cv::Point2f(big / 2.0f, big / 2.0f), turn, 1.0);
  m.at<double>(0, 2) -= (big - kViewCellPx) / 2.0;
  m.at<double>(1, 2) -= (big - kViewCellPx) / 2.0;
  cv::warpAffine(large, dst, m, dst.size(), cv::INTER_LINEAR, cv::BORDER_CONSTANT, cv::Scalar::all(0));
}

// A box found in the view's cell (cell px, origin its top-left) in image pixels.
FaceBox MappedBack(const ContextView& v, const FaceBox& d, float ux, float uy) {
  const FaceBox& b = v.box;
  const double side = std::max(1.0, static_cast<double>(kViewCropFactor) * std::max(b.w, b.h));
  const double s = kViewCellPx / side;  // cell px per image px
  const double a = Normalised(v.turn_deg) * CV_PI / 180.0, c = std::cos(a), sn = std::sin(a);
  // getRotationMatrix2D's linear part is [[c, sn], [-sn, c]]; its inverse is the transpose.
  const double qx = ux - kViewCellPx / 2.0, qy = uy - kViewCellPx / 2.0;
  const double px = c * qx - sn * qy, py = sn * qx + c * qy;
  const double cx = b.x + b.w / 2.0 + px / s, cy = b.y + b.h / 2.0 + py / s;
  const bool sideways = std::fabs(sn) > std::fabs(c) + 1e-6;  // a quarter turn swaps width and height
  const double w = (sideways ? d.h : d.w) / s, h = (sideways ? d.w : d.h) / s;
  return {static_cast<float>(cx - w / 2), static_cast<float>(cy - h / 2), static_cast<float>(w), static_cast<float>(h),
          d.score};
}

}  // namespace

absl::StatusOr<std::vector<ViewAnswer>> LookAgain(
    const FaceDetector& detector, const cv::Mat& rgb, const std::vector<ContextView>& views, float min_score,
    int tile_px, const std::function<absl::Status(size_t index, size_t count)>& before_pass) {
  if (rgb.empty() || rgb.type() != CV_8UC3) return absl::InvalidArgumentError("context views: the image is not 8-bit RGB");
  std::vector<ViewAnswer> out(views.size());
  const int input = detector.FreeInputSize() ? kViewInputPx : 0;  // SSD: its fixed 512
  const size_t passes = (views.size() + kViewCellsPerPass - 1) / kViewCellsPerPass;
  for (size_t first = 0; first < views.size(); first += kViewCellsPerPass) {
    if (before_pass) {
      RETURN_IF_ERROR(before_pass(first / kViewCellsPerPass, passes));
    }
    const size_t n = std::min<size_t>(kViewCellsPerPass, views.size() - first);
    cv::Mat mosaic(kViewInputPx, kViewInputPx, CV_8UC3, cv::Scalar::all(0));
    for (size_t i = 0; i < n; ++i) {
      const int col = static_cast<int>(i) % kViewGrid, row = static_cast<int>(i) / kViewGrid;
      RenderView(rgb, views[first + i], mosaic(cv::Rect(col * kViewCellPx, row * kViewCellPx, kViewCellPx, kViewCellPx)));
    }
    ASSIGN_OR_RETURN(std::vector<FaceBox> found, detector.Detect(mosaic, input, tile_px, min_score));
    for (const FaceBox& d : found) {
      const float cx = d.x + d.w / 2, cy = d.y + d.h / 2;
      const int col = static_cast<int>(cx) / kViewCellPx, row = static_cast<int>(cy) / kViewCellPx;
      if (cx < 0 || cy < 0 || col >= kViewGrid || row >= kViewGrid) continue;
      const size_t i = static_cast<size_t>(row * kViewGrid + col);
      if (i >= n) continue;
      const float ux = cx - col * kViewCellPx, uy = cy - row * kViewCellPx;  // within the cell
      const float q = kViewCellPx / 4.0f;
      if (ux < q || ux > 3 * q || uy < q || uy > 3 * q) continue;  // not the cell's face
      ViewAnswer& a = out[first + i];
      if (d.score > a.score) a = {d.score, MappedBack(views[first + i], d, ux, uy)};
    }
  }
  return out;
}

}  // namespace fusion::faceapi
