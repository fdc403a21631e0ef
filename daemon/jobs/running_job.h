// JobManager::Running: the manager's record of one running job, shared by job_manager.cc and
// job_yield.cc; internal to the job manager (no other includer).
// Thread-safety: the atomics are read and written from any thread; the other fields are
// guarded by the manager's mu_.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "absl/time/clock.h"
#include "jobs/job.h"
#include "jobs/job_manager.h"

namespace fusion::jobs {

inline int64_t NowMs() { return absl::ToUnixMillis(absl::Now()); }

struct JobManager::Running {
  JobRecord record;
  std::string stage;
  float progress = 0;
  size_t stages_done = 0;
  uint64_t frames_done = 0, frames_total = 0;  // video jobs
  double fps = 0;
  Priority priority = Priority::kNormal;
  // Yielded at a yield point (JobManager::Yield), in yield order; guarded by the manager's mu_.
  bool yielded = false;
  uint64_t yield_order = 0;
  std::atomic<bool> cancel{false};     // the owner asked
  std::atomic<bool> interrupt{false};  // the daemon is stopping: leave it RUNNING
  // Unix ms of the job's last sign of life: its start, a stage event or a checkpoint (every
  // face, tile and detection pass asks Cancelled()). CheckProgress reads it.
  std::atomic<int64_t> alive_ms{NowMs()};
};

}  // namespace fusion::jobs
