// ESRGAN enhance stage with optional tiling (enhancer.h).
#include "models/keras/enhancer.h"

#include <ATen/ATen.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace fusion::keras {

absl::StatusOr<std::unique_ptr<Enhancer>> Enhancer::Create(std::unique_ptr<KerasModel> model, Options options) {
  if (model == nullptr || model->input_channels() != 3) {
    return absl::InvalidArgumentError("enhancer needs a 3-channel Keras model");
  }
  if (options.tile_px < 0 || (options.tile_px > 0 && !model->tileable())) {
    return absl::InvalidArgumentError(absl::StrCat(model->origin(), " is not tileable (tile_px ", options.tile_px, ")"));
  }
  return std::unique_ptr<Enhancer>(new Enhancer(std::move(model), options));
}

absl::StatusOr<at::Tensor> Enhancer::Run(const at::Tensor& rgb01) const {
  if (!rgb01.defined() || rgb01.dim() != 4 || rgb01.size(0) != 1 || rgb01.size(1) != 3 ||
      rgb01.scalar_type() != at::kFloat) {
    return absl::InvalidArgumentError(absl::StrCat(model_->origin(), ": enhancer input must be [1,3,H,W] float32"));
  }
  const at::Tensor x = rgb01 * 255.0;
  const bool tiled = options_.tile_px > 0 && (x.size(2) > options_.tile_px || x.size(3) > options_.tile_px);
  ASSIGN_OR_RETURN(at::Tensor y, tiled ? RunTiled(x) : model_->Forward(x));
  return (y / 255.0).clamp(0.0, 1.0);
}

absl::StatusOr<at::Tensor> Enhancer::RunTiled(const at::Tensor& x) const {
  const int64_t h = x.size(2), w = x.size(3), t = options_.tile_px, halo = model_->halo_px();
  const int64_t s = model_->scale();
  at::Tensor out = at::empty({1, 3, h * s, w * s}, x.options());
  for (int64_t y0 = 0; y0 < h; y0 += t) {
    for (int64_t x0 = 0; x0 < w; x0 += t) {
      const int64_t y1 = std::min(h, y0 + t), x1 = std::min(w, x0 + t);
      const int64_t ya = std::max<int64_t>(0, y0 - halo), xa = std::max<int64_t>(0, x0 - halo);
      const int64_t yb = std::min(h, y1 + halo), xb = std::min(w, x1 + halo);
      ASSIGN_OR_RETURN(auto tile, model_->Forward(x.slice(2, ya, yb).slice(3, xa, xb)));
      out.slice(2, y0 * s, y1 * s).slice(3, x0 * s, x1 * s)
          .copy_(tile.slice(2, (y0 - ya) * s, (y1 - ya) * s).slice(3, (x0 - xa) * s, (x1 - xa) * s));
    }
  }
  return out;
}

}  // namespace fusion::keras
