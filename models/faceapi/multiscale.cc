#include "models/faceapi/multiscale.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace fusion::faceapi {
namespace {

int Round32(double v) { return std::max(32, static_cast<int>(std::lround(v / 32.0)) * 32); }

// Starts of n tiles of side t covering [0, len), evenly spread. Within 10% of t, one tile
// spans the whole length (a 1537-px side should not cost a second row of tiles).
std::vector<int> TileStarts(int len, int t, float overlap) {
  if (len <= t * 1.1) return {0};
  const int n = static_cast<int>(std::ceil((len - t) / (t * (1.0 - overlap)))) + 1;
  std::vector<int> starts;
  for (int i = 0; i < n; ++i) starts.push_back(static_cast<int>(std::lround(static_cast<double>(len - t) * i / (n - 1))));
  return starts;
}

// True when `b` (in image pixels) touches an edge of `r` that is not an image edge.
bool TouchesInnerEdge(const FaceBox& b, const cv::Rect& r, int w, int h, float margin) {
  return (r.x > 0 && b.x <= r.x + margin) || (r.y > 0 && b.y <= r.y + margin) ||
         (r.x + r.width < w && b.x + b.w >= r.x + r.width - margin) ||
         (r.y + r.height < h && b.y + b.h >= r.y + r.height - margin);
}

}  // namespace

std::vector<DetectionPass> PlanPasses(const FaceDetector& detector, int w, int h, const MultiScaleOptions& o) {
  const int side = std::max(w, h);
  const int hi = std::clamp(Round32(side / 3.0), o.min_input, std::max(o.min_input, o.max_input));
  const int lo = std::max(o.min_input, Round32(0.8 * hi));
  std::vector<int> sizes = {lo};
  if (hi != lo) sizes.push_back(hi);
  std::vector<DetectionPass> passes;
  for (int s : sizes) {
    if (detector.FreeInputSize()) {
      passes.push_back({cv::Rect(0, 0, w, h), s});
      continue;
    }
    const int f = detector.DefaultInputSize();
    const int t = static_cast<int>(std::lround(static_cast<double>(side) * f / std::max(s, f)));
    for (int y : TileStarts(h, t, o.tile_overlap)) {
      for (int x : TileStarts(w, t, o.tile_overlap)) {
        const int tw = w <= t * 1.1 ? w : t, th = h <= t * 1.1 ? h : t;
        passes.push_back({cv::Rect(x, y, tw, th), f});
      }
    }
  }
  return passes;
}

absl::StatusOr<std::vector<FaceBox>> DetectMultiScale(const FaceDetector& detector, const cv::Mat& rgb,
                                                      const MultiScaleOptions& options) {
  std::vector<FaceBox> all;
  const std::vector<DetectionPass> passes = PlanPasses(detector, rgb.cols, rgb.rows, options);
  for (size_t i = 0; i < passes.size(); ++i) {
    const DetectionPass& p = passes[i];
    if (options.before_pass) {
      if (absl::Status st = options.before_pass(i, passes.size()); !st.ok()) return st;
    }
    const bool whole = p.region == cv::Rect(0, 0, rgb.cols, rgb.rows);
    absl::StatusOr<std::vector<FaceBox>> found = detector.Detect(whole ? rgb : rgb(p.region), p.input_size, options.tile_px);
    if (!found.ok()) {
      return absl::Status(found.status().code(),
                          absl::StrCat(found.status().message(), " (pass: region ", p.region.x, ",", p.region.y, " ",
                                       p.region.width, "x", p.region.height, " at input ", p.input_size, ")"));
    }
    const float margin = 0.01f * std::max(p.region.width, p.region.height);
    for (FaceBox b : *found) {
      b.x += p.region.x;
      b.y += p.region.y;
      if (!whole && TouchesInnerEdge(b, p.region, rgb.cols, rgb.rows, margin)) continue;
      all.push_back(b);
    }
  }
  return Nms(std::move(all), options.nms_iou);
}

}  // namespace fusion::faceapi
