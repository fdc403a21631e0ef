// Device: where stage models run, and how much memory it has.
//
// This layer reports capacity and free memory; the residency manager (memory/) decides what
// is charged against the budget. Implementations:
//   cpu     the device tier is RAM; figures from /proc/meminfo.
//   cuda:N  figures from cudaMemGetInfo (cudart, no LibTorch needed).
// Thread-safety: every method may be called from any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace fusion {

struct DeviceMemory {
  uint64_t capacity_bytes = 0;   // physical size
  uint64_t available_bytes = 0;  // free now, for anyone
};

class Device {
 public:
  virtual ~Device() = default;
  // "cpu" or "cuda:N".
  virtual std::string Kind() const = 0;
  // Current capacity and free memory. UNAVAILABLE if the OS/driver does not answer.
  virtual absl::StatusOr<DeviceMemory> QueryMemory() const = 0;
};

// Opens "cpu" or "cuda:N". FAILED_PRECONDITION naming the device and the reason when a CUDA
// device is asked for and the runtime has none (e.g. "cudaGetDeviceCount: CUDA driver version
// is insufficient ..."); INVALID_ARGUMENT for a malformed spec.
absl::StatusOr<std::unique_ptr<Device>> OpenDevice(const std::string& spec);

// The device budget (docs/ARCHITECTURE.md#invariants, 2): min(limit, available + own_usage
// - reserve), where `limit` 0 means no configured limit. Never underflows (0 when reserve
// exceeds the rest).
uint64_t EffectiveBudget(uint64_t limit, uint64_t available, uint64_t own_usage,
                         uint64_t reserve);

}  // namespace fusion
