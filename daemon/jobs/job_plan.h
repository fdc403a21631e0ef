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

// The plan's stages done once a stage of `model` has finished, `stages_done` being the count
// before: the position after that model's next entry in plan.stage_models (and after the
// entries of the same model right behind it, which run as one stage), as the pipeline's
// Execution walks the plan. A planned stage the job skipped (the encode of a source whose
// analysis is cached) is passed over; a stage of no model (decode, the host blend) or of a model
// the rest of the plan does not name leaves the count as it is.
inline size_t StagesDoneAfter(const JobPlan& plan, size_t stages_done, const std::string& model) {
  const std::vector<std::string>& s = plan.stage_models;
  if (model.empty()) return stages_done;
  for (size_t i = stages_done; i < s.size(); ++i) {
    if (s[i] != model) continue;
    while (i < s.size() && s[i] == model) ++i;
    return i;
  }
  return stages_done;
}

}  // namespace fusion::jobs
