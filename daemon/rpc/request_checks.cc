// Request-field checks of the rpc layer (request_checks.h).
#include "rpc/request_checks.h"

#include "absl/strings/str_cat.h"

namespace fusion {

absl::StatusOr<std::vector<jobs::JobState>> ListJobsStates(const v1::ListJobsRequest& request) {
  std::vector<jobs::JobState> states;
  for (int s : request.states()) {
    if (s < 1 || s > 5) return absl::InvalidArgumentError(absl::StrCat("states: ", s, " is not a job state"));
    states.push_back(static_cast<jobs::JobState>(s));
  }
  return states;
}

}  // namespace fusion
