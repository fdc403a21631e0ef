// The CPU device tier (docs/ARCHITECTURE.md#invariants, 1): a budget-enforcing c10 CPU allocator
// with device scopes.
//
// On `--device cpu` the device tier is every tensor allocated inside a device scope: a model's
// device copy (scope = that model) or any allocation made while a stage holds its lease (scope
// = that stage), so two concurrent stages are measured apart. CpuDeviceAllocator replaces c10's
// CPU allocator (c10::SetCPUAllocator, priority 10) and, for allocations inside a scope, counts
// the bytes per scope (current and peak) and in total, and refuses past the budget with a real
// c10::OutOfMemoryError. Allocations outside any scope (host-tier copies, decoding) are passed
// to c10's default allocator uncounted. A freed tensor is credited to the scope it was
// allocated in, whichever thread frees it.
// Scope limits (LimitScope): a stage's scope may be limited to the bytes its lease admitted, so
// an allocation past its own admission is refused with the same real OOM whatever other scopes
// hold (a stage behaves the same alone or beside others). A HOST scope (the CPU fallback, run
// under a host-tier lease) is counted and limited the same way but is not part of the device
// tier: its bytes are outside in_use() and the device budget.
// Limits: oneDNN/ideep scratch buffers bypass c10's allocator (BUILD-NOTES §3.2); an allocation
// made on an intra-op worker thread has that thread's scope (none), so set scopes around ops.
// This header has no c10 include, so consumers compile in milliseconds.
// Thread-safety: every method may be called from any thread; scopes are per thread.
#pragma once

#include <cstdint>
#include <exception>

namespace fusion {

using ScopeId = uint64_t;
inline constexpr ScopeId kNoScope = 0;

// RAII: while it lives, c10 CPU allocations on this thread are charged to `scope`. Nests.
class DeviceScope {
 public:
  explicit DeviceScope(ScopeId scope);
  ~DeviceScope();
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;
  static ScopeId Current();

 private:
  ScopeId previous_;
};

enum class ScopeKind { kDevice, kHost };

struct ScopeUsage {
  uint64_t current_bytes = 0;
  uint64_t peak_bytes = 0;
  uint64_t limit_bytes = 0;       // 0 = no limit of its own (LimitScope)
  ScopeKind kind = ScopeKind::kDevice;
  // Refusals since LimitScope/first use: past the scope's own limit, or (device scopes) within
  // it but past the device budget, i.e. for want of memory other scopes hold.
  uint32_t limit_refusals = 0;
  uint32_t shared_refusals = 0;
};

class CpuDeviceAllocator {
 public:
  // Installs the allocator on first call (it lives until exit: tensors may outlive any owner)
  // and sets the budget (bytes) on every call.
  static CpuDeviceAllocator& Install(uint64_t budget_bytes);

  void SetBudget(uint64_t bytes);
  uint64_t budget() const;
  uint64_t in_use() const;  // bytes allocated inside device scopes and not freed
  uint64_t host_in_use() const;  // bytes allocated inside host scopes and not freed
  // Highest in_use() since the last ResetPeakInUse() (all scopes together, bytes).
  uint64_t peak_in_use() const;
  void ResetPeakInUse();  // to the current in_use()
  uint64_t oom_count() const;
  // Current and peak bytes of a scope (zeros for an unknown scope).
  ScopeUsage Usage(ScopeId scope) const;
  // Sets the scope's peak to its current bytes (before a stage runs, to measure its peak).
  void ResetPeak(ScopeId scope);
  // Drops the record of a scope whose bytes are all freed (stage scopes are one per lease).
  void Forget(ScopeId scope);
  // Before the scope allocates: refuse (c10::OutOfMemoryError) any allocation that would take
  // the scope past `limit_bytes` (0 = none); a kHost scope is also kept out of the device tier.
  void LimitScope(ScopeId scope, uint64_t limit_bytes, ScopeKind kind);

 private:
  CpuDeviceAllocator() = default;
};

// True when `e` is a device OOM: c10::OutOfMemoryError, std::bad_alloc, or any exception thrown
// on a thread where the allocator refused an allocation since the last call (the TorchScript
// interpreter rethrows an OOM as std::runtime_error). Clears this thread's flag.
bool IsDeviceOom(const std::exception& e);

}  // namespace fusion
