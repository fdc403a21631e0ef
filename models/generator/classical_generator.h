// Classical (weight-free) face fusion as LibTorch code, so it runs on whichever device holds the
// crops. Algorithm (as OpenCV's samples/face/sample_face_swapping.cpp, written anew for tensors):
//   0. the target's inner points (brows, eyes, nose, mouth: 17-67) moved `source_shape` of the way
//      toward the source's, after a least-squares similarity maps the source's inner points onto
//      the target's (ShapeTowardSource): the face keeps the source's proportions (eye spacing,
//      nose length, mouth width: identity) inside the target's pose and jaw line (the warp keeps
//      the target's outline, so the blend's hull is the target's). Skipped for a foreshortened
//      source (its hidden half's points are guesses);
//   1. Delaunay triangulation of the target's swap region: its 68 points and the forehead row
//      above the brows (models/blend/swap_region.h; cv::Subdiv2D, host geometry);
//   2. per-triangle affine target->source, rasterised into a triangle-id map (host, S*S int16),
//      then a piecewise-affine sampling grid and at::grid_sample of the source (device). For a
//      turned source (one half foreshortened), the target's half on that side takes a second warp
//      that maps point i to the source's mirror point (the visible half, reflected), split at the
//      target's midline with a feathered mask ("soft symmetry");
//   3. colour transfer in CIE Lab (sRGB D65), low frequencies from the target and details from the
//      source (as in the detail/base split of Burt & Adelson's pyramid blending): over the covered
//      pixels, blur(x) = Gaussian(x * cov) / Gaussian(cov) (normalised convolution) and
//        L  = blur_L(target L) + (source L - blur_L(source L)),
//        ab = blur_ab(target ab) + chroma_detail * (source ab - blur_ab(source ab)),
//      sigmas as fractions of the crop side (the blurs on the crop reduced to sigma >= 4 px:
//      Options::reduced_low_pass); where L would leave the sRGB gamut at that (a, b), the
//      detail term is scaled down per pixel until it fits (gamut_fit: chroma kept, not clipped).
//      The face keeps the target's skin colour and lighting
//      and takes no colour that the target does not have nearby: no gain multiplies the source's
//      chroma (the moment matching of Reinhard et al. 2001, used before, multiplied a flat
//      source's chroma by st/ss, up to 4.5x, into cyan and orange spots). Chosen on bench/quality
//      (docs/QUALITY.md: blotch fraction and identity distance over sigma and chroma_detail) (device);
//   4. out = target + ratio * covered * ramp * (colour_matched_warp - target) (device); ramp is 1
//      inside the 68 points' hull and falls linearly to 0 across the forehead strip above the
//      brows (ForeheadRamp in the .cc: the source's own forehead is not pasted, only its brows).
// Pixels outside the triangulation's hull keep the target's values exactly.
// Invariant: ratio 0 returns a tensor equal to `target`. Tensor contract: generator.h.
// Thread-safety: immutable after Create(); Fuse() may run concurrently.
#pragma once

#include <memory>
#include <opencv2/core/types.hpp>
#include <vector>

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
    // [0,1]: step 0's share; 0 = the target's geometry (before), 1 = the source's proportions.
    // Chosen on bench/quality (docs/QUALITY.md): identity distance and what the crops look like.
    double source_shape = 0.5;
    // Step 3's luminance detail is scaled down, per pixel, just enough that the colour stays in
    // the sRGB gamut (chroma kept, not clipped); false = clip per channel (before).
    bool gamut_fit = true;
    // Gain on step 3's luminance detail (source L - blur_L(source L)): the features that carry
    // identity (brows, eye sockets, nose and mouth edges) at full strength over the target's
    // shading. Chosen on bench/quality (docs/QUALITY.md): 1.0 -> 1.5 took the profile source's
    // faces under identity 0.6 from 22 to 26 of 32 (group photos) and 24 to 33 of 49 (grid), the
    // astronaut's 31 -> 32 of 32, Grace's 32 of 32 kept; 2.0 made skin texture harsh (looked at).
    double luminance_detail = 1.5;
    // Step 3's blurs (and the target's Lab, which only enters blurred) at a resolution reduced
    // by a power of two that keeps each sigma >= 4 px, upsampled back bilinearly: 17 ms instead
    // of 34 ms of CPU a 256 crop (fusion_bench), fused crops within 3 levels in 8 bits of the
    // full-resolution transfer (generator_test). false = full resolution (the reference).
    bool reduced_low_pass = true;
  };

  static absl::StatusOr<std::unique_ptr<ClassicalGenerator>> Create(Options options);

  absl::StatusOr<at::Tensor> Fuse(const GeneratorInputs& in) const override;
  std::string name() const override { return "classical-fusion"; }
  // A turned source (one half's hull under half the other's: ForeshortenedSide) gets a note:
  // its hidden half is the mirror of the visible one and its proportions are not used.
  std::vector<std::string> SourceNotes(const at::Tensor& source_landmarks) const override;

 private:
  explicit ClassicalGenerator(Options options) : options_(options) {}
  Options options_;
};

// Step 0 on 68-point sets in one frame (pixels): `dst` with points 17-67 moved `inner` and the
// jaw (0-16) `jaw` of the way toward S(src), S the least-squares similarity (Umeyama 1991, in
// 2-D) taking src's points 17-67 onto dst's. inner = jaw = 0 returns dst; a src that is a
// similarity image of dst returns dst for any weights. Both vectors must hold 68 points.
std::vector<cv::Point2f> ShapeTowardSource(const std::vector<cv::Point2f>& src, const std::vector<cv::Point2f>& dst,
                                           double inner, double jaw);

// sRGB [0,1] <-> CIE Lab (D65; L in [0,100]) on [N,3,H,W] float32 tensors, any device.
at::Tensor RgbToLab(const at::Tensor& rgb);
at::Tensor LabToRgb(const at::Tensor& lab);

}  // namespace fusion::models
