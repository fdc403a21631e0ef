// JobPlan: what a job will do, decided once at SubmitJob from its JobOptions and its images'
// headers (JobRunner::Plan) and journalled with it: the options as validated, the kind of its
// target, the catalogue model of each stage in run order (the queue's lookahead reads them) and
// a bound on its result's bytes (the disk budget reserves it). Runners take the plan; they never
// parse the options or classify the target again.
// Invariant: a plan exists only for options and images that passed the runner's checks.
// Thread-safety: a value.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fusion/v1/fusion.pb.h"

namespace fusion::jobs {

struct JobPlan {
  v1::JobOptions options;
  // IMAGE or VIDEO; JOB_KIND_UNSPECIFIED only for a job journalled before plans were (its plan is
  // made again when it runs).
  v1::JobKind target = v1::JOB_KIND_UNSPECIFIED;
  std::vector<std::string> stage_models;
  uint64_t result_bound_bytes = 0;
};

// The models a running job will still use, in order, once `stages_done` stages have finished: an
// image's later stages; a video's every stage, since each frame runs them again (its stage
// events are the source image's only, and the keep-alive and the eviction policies must not take
// the landmark net away between frames).
inline std::vector<std::string> RemainingStageModels(const JobPlan& plan, size_t stages_done) {
  if (plan.target == v1::VIDEO) return plan.stage_models;
  const size_t done = stages_done < plan.stage_models.size() ? stages_done : plan.stage_models.size();
  return std::vector<std::string>(plan.stage_models.begin() + static_cast<std::ptrdiff_t>(done), plan.stage_models.end());
}

}  // namespace fusion::jobs
