// The backend of a fusiond built without LibTorch: none (jobs/backend.h). Such a daemon serves
// the memory methods; the job and model methods answer UNIMPLEMENTED.
#include "jobs/backend.h"

namespace fusion::jobs {

absl::StatusOr<std::unique_ptr<Backend>> CreateBackend(const DaemonConfig&) { return nullptr; }

absl::Status BackendSupportsDevice(const std::string&) { return absl::OkStatus(); }

}  // namespace fusion::jobs
