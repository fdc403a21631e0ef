// PipelineRunner: the face-fusion pipeline as fusiond's JobRunner
// (docs/ARCHITECTURE.md#the-life-of-an-image-job; the OOM ladder: #invariants, 5).
//
// A job: decode (image_io.h) -> detect -> landmarks -> encode -> generate -> enhance (optional,
// on face crops) -> blend -> score -> upscale (optional, whole frame) -> encode PNG/JPEG.
// Detection scans the full-resolution image with an image pyramid planned from face sizes
// (multiscale.h): faces from min_face_px (JobOptions, else Options::default_min_face_px = 40)
// up to the whole frame, score threshold min_face_score (else the detector's default). max_side /
// low_vram no longer change which faces are found: they cap one detection pass's network input
// side (max_side rounded down to x32, clamped to [416, 1024]; default 1024, low_vram 640), the
// detect stage's working set; a smaller cap means more tiles. Landmarks, descriptors and the
// generator work on full-resolution crops, and the output keeps the target's resolution
// (upscale excepted).
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
// Video targets (the kind comes from the target's content, target_kind.h): video_job.cc runs
// the same stages per frame (the source face detected, landmarked and encoded once), frames
// streamed decode -> swap -> encode through bounded queues of video_queue_frames, encoded in
// committed chunks of video_chunk_frames (segment files in results_dir/<job>.parts: a job run
// again after a crash resumes after them), joined with the target's audio into the result MP4
// in results_dir (temporary name, fsync, rename): Output::result_file.
// Threads: Options::job_threads (parallel.h) detection passes and faces of generate, full blend
// and score at once, each on one thread with one intra-op thread.
// Face cache (Options::face_cache_bytes, face_cache.h): a source or reference image whose
// analysis is cached skips the detect, landmarks and encode stages (its RGB copy is not made);
// the job's image and report are the same bytes as without the cache, less those stages'
// reports. Analyses are stored after a job whose detect, landmarks and encode stages all ran
// in mode DEVICE (untiled, on the device copy).
// Thread-safety: Plan(), Run() and StageModels() may be called concurrently.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "jobs/job_runner.h"
#include "jobs/live_runner.h"
#include "memory/residency_manager.h"
#include "pipeline/face_cache.h"
#include "pipeline/fault_injection.h"
#include "loader/model_store.h"
#include "pipeline/oom_ladder.h"
#include "pipeline/stages.h"
#include "pipeline/target_kind.h"

namespace fusion {

class Execution;

class PipelineRunner final : public jobs::JobRunner, public jobs::LiveRunner {
 public:
  struct Options {
    // SSD, not the lighter TinyFaceDetector: over the pyramid's many passes tiny puts boxes on
    // clutter, clothes and shoulders (5 on a 12-MP clutter image, 2 on the group photos; SSD 0),
    // and SSD's recall at 40-64 px faces is higher (bench/detect, multiscale_test.cc).
    std::string detector = "ssd_mobilenetv1";
    std::string landmarks = "face_landmark_68";
    std::string encoder = "face_recognition";
    std::string generator = "classical-fusion";
    std::string enhancer_x2 = "esrgan-slim-x2";  // enhance/upscale defaults per scale
    std::string enhancer_x4 = "esrgan-slim-x4";
    std::string blender = "feather-blend";  // simple blending (a builtin, no weights)
    uint32_t detect_max_input = 1024;           // pixels; a job's max_side overrides it
    uint32_t low_vram_detect_max_input = 640;   // pixels, for low_vram jobs
    uint32_t default_min_face_px = 40;          // pixels of the original image, for min_face_px 0
    float default_min_face_score = 0;           // for min_face_score 0; 0 = the detector's own
    // CPU threads one job uses where its work splits (pipeline/parallel.h): detection passes and
    // the per-face stages (generate, full blend, score) run that many items at once, each on one
    // thread with one intra-op thread. The other stages keep LibTorch's intra-op default
    // (OMP_NUM_THREADS, else what LibTorch counts as cores). Results do not depend on it.
    // 0 = std::thread::hardware_concurrency().
    uint32_t job_threads = 0;
    uint64_t max_pixels = 100'000'000;  // per decoded image
    uint32_t max_faces = 64;            // target faces swapped at most
    std::string results_dir;            // where video results are written; empty: no video jobs
    size_t video_queue_frames = 4;      // frames each of the two video queues holds at most
    // Frames per chunk of a video job: each chunk is encoded to its own segment file and
    // committed (video/segment_store.h), so a job interrupted by a crash resumes at its first
    // uncommitted chunk; the result is the segments joined. 30 = one second at 30 fps.
    size_t video_chunk_frames = 30;
    // Bytes of the source-face cache (face_cache.h): the analysis (largest face's box,
    // landmarks, descriptor) of source and reference images, keyed by their content, so a
    // source swapped into many targets is detected, landmarked and described once. Charged to
    // the host tier as it fills. 0 = no cache (every job analyses its images). The daemon's
    // default is DaemonConfig::face_cache_bytes.
    uint64_t face_cache_bytes = 0;
    OomLadder::Options ladder;
  };
  // `store`, `residency`, `meter` must outlive the runner; `faults` may be null.
  PipelineRunner(ModelStore* store, ResidencyManager* residency, DeviceMeter* meter,
                 FaultInjector* faults, Options options);

