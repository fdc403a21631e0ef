// MemoryStateSource: where GetMemoryState's answer comes from.
//
// ResidencyMemoryStateSource reports the fields of docs/MEMORY.md#watching-it: the device and host
// tiers (capacity and availability from the device layer; budget, used, reserved, peak, over_budget
// from the residency manager), every model, the counters, and per uid its queued and running jobs
// (from the job queue, JobManager::CountsByUid, when one is attached) merged with the working bytes
// of the leases it holds now (from the residency manager); and every uid's open live sessions
// (from the live session registry, when one is attached: the rpc layer trims them per caller).
// Thread-safety: Snapshot() may be called from any thread concurrently.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>

#include "absl/status/statusor.h"
#include "device/device.h"
#include "memory/residency_manager.h"
#include "rpc/live_sessions.h"
#include "fusion/v1/fusion.pb.h"

namespace fusion {

class MemoryStateSource {
 public:
  virtual ~MemoryStateSource() = default;
  // UNAVAILABLE when the device or OS cannot be queried.
  virtual absl::StatusOr<v1::MemoryState> Snapshot() const = 0;
};

struct TierLimits {
  uint64_t device_limit = 0;    // bytes, 0 = none
  uint64_t device_reserve = 0;  // bytes kept free for others
  uint64_t host_limit = 0;      // bytes, 0 = none
};

// Jobs of one uid in the job queue now.
struct UidJobCounts {
  uint32_t queued = 0;
  uint32_t running = 0;
};
// The residency fields of `m` into `info` (name, state, tier, device and host bytes, pin,
// leases, last use, counters, one_shot, keep-alive and time to expiry); the catalogue's stage and
// tileable are the caller's.
void FillModelInfo(const ModelSnapshot& m, v1::ModelInfo* info);

// Per uid; called on every Snapshot() from any thread.
using JobCountsFn = std::function<std::map<uint32_t, UidJobCounts>()>;

class ResidencyMemoryStateSource final : public MemoryStateSource {
 public:
  // `device`, `manager` and `live` must outlive this object. Without `job_counts` (no job queue)
  // a uid's running jobs are the distinct jobs of its leases and it has no queued jobs. Without
  // `live`, live_sessions is empty.
  ResidencyMemoryStateSource(const Device* device, const ResidencyManager* manager,
                             TierLimits limits, JobCountsFn job_counts = nullptr,
                             const LiveSessionRegistry* live = nullptr)
      : device_(device), manager_(manager), limits_(limits), job_counts_(std::move(job_counts)), live_(live) {}
  absl::StatusOr<v1::MemoryState> Snapshot() const override;

 private:
  const Device* device_;
  const ResidencyManager* manager_;
  const TierLimits limits_;
  const JobCountsFn job_counts_;
  const LiveSessionRegistry* const live_;
};

}  // namespace fusion
