// Classical (weight-free) face fusion as LibTorch code, so it runs on whichever device holds the
// crops. Algorithm (as OpenCV's samples/face/sample_face_swapping.cpp, written anew for tensors):
//   1. Delaunay triangulation of the target's 68 points (cv::Subdiv2D, host geometry);
//   2. per-triangle affine target->source, rasterised into a triangle-id map (host, S*S int16),
//      then a piecewise-affine sampling grid and at::grid_sample of the source (device);
//   3. colour transfer in CIE Lab (Reinhard et al. 2001: per-channel mean/std of the warped source
//      matched to the target over the covered pixels; sRGB D65 conversions) (device);
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
