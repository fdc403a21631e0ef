// The blend stage: pastes a generator result (generator.h) back into the decoded target frame.
//
// The generator works on an aligned crop; blending pastes only its *change*
// (fused_crop - target_crop), warped back to the frame with the inverse crop transform, so an
// unchanged crop (ratio 0) leaves the frame unchanged: exactly in simple mode, within 2 levels
// at a few pixels in full mode (the Lab colour correction's float round-off; the Poisson
// solver's own bias is cancelled by subtracting the target cloned onto itself).
// Mask: the convex hull of the swap region (swap_region.h: the 68 target landmarks and a row of
// forehead points above the brows; frame pixels), eroded by the feather radius r
// and Gaussian-blurred with a (2r+1)^2 kernel, so the feathered weight is > 0 only inside the hull.
//   simple mode: out = target + weight * change.
//   full mode:   colour correction (the changed face's Lab mean/std matched to the target's over
//                the hull; the std gain capped to [0.8, 1.25] so a grey source's faint chroma is
//                not stretched into spots; chroma gain <= 1), then Poisson blending (cv::seamlessClone,
//                NORMAL_CLONE, Perez et al. 2003) into the target over the hull, keeping the
//                Lab L of the clone and the (a, b) of the colour-corrected face, then the same
//                feathered weight. The Poisson membrane (clone - face: harmonic, smooth) of a hull
//                over 160 px is solved scaled down to 160 px (the solver's box widened to a fast
//                DFT length) and upsampled, and a hull over 384 px gets its colour correction,
//                membrane and feather weight computed on a copy scaled to 384 px (upsampled to
//                the hull), so blending costs about the same at any face size (fusion_bench,
//                wall, warm, min of 3 medians, builds in turn on a quiet machine: 186-px face 22
//                ms, 557 px 53 ms, 1113 px 69 ms; the code before 41, 81, 110 ms).
//                The first full-mode blend in a process also pays OpenCV's float Lab tables (180
//                ms once): PrepareBlend() builds them up front.
//                Per-step costs and the quality of the reduced path: docs/QUALITY.md ("Blend cost").
// Invariant: every pixel outside FaceHullMask() is byte-identical to the input frame.
// The pipeline runs simple mode as at:: ops on the stage's device (BlendSimpleOnDevice,
// daemon/pipeline/stages.h) with the hull, radius and checks from here; this file is the
// reference it is tested against.
// Thread-safety: free functions, no shared state. Host (OpenCV) code; no LibTorch.
#pragma once

#include <opencv2/core.hpp>
#include <vector>

#include "absl/status/statusor.h"

namespace fusion::models {

enum class BlendMode { kSimple, kFull };

// BlendOptions::poisson_side for images, and for video frames: on a 186-px face the full blend
// takes 14 ms of CPU at 160 and 7.5 ms at 96 (fusion_bench); a video's faces are blended 25-30
// times a second, and its membrane, solved anew each frame, is smoother at 96 (less flicker).
inline constexpr int kImagePoissonSide = 160;
inline constexpr int kVideoPoissonSide = 96;

struct BlendOptions {
  BlendMode mode = BlendMode::kFull;
  // Feather radius r in pixels = max(1, round(feather_fraction * sqrt(hull area in px^2))).
  double feather_fraction = 0.03;
  bool colour_correction = true;  // full mode only
  // Full mode: the Poisson membrane of a hull ROI wider or taller than this is solved on the ROI
  // scaled down to it (the membrane is harmonic, smooth inside the hull). 160 for images; video
  // frames take kVideoPoissonSide (daemon/pipeline/face_swap.h FaceWork).
  int poisson_side = kImagePoissonSide;
};

struct BlendInput {
  cv::Mat fused_crop;                  // CV_32FC3 RGB [0,1], S x S: generator output
  cv::Mat target_crop;                 // CV_32FC3 RGB [0,1], S x S: the generator's target input
  cv::Matx23d frame_to_crop;           // the crop's transform (face_crop.h FaceCrop)
  std::vector<cv::Point2f> landmarks;  // 68 target landmarks in frame pixels
};

// CV_8U mask of the frame, 255 inside the convex hull of SwapRegionPoints(landmarks) (LINE_8 fill).
cv::Mat FaceHullMask(const std::vector<cv::Point2f>& landmarks, cv::Size frame_size);

// The same mask over a region only, so a face costs its own box and not a frame-sized buffer
// (an 80 MP frame: 80 MB per face). `roi` = the bounding box of the hull's pixels in the frame
// (empty when the hull is outside it); `ext` = roi grown by `margin` px on every side, clipped
// to the frame; `mask` = FaceHullMask(landmarks, frame_size)(ext), byte for byte, ext-sized.
// mask(roi - ext.tl()) is then a view whose parent holds `margin` px of context (cv::erode
// reads it), as a view of the frame-sized mask would.
struct HullRegion {
  cv::Mat mask;  // CV_8U, ext.size()
  cv::Rect roi, ext;
  cv::Mat RoiView() const { return mask(roi - ext.tl()); }
};
HullRegion FaceHullRegion(const std::vector<cv::Point2f>& landmarks, cv::Size frame_size, int margin);

int FeatherRadiusPx(const std::vector<cv::Point2f>& landmarks, const BlendOptions& options);

// OK when `in` and `frame_bgr` fit BlendFace: InvalidArgument ("blend: ...") naming the frame,
// fused_crop/target_crop (types, sizes) or the landmark count.
absl::Status ValidateBlendInput(const BlendInput& in, const cv::Mat* frame_bgr);

// Builds what the first full-mode BlendFace in a process would otherwise build on its way: OpenCV's
// float BGR<->Lab conversion tables (cv::cvtColor builds them on first use; 180 ms on this
// machine, a tiny static allocation). Idempotent and thread-safe (OpenCV's own once-init).
void PrepareBlend();

// Blends one face into `frame_bgr` (CV_8UC3) in place. Errors: InvalidArgument naming the input
// whose type/size is wrong; Internal with OpenCV's message if seamlessClone fails.
absl::Status BlendFace(const BlendInput& in, const BlendOptions& options, cv::Mat* frame_bgr);

}  // namespace fusion::models
