// Checks of request fields that the rpc layer makes itself, before the job manager or the
// residency manager sees the request (the JobOptions and images of SubmitJob are checked by
// the JobRunner: pipeline/job_options.h). Pure functions, so the fuzz target
// (tests/fuzz/rpc_request_fuzzer.cc) runs them on parsed messages.
// Thread-safety: pure functions.
#pragma once

#include <vector>

#include "absl/status/statusor.h"
#include "fusion/v1/fusion.pb.h"
#include "jobs/job.h"

namespace fusion {

// ListJobsRequest.states as job states; INVALID_ARGUMENT "states: 9 is not a job state".
absl::StatusOr<std::vector<jobs::JobState>> ListJobsStates(const v1::ListJobsRequest& request);

}  // namespace fusion
