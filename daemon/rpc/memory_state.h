// MemoryStateSource: where GetMemoryState's answer comes from.
//
// DeviceMemoryStateSource reports the device and host tiers straight from the device layer and
// the configured limits (no models resident yet); the residency manager provides a richer
// source with models, leases and counters.
// Thread-safety: Snapshot() may be called from any thread concurrently.
#pragma once

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "device/device.h"
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

class DeviceMemoryStateSource final : public MemoryStateSource {
 public:
  // `device` must outlive this object.
  DeviceMemoryStateSource(const Device* device, TierLimits limits)
      : device_(device), limits_(limits) {}
  absl::StatusOr<v1::MemoryState> Snapshot() const override;

 private:
  const Device* device_;
  const TierLimits limits_;
};

}  // namespace fusion
