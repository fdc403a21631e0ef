// Classical (weight-free) face fusion as LibTorch code, so it runs on whichever device holds the
// crops. Algorithm (as OpenCV's samples/face/sample_face_swapping.cpp, written anew for tensors):
//   1. Delaunay triangulation of the target's 68 points (cv::Subdiv2D, host geometry);
//   2. per-triangle affine target->source, rasterised into a triangle-id map (host, S*S int16),
//      then a piecewise-affine sampling grid and at::grid_sample of the source (device);
//   3. colour transfer in CIE Lab (sRGB D65), low frequencies from the target and details from the
//      source (as in the detail/base split of Burt & Adelson's pyramid blending): over the covered
//      pixels, blur(x) = Gaussian(x * cov) / Gaussian(cov) (normalised convolution) and
//        L  = blur_L(target L) + (source L - blur_L(source L)),
//        ab = blur_ab(target ab) + chroma_detail * (source ab - blur_ab(source ab)),
//      sigmas as fractions of the crop side. The face keeps the target's skin colour and lighting
//      and takes no colour that the target does not have nearby: no gain multiplies the source's
//      chroma (the moment matching of Reinhard et al. 2001, used before, multiplied a flat
//      source's chroma by st/ss, up to 4.5x, into cyan and orange spots). Chosen on bench/quality
//      (docs/QUALITY.md: blotch fraction and identity distance over sigma and chroma_detail) (device);
//   4. out = target + ratio * covered * (colour_matched_warp - target) (device).
// Pixels outside the triangulation's hull keep the target's values exactly.
// Invariant: ratio 0 returns a tensor equal to `target`. Tensor contract: generator.h.
// Thread-safety: immutable after Create(); Fuse() may run concurrently.
#pragma once

#include <memory>

#include "models/generator/generator.h"

namespace fusion::models {

class ClassicalGenerator final : public FusionGenerator {
 public:
  struct Options {
    bool colour_transfer = true;  // step 3; off only to compare against the raw warp
    // Gaussian sigmas of step 3 as fractions of the crop side (0.08 x 256 = 20.5 px): larger
    // luminance sigma keeps more of the source's shading (identity), smaller chroma sigma keeps
    // the target's local colour (no blotches).
    double luminance_sigma = 0.08;
    double chroma_sigma = 0.04;
    double chroma_detail = 0.0;  // [0,1]: share of the source's chroma detail kept
  };

  static absl::StatusOr<std::unique_ptr<ClassicalGenerator>> Create(Options options);

  absl::StatusOr<at::Tensor> Fuse(const GeneratorInputs& in) const override;
  std::string name() const override { return "classical-fusion"; }

 private:
  explicit ClassicalGenerator(Options options) : options_(options) {}
  Options options_;
};

// sRGB [0,1] <-> CIE Lab (D65; L in [0,100]) on [N,3,H,W] float32 tensors, any device.
at::Tensor RgbToLab(const at::Tensor& rgb);
at::Tensor LabToRgb(const at::Tensor& lab);

}  // namespace fusion::models
