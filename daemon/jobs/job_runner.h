// JobRunner: what executes one job (the pipeline implements it; tests use their own).
//
// The JobManager calls Run() on one of its worker threads, with the job's journaled inputs.
// The runner reports progress through the Context and checks Context::Cancelled() at every
// stage boundary and inside long stages (between faces, tiles, detection passes), returning
// CANCELLED when it is set (leases released by then). The flag is set by the owner's Cancel or
// by a shutdown past its drain deadline; the manager tells the two apart. At its yield points
// (Context::YieldPoint: between stages, between frames) a job gives way to higher-priority work.
// Thread-safety: Run() and StageModels() are called concurrently from several threads.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "fusion/v1/fusion.pb.h"
#include "jobs/job.h"
#include "jobs/job_plan.h"

namespace fusion::jobs {

class JobRunner {
 public:
  // Progress sink and cancellation flag of one running job.
  class Context {
   public:
    virtual ~Context() = default;
    virtual bool Cancelled() const = 0;
    virtual void StageStarted(const std::string& stage, float progress) = 0;
    virtual void StageFinished(const v1::StageReport& report, float progress) = 0;
    virtual void Degradation(const std::string& what) = 0;
    // A video job: `done` of `total` frames encoded, `fps` frames processed per second so far.
    virtual void FramesDone(uint64_t done, uint64_t total, double fps) {}
    // A video job: the per-frame stage now running ("generate", "detect (waiting for device
    // memory: ...)"), the job's stage text. No event is sent and the progress stays FramesDone's.
    virtual void FrameStage(const std::string& stage) {}
    // True when Cancelled() is the daemon stopping (not the owner's cancel): the job stays
    // RUNNING and runs again at the next start, so it keeps what it can resume from.
    virtual bool Interrupted() const { return false; }
    // A yield point: the runner calls it where it holds no device lease (before each stage,
    // between a video's frames). While work of a higher priority waits — a queued job that
    // outranks this one with no slot free, or live work (JobManager::ClaimForLive) — it blocks,
    // the job's slot lent to that work, and returns once the job may go on; at once otherwise,
    // and at once when the job is cancelled or interrupted (the caller's next Cancelled() check
    // ends it). The job's state is untouched: it computes what an uninterrupted run computes.
    virtual void YieldPoint() {}
    // Inside a stage, between its units (faces, tiles, detection passes: every Checkpoint),
    // with the stage's lease held: while live frames run (JobManager::ClaimForLive) it blocks
    // until none does, for at most JobManager::kGiveWayMax a call, so a frame that arrives during
    // a long batch stage has the cores after one unit instead of at the stage's end. Bounded
    // because the lease is held: a live stage waiting for the memory this job holds waits no
    // longer than that. Returns at once when the job is cancelled or interrupted. May be called
    // from the stage's worker threads at once.
    virtual void GiveWay() {}
  };

  struct Output {
    v1::JobResult report;  // everything but the image
    std::string image;     // encoded result (PNG or JPEG); empty when result_file is set
    // A video job's result: a complete file (fsynced, renamed into place) in the runner's
    // results directory; the journal keeps its path and the file is removed with the job.
    std::string result_file;
  };

  virtual ~JobRunner() = default;

  // The job's plan (jobs/job_plan.h), made once at submit: validates `options` (INVALID_ARGUMENT
  // naming the bad option), tells the target's kind from its bytes, and checks the images (and
  // a reference image inside `options`) from what their bytes declare — nothing is decoded,
  // nothing large is allocated, it does not block (well under a millisecond per image) —
  // INVALID_ARGUMENT naming the image ("target image: ...") when Run would not accept one. The
  // plan's result bound is what the disk budget reserves (jobs/disk_budget.h).
  virtual absl::StatusOr<JobPlan> Plan(const v1::JobOptions& options, const std::string& source_image,
                                       const std::string& target_image) = 0;

  // Runs the job by its plan (job.plan). Errors are the job's final status (INVALID_ARGUMENT bad image,
  // FAILED_PRECONDITION no face, RESOURCE_EXHAUSTED did not fit, CANCELLED, INTERNAL, ...).
  virtual absl::StatusOr<Output> Run(const JobRecord& job, const std::string& source_image,
                                     const std::string& target_image, Context& context) = 0;
};

}  // namespace fusion::jobs
