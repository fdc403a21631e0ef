// JobPlan: what a job will do, decided once at SubmitJob from its JobOptions and its images'
// headers (JobRunner::Plan) and journalled with it: the options as validated, the kind of its
// target, the catalogue model of each stage in run order (the queue's lookahead reads them) and
// a bound on its result's bytes (the disk budget reserves it). Runners take the plan; they never
// parse the options or classify the target again.
// Invariant: a plan exists only for options and images that passed the runner's checks.
// Thread-safety: a value.
#pragma once

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

}  // namespace fusion::jobs
