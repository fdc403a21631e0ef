// PipelineRunner: the face-fusion pipeline as fusiond's JobRunner (DESIGN.md §2, §4).
//
// A job: decode (image_io.h) -> detect -> landmarks -> encode -> generate -> enhance (optional,
// on face crops) -> blend -> score -> upscale (optional, whole frame) -> encode PNG/JPEG.
// Detection runs on a copy of each image scaled to the working side (max_side, default 1280;
// low_vram 800; aspect ratio kept); landmarks, descriptors and the generator work on
// full-resolution crops, and the output keeps the target's resolution (upscale excepted).
// Every model stage runs under an OomLadder (one lease per attempt; RunDevice inside the stage's
// device scope from the model's device copy, RunCpu outside it from a host copy). Blending:
// "simple" (feathering) is a model stage over the weight-free builtin "feather-blend", at:: ops
// on the stage's device under the ladder (reported DEVICE, CPU_FALLBACK, ...); "full" (Poisson,
// cv::seamlessClone) is a global solve, OpenCV code on the host by design, reported HOST. "score" re-describes each swapped face in the result with the encoder: its
// distance to the source face is the face's identity_distance; the target face's own distance
// (before the swap) is its target_identity_distance.
// Face selection: ALL target faces, the LARGEST, or REFERENCE: those whose descriptor is within
// reference_max_distance (0 = 0.6) of the reference image's largest face.
// Cancellation is checked before every stage and inside it between faces, tiles and detection
// passes (checkpoint.h: "job cancelled during stage 'enhance' (face 3 of 13, tile 5 of 16)").
// Errors: INVALID_ARGUMENT (bad option, undecodable
// image naming source/target/reference), FAILED_PRECONDITION ("no face in the source image",
// "no face in the target image", no face within the reference distance), RESOURCE_EXHAUSTED
// naming the stage, CANCELLED, INTERNAL naming the stage and model.
// Thread-safety: Run() and StageModels() may be called concurrently.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "jobs/job_runner.h"
#include "memory/residency_manager.h"
#include "pipeline/fault_injection.h"
#include "pipeline/model_store.h"
#include "pipeline/oom_ladder.h"

namespace fusion {

class PipelineRunner final : public jobs::JobRunner {
 public:
  struct Options {
    std::string detector = "tiny_face_detector";
    std::string landmarks = "face_landmark_68";
    std::string encoder = "face_recognition";
    std::string generator = "classical-fusion";
    std::string enhancer_x2 = "esrgan-slim-x2";  // enhance/upscale defaults per scale
    std::string enhancer_x4 = "esrgan-slim-x4";
    std::string blender = "feather-blend";  // simple blending (a builtin, no weights)
    uint32_t default_max_side = 1280;  // pixels
    uint32_t low_vram_max_side = 800;  // pixels
    uint64_t max_pixels = 100'000'000;  // per decoded image
    uint32_t max_faces = 64;            // target faces swapped at most
    OomLadder::Options ladder;
  };
  // `store`, `residency`, `meter` must outlive the runner; `faults` may be null.
  PipelineRunner(ModelStore* store, ResidencyManager* residency, DeviceMeter* meter,
                 FaultInjector* faults, Options options);

  absl::StatusOr<std::vector<std::string>> StageModels(const std::string& options) override;
  // Source, target and (faces REFERENCE) reference image through image::ScreenImage at
  // max_pixels: INVALID_ARGUMENT for a bomb, an unknown format, a corrupt header, a cut file.
  absl::Status CheckImages(const std::string& options, const std::string& source_image,
                           const std::string& target_image) override;
  absl::StatusOr<Output> Run(const jobs::JobRecord& job, const std::string& source_image,
                             const std::string& target_image, Context& context) override;

  // The in-process API: the same pipeline for a parsed JobOptions and an owner.
  absl::StatusOr<Output> Swap(const Owner& owner, const std::string& source_image,
                              const std::string& target_image, const v1::JobOptions& options,
                              Context& context);

 private:
  absl::Status Validate(const v1::JobOptions& o) const;
  std::string EnhancerFor(const v1::JobOptions& o, uint32_t scale) const;

  ModelStore* const store_;
  ResidencyManager* const residency_;
  DeviceMeter* const meter_;
  FaultInjector* const faults_;
  const Options options_;
  OomLadder ladder_;
};

}  // namespace fusion
