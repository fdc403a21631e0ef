// Execution: one job's run through the pipeline's stages (pipeline_runner.cc, video_job.cc):
// each model stage under the OOM ladder with one lease per attempt, host stages, host-buffer
// admissions, the prefetch of the next stage's model, and the job's stage reports and events.
//
// Per-frame mode (video jobs, set_per_frame): the same stages run once per frame; their
// reports are merged into one per stage name (ms and upload waits summed, attempts and peak
// bytes the largest, mode the most degraded, tile the smallest), each degradation is reported
// once, and no stage event is sent per frame (the video job reports frames instead).
// Also here: the helpers both kinds of job use to decode and picture their images.
// Thread-safety: one Execution per job, used from the job's thread only.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <future>
#include <string>
#include <vector>

#include <opencv2/core.hpp>

#include "absl/status/statusor.h"
#include "jobs/job_runner.h"
#include "memory/residency_manager.h"
#include "pipeline/checkpoint.h"
#include "pipeline/image_io.h"
#include "loader/model_store.h"
#include "pipeline/oom_ladder.h"
#include "pipeline/stages.h"

namespace fusion {

// A stage's computation on one model copy; `cp` is asked between its faces/tiles/passes.
using StageFn = std::function<absl::Status(const ModelCopy& copy, int tile_px, const Checkpoint& cp)>;

class Execution {
 public:
  // `plan`: the model of every model stage in run order (StageModels), for prefetch.
  Execution(const ModelStore& store, ResidencyManager& residency, OomLadder& ladder, const Owner& owner,
            jobs::JobRunner::Context& ctx, v1::JobResult& report, std::vector<std::string> plan)
      : store_(store), residency_(residency), ladder_(ladder), owner_(owner), ctx_(ctx), report_(report),
        plan_(std::move(plan)) {}
  ~Execution() {
    if (prefetch_.valid()) prefetch_.wait();
  }
  Execution(const Execution&) = delete;
  Execution& operator=(const Execution&) = delete;

  void set_per_frame(bool on) { per_frame_ = on; }
  // Per-frame mode: the frame the next stages run on ("frame 183 of 300"). The job's stage text
  // follows the stages (Context::FrameStage, no event), and a cancel names the frame:
  // "job cancelled before stage 'score' (frame 183 of 300)", "job cancelled during stage
  // 'generate' (frame 183 of 300, face 2 of 3)".
  void set_frame(std::string frame) { frame_ = std::move(frame); }
  jobs::JobRunner::Context& context() { return ctx_; }
  const Owner& owner() const { return owner_; }

  // Every stage starts at a yield point (JobRunner::Context::YieldPoint): no lease of the job's
  // is held there, so the job can give way to higher-priority work and take its models again.
  // Runs one model stage under the ladder. `input_pixels`: pixels the network sees at once.
  // `tile_halo_px`: context a tile reads on each side (StageSpec::tile_halo_px).
  absl::Status Stage(const std::string& name, const std::string& model, uint64_t input_pixels,
                     const std::string& bucket, float progress, StageFn fn, int max_tile_px = 256,
                     int min_tile_px = 64, int tile_halo_px = 0);

  // Admits `bytes` of host buffers (images a stage produces) on the host tier before they are
  // allocated; the lease must outlive them. RESOURCE_EXHAUSTED / DEADLINE_EXCEEDED as
  // ResidencyManager::AcquireHost, with `what` in the message.
  absl::StatusOr<Lease> HostBuffers(const std::string& what, uint64_t bytes);

  // A degradation that is not a stage's (e.g. the generator's note on the source face): in the
  // result and as a job event; once per job in per-frame mode.
  void Degrade(const std::string& d);

  // Progress inside a running stage: a StageStarted event "stage (note)" at `progress` (the
  // detect stage's scan passes). The stage's StageFinished then reports no less, so progress
  // never goes back. May be called from the stage's worker threads at once.
  void Progress(const std::string& stage, const std::string& note, float progress);

  // A host stage (no model, no lease): runs `fn` and reports it with mode HOST.
  absl::Status HostStage(const std::string& name, float progress,
                         const std::function<absl::Status(const Checkpoint&)>& fn);

 private:
  // Uploads `model` on a worker thread when it fits in the free budget now, evicting nothing (a
  // prefetch, docs/ARCHITECTURE.md#invariants, 3; on CUDA the upload itself runs on a side stream
  // from pinned memory, ModelStore::Upload). Failures only cost the wait.
  void Prefetch(const std::string& model);
  void Finish(const v1::StageReport& r, float progress, const std::vector<std::string>& degradations);
  // Per-frame mode: merges `r` into the report's stage of the same name (or appends it).
  void Merge(const v1::StageReport& r);

  const ModelStore& store_;
  ResidencyManager& residency_;
  OomLadder& ladder_;
  const Owner owner_;
  jobs::JobRunner::Context& ctx_;
  v1::JobResult& report_;
  const std::vector<std::string> plan_;
  size_t next_ = 0;
  std::future<void> prefetch_;
  // "before stage 'x'" / the stage's checkpoint, with the frame in per-frame mode.
  absl::Status CancelledBefore(const std::string& name) const;
  Checkpoint StageCheckpoint(const std::string& name);
  // The stage's start: an event, or in per-frame mode the job's stage text.
  void Started(const std::string& name, float progress);

  bool per_frame_ = false;
  std::string frame_;
  std::atomic<float> progress_floor_{0};  // the largest Progress() so far
};

// The picture of a BGR image: its RGB copy made (the caller admitted its 3 B/px).
absl::StatusOr<Picture> MakePicture(const cv::Mat& bgr, std::string what);
// "WxH" of an image, a shape bucket.
std::string Bucket(const cv::Mat& m);

// Decodes `bytes` after admitting its memory on the host tier (DecodeHostBytes, from the
// screened header): the image's buffers plus `extra_per_px` bytes per pixel of working copies
// the job makes of it under `*buffers` (the caller holds it while it uses them), the decoder's
// scratch under a lease that ends here. Errors: ScreenImage's and DecodeImage's
// INVALID_ARGUMENT; RESOURCE_EXHAUSTED / DEADLINE_EXCEEDED naming "stage 'decode'", the host
// tier and the bytes (ResidencyManager::AcquireHost).
absl::StatusOr<DecodedImage> AdmittedDecode(Execution& run, const std::string& bytes, const std::string& what,
                                            uint64_t max_pixels, uint64_t extra_per_px, Lease* buffers);

}  // namespace fusion
