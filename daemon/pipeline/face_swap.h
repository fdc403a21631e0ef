// SwapFaces: the per-face core of every job — landmarks -> encode -> generate -> enhance
// (optional) -> blend -> score (optional) — on the pictures of an image job, or on one frame of
// a video job whose source face was prepared once (FaceWork::source_ready). One pipeline: the
// image job runs it once, the video job once per frame (video_job.cc).
// Errors: the stages' (INVALID_ARGUMENT, RESOURCE_EXHAUSTED naming the stage, CANCELLED,
// INTERNAL); FAILED_PRECONDITION when no target face is within the reference distance of an
// image job (a video frame without one is passed through: faces_swapped 0).
// Thread-safety: free functions over one job's Execution (its thread only).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <opencv2/core.hpp>

#include "absl/status/status.h"
#include "fusion/v1/fusion.pb.h"
#include "pipeline/execution.h"
#include "pipeline/stages.h"

namespace fusion {

// The catalogue model of each per-face stage; enhancer/upscaler empty when not asked for.
struct FaceStages {
  std::string landmarks, encoder, generator, enhancer, blender, upscaler;
  // Faces at once in generate, the full blend (faces whose regions do not overlap) and score
  // (pipeline/parallel.h); the same results at any count.
  int threads = 1;
};

struct FaceWork {
  // The source picture (pics[0]) and a reference (pics[2]) already have their landmarks and
  // descriptors: only the target (pics[1]) is landmarked (and described for REFERENCE).
  bool source_ready = false;
  // The target's faces have their landmarks and are the ones to swap (a video frame's tracked
  // faces, selected by track): no landmarks or encode stage for the target, only the faces too
  // far outside the frame set aside.
  bool target_ready = false;
  // Re-describe each swapped face in the result (the score stage; report.faces with identity
  // distances). Video frames skip it.
  bool score = true;
  // Full-mode blend: the side the Poisson membrane is solved at, at most (models::BlendOptions::
  // poisson_side; video frames set models::kVideoPoissonSide).
  int poisson_side = models::kImagePoissonSide;
  // Target faces more than this share outside the frame are set aside (SetAsideCutFaces; a
  // video's tracked faces: kMaxOutsideShareTracked).
  float max_outside_share = kMaxOutsideShare;
};

inline constexpr uint64_t kCropPixels = 256 * 256;
// Context pixels an ESRGAN tile reads on each side, for the ladder's tile estimates: the
// catalogue's KerasModel::halo_px() (printed by EnhancerEstimate.WorkingSetPerPixelCovers...):
// 10 for esrgan-slim-*, 18 for esrgan-medium-*; any other enhancer counts 18 (the larger).
int EsrganHaloPx(const std::string& model);

// Swaps pics[0]'s largest face into the target faces of pics[1] (pics[2]: the reference of
// REFERENCE selection), detected already. Writes the swapped frame to *frame (a copy of the
// target with the faces blended in) and sets report.faces_swapped (0 when a source-ready frame
// has no face within the reference distance: *frame is then the target unchanged).
absl::Status SwapFaces(const FaceStages& m, const v1::JobOptions& o, std::vector<Picture>& pics, Execution& run,
                       v1::JobResult& report, cv::Mat* frame, const FaceWork& work = {});

}  // namespace fusion
