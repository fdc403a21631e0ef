// DeviceMeter: the device layer's measurement for the residency manager
// (docs/ARCHITECTURE.md#invariants, 1).
//
// Measured charges come through it: a model's device bytes (its scope's current bytes after
// the upload) and a stage's working-set peak (ResetPeak before the stage, Usage().peak_bytes
// after), which the pipeline feeds to ResidencyManager::RecordWorkingSetPeak.
//   cpu   MakeCpuDeviceMeter: per-scope counts of the budget-enforcing c10 CPU allocator
//         (cpu_device_memory.h); two concurrent stages are measured apart.
//   cuda  MakeCudaDeviceMeter (built only with a CUDA LibTorch, FUSION_WITH_CUDA): the caching
//         allocator's device-wide allocated/reserved/peak stats, so a scope's figures are the
//         device's (exact when one stage runs at a time); ReleaseCache calls emptyCache.
//         External usage comes from cudaMemGetInfo in the Device (cuda_probe.h). Not compiled
//         or tested on the CPU-only build machine.
// Thread-safety: every method may be called from any thread.
#pragma once

#include <cstdint>
#include <memory>

#include "device/cpu_device_memory.h"

namespace fusion {

class DeviceMeter {
 public:
  virtual ~DeviceMeter() = default;
  virtual void ResetPeak(ScopeId scope) = 0;
  virtual ScopeUsage Usage(ScopeId scope) const = 0;
  // Drops a finished scope's record (its bytes must be freed).
  virtual void Forget(ScopeId scope) = 0;
  // Limits `scope` to `bytes` (0 = none) before it allocates; kHost keeps it out of the device
  // tier (CpuDeviceAllocator::LimitScope). The CUDA meter limits nothing (its device-wide stats
  // cannot tell scopes apart): the default does nothing.
  virtual void LimitScope(ScopeId scope, uint64_t bytes, ScopeKind kind) {
    (void)scope, (void)bytes, (void)kind;
  }
  // After evictions: return cached blocks (CUDA emptyCache); nothing to do on CPU.
  virtual void ReleaseCache() = 0;
  // Bytes held by tensors, and bytes the allocator holds from the system (reserved >=
  // allocated; the difference is fragmentation/caching).
  virtual uint64_t AllocatedBytes() const = 0;
  virtual uint64_t ReservedBytes() const = 0;
};

// Installs the CPU allocator with `budget_bytes` (see CpuDeviceAllocator::Install).
std::unique_ptr<DeviceMeter> MakeCpuDeviceMeter(uint64_t budget_bytes);
#ifdef FUSION_WITH_CUDA
std::unique_ptr<DeviceMeter> MakeCudaDeviceMeter(int device_index);
#endif

}  // namespace fusion
