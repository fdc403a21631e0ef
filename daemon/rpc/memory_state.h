// MemoryStateSource: where GetMemoryState's answer comes from.
//
// ResidencyMemoryStateSource reports the DESIGN.md §7 fields: the device and host tiers (capacity
// and availability from the device layer; budget, used, reserved, peak, over_budget from the
// residency manager), every model, the counters, and per uid the running jobs and working bytes
// of the leases held now (jobs_queued stays 0 until the job queue exists).
// Thread-safety: Snapshot() may be called from any thread concurrently.
#pragma once

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "device/device.h"
#include "memory/residency_manager.h"
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

class ResidencyMemoryStateSource final : public MemoryStateSource {
 public:
  // `device` and `manager` must outlive this object.
  ResidencyMemoryStateSource(const Device* device, const ResidencyManager* manager,
                             TierLimits limits)
      : device_(device), manager_(manager), limits_(limits) {}
  absl::StatusOr<v1::MemoryState> Snapshot() const override;

 private:
  const Device* device_;
  const ResidencyManager* manager_;
  const TierLimits limits_;
};

}  // namespace fusion
