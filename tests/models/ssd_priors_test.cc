// SSD MobileNetV1's regenerated prior boxes (ssd_priors.h) against the ones its weights store.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>

#include "faceapi_fixture.h"
#include "models/faceapi/params.h"
#include "models/faceapi/ssd_priors.h"

namespace fusion::faceapi {
namespace {

TEST(SsdPriors, RegeneratedFor512TheyAreTheStoredOnesWithinOneFloatUlp) {
  absl::StatusOr<tfjs::WeightMap> w = LoadCatalogueWeights(Catalogue(), "ssd_mobilenetv1");
  ASSERT_TRUE(w.ok()) << w.status();
  absl::StatusOr<at::Tensor> stored = w->Get("Output/extra_dim", {1, 5118, 4});
  ASSERT_TRUE(stored.ok()) << stored.status();
  const at::Tensor t = stored->contiguous();
  const float* s = t.data_ptr<float>();
  absl::StatusOr<std::vector<float>> made = SsdPriorBoxes(512, 512);
  ASSERT_TRUE(made.ok()) << made.status();
  ASSERT_EQ(made->size(), 5118u * 4);
  double worst = 0;
  size_t at = 0;
  for (size_t i = 0; i < made->size(); ++i) {
    const double d = std::abs(static_cast<double>((*made)[i]) - s[i]);
    if (d > worst) worst = d, at = i;
  }
  std::printf("regenerated vs stored priors: max abs diff %.3g (box %zu)\n", worst, at / 4);
  EXPECT_LE(worst, 2e-7);
}

// A 1024 x 1536 input: 2 x 3 tiles of 512 px. Its priors, in input pixels, are the 512 input's
// shifted by each tile's offset, cell for cell (the lower-right tile here, every map).
TEST(SsdPriors, ALargerInputHasThe512InputsPriorsAtTheSamePixelsPerTile) {
  const int h = 1024, w = 1536;
  absl::StatusOr<std::vector<float>> big = SsdPriorBoxes(h, w), small = SsdPriorBoxes(512, 512);
  ASSERT_TRUE(big.ok() && small.ok());
  const int anchors[6] = {3, 6, 6, 6, 6, 6};
  size_t big_at = 0, small_at = 0, compared = 0;
  double worst = 0;
  for (int k = 0, stride = 16; k < 6; ++k, stride *= 2) {
    const int rows = h / stride, cols = w / stride, f = 512 / stride;
    for (int i = 0; i < rows; ++i) {
      for (int j = 0; j < cols; ++j) {
        const bool in_tile = i >= rows - f && j >= cols - f;  // the tile at (512, 1024) px
        const size_t small_cell = small_at + (static_cast<size_t>(i - (rows - f)) * f + (j - (cols - f))) * anchors[k] * 4;
        for (int a = 0; a < anchors[k] * 4; ++a, ++big_at) {
          if (!in_tile) continue;
          const bool y = a % 2 == 0;
          const double px_big = (*big)[big_at] * (y ? h : w);
          const double px_small = (*small)[small_cell + a] * 512 + (y ? 512 : 1024);
          worst = std::max(worst, std::abs(px_big - px_small));
          ++compared;
        }
      }
    }
    small_at += static_cast<size_t>(f) * f * anchors[k] * 4;
  }
  EXPECT_EQ(big->size(), big_at);
  EXPECT_EQ(compared, 5118u * 4);
  EXPECT_LT(worst, 1e-3) << "px";
}

TEST(SsdPriors, AnInputThatIsNotAMultipleOf512IsInvalidArgument) {
  for (auto [h, w] : {std::pair{500, 512}, std::pair{512, 0}, std::pair{1024, 800}}) {
    absl::StatusOr<std::vector<float>> p = SsdPriorBoxes(h, w);
    ASSERT_FALSE(p.ok());
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(p.status().message().find("multiples of 512"), std::string::npos) << p.status();
  }
}

}  // namespace
}  // namespace fusion::faceapi
