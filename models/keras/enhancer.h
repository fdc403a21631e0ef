// The enhance stage: super-resolution of a face crop or a whole frame with an UpscalerJS ESRGAN
// model (esrgan-slim / esrgan-medium x2|x3|x4|x8, MIT, Kevin Scott; RDN trained on DIV2K with
// idealo ISR) run by the Keras interpreter (keras_model.h).
//
// Tensor contract: input [1,3,H,W] float32 RGB in [0,1] (the generator's range), any H and W;
// output [1,3,sH,sW] float32 RGB in [0,1] (clamped), s = scale(). The models themselves take
// RGB 0-255 (UpscalerJS inputRange [0,255] for the rdn family); the scaling is done here.
// Tiling: with Options.tile_px > 0 the input is cut into tiles of that side, each run with
// halo_px() context pixels on every side (zero beyond the image, as the whole-image run), and
// the tile interiors are stitched; the result equals the whole-image run up to float summation
// order. slim and medium are tileable (all convs stride 1, "same"); measured halo: slim x2/x4
// 10 px, medium x4 18 px (input pixels). Tiles bound the activation working set to about
// (tile+2*halo)^2 * widest layer * 4 bytes, so big frames fit a device budget.
// Thread-safety: Run() is const and may run concurrently.
#pragma once

#include <memory>

#include "models/keras/keras_model.h"

namespace fusion::keras {

class Enhancer {
 public:
  struct Options {
    int tile_px = 0;  // input pixels per tile side; 0 = whole image in one pass
  };

  // Takes a loaded ESRGAN model. Errors: InvalidArgument when the model is not tileable but
  // tiling is asked for, or its input is not 3-channel.
  static absl::StatusOr<std::unique_ptr<Enhancer>> Create(std::unique_ptr<KerasModel> model, Options options);

  // Errors: InvalidArgument for a tensor that breaks the contract; Internal from the model.
  absl::StatusOr<at::Tensor> Run(const at::Tensor& rgb01) const;

  const KerasModel& model() const { return *model_; }
  KerasModel& mutable_model() { return *model_; }

 private:
  Enhancer(std::unique_ptr<KerasModel> model, Options options) : model_(std::move(model)), options_(options) {}
  absl::StatusOr<at::Tensor> RunTiled(const at::Tensor& x255) const;

  std::unique_ptr<KerasModel> model_;
  Options options_;
};

}  // namespace fusion::keras