  // The plan: the options validated (StageModels), the target classified (ClassifyTarget),
  // the source, target and (faces REFERENCE) reference image through image::ScreenImage at
  // max_pixels: INVALID_ARGUMENT for a bomb, an unknown format, a corrupt header, a cut file.
  // The result bound: an image's, EncodedResultBound() (image_io.h) of the output (the target's
  // sides times the upscale, its channels and sample size); a video's, twice the target's bytes
  // (an estimate: the result re-encodes the target's frames at its size and bit rate).
  // Image faults carry stage "decode" (fusion_status.h WithStage); option faults none.
  absl::StatusOr<jobs::JobPlan> Plan(const v1::JobOptions& options, const std::string& source_image,
                                     const std::string& target_image) override;
  absl::StatusOr<Output> Run(const jobs::JobRecord& job, const std::string& source_image,
                             const std::string& target_image, Context& context) override;

  // A live session (live_session.cc): the same stages per frame as a video job, with the
  // session's models leased while it is open.
  absl::StatusOr<std::unique_ptr<jobs::LiveSession>> OpenLive(const Owner& owner, const std::string& source_image,
                                                              const v1::JobOptions& options,
                                                              std::function<bool()> cancelled,
                                                              std::function<void()> give_way) override;

  // The catalogue model of each stage of a job with `options`, in run order (the plan's);
  // INVALID_ARGUMENT naming a bad option.
  absl::StatusOr<std::vector<std::string>> StageModels(const v1::JobOptions& options) const;

  // The in-process API: Plan, then the job by that plan, for an owner.
  absl::StatusOr<Output> Swap(const Owner& owner, const std::string& source_image,
                              const std::string& target_image, const v1::JobOptions& options,
                              Context& context);

  // The source-face cache, or null when Options::face_cache_bytes is 0.
  FaceCache* face_cache() const { return face_cache_.get(); }

 private:
  absl::Status Validate(const v1::JobOptions& o) const;
  std::string EnhancerFor(const v1::JobOptions& o, uint32_t scale) const;
  DetectSettings DetectSettingsFor(const v1::JobOptions& o) const;
  // Plan's screening of the source and reference images; the result bound.
  absl::StatusOr<uint64_t> ScreenImages(const v1::JobOptions& o, const TargetClass& target,
                                        const std::string& source_image, const std::string& target_image) const;
  // The job by its plan (Run's and Swap's).
  absl::StatusOr<Output> Execute(const Owner& owner, const jobs::JobPlan& plan, const std::string& source_image,
                                 const std::string& target_image, Context& context);
  // Execute's detect stage over the pictures not analysed yet.
  absl::Status DetectPictures(Execution& run, const DetectSettings& detect, std::vector<Picture>& pics) const;
  int JobThreads() const;  // options_.job_threads, 0 resolved
  // What an image's analysis depends on besides its bytes (the face cache's key).
  std::string AnalysisSettings(const DetectSettings& d) const;
  // The video job (video_job.cc): `output.report` (the one `run` reports into) has the device set.
  absl::StatusOr<Output> SwapVideo(Execution& run, const std::string& source_image, const std::string& target,
                                   const v1::JobOptions& o, Output& output);

  ModelStore* const store_;
  ResidencyManager* const residency_;
  DeviceMeter* const meter_;
  FaultInjector* const faults_;
  const Options options_;
  OomLadder ladder_;
  const std::unique_ptr<FaceCache> face_cache_;
};

}  // namespace fusion
