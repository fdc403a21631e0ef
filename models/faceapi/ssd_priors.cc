#include "models/faceapi/ssd_priors.h"

#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"

namespace fusion::faceapi {

absl::StatusOr<std::vector<float>> SsdPriorBoxes(int height, int width) {
  constexpr int kTile = 512;  // the exported model's input side: the anchors' unit
  if (height <= 0 || width <= 0 || height % kTile != 0 || width % kTile != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("ssd_mobilenetv1 priors: input ", width, "x", height, " px: both sides must be multiples of 512"));
  }
  double scales[7];
  for (int k = 0; k < 6; ++k) scales[k] = 0.2 + (0.95 - 0.2) * k / 5;
  scales[6] = 1.0;
  std::vector<float> out;
  for (int k = 0, stride = 16; k < 6; ++k, stride *= 2) {
    std::vector<std::pair<double, double>> anchors;  // (scale, aspect)
    if (k == 0) {
      anchors = {{0.1, 1.0}, {scales[0], 2.0}, {scales[0], 0.5}};
    } else {
      for (double aspect : {1.0, 2.0, 0.5, 3.0, 0.3333}) {
        anchors.emplace_back(scales[k], aspect);
        if (aspect == 1.0) anchors.emplace_back(std::sqrt(scales[k] * scales[k + 1]), 1.0);
      }
    }
    const int rows = height / stride, cols = width / stride;
    const double ky = static_cast<double>(kTile) / height, kx = static_cast<double>(kTile) / width;
    for (int i = 0; i < rows; ++i) {
      for (int j = 0; j < cols; ++j) {
        const double cy = (i + 0.5) * stride / height, cx = (j + 0.5) * stride / width;
        for (const auto& [s, aspect] : anchors) {
          const double h = s / std::sqrt(aspect) * ky, w = s * std::sqrt(aspect) * kx;
          out.insert(out.end(), {static_cast<float>(cy - h / 2), static_cast<float>(cx - w / 2),
                                 static_cast<float>(cy + h / 2), static_cast<float>(cx + w / 2)});
        }
      }
    }
  }
  return out;
}

}  // namespace fusion::faceapi
