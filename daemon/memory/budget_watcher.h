// BudgetWatcher: re-evaluates the residency manager's budgets from the device periodically.
//
// Every `period` (and once in Create): device budget = EffectiveBudget(limit, available,
// fusiond's own usage, reserve) where own usage is the manager's resident + reserved bytes
// (memory another process takes shrinks `available`, so the budget shrinks and the manager
// evicts down to it; docs/ARCHITECTURE.md#invariants, 2); host budget = EffectiveBudget(host
// limit, MemAvailable,
// host tier usage (weights + host working sets), 0). On `cpu` both tiers are RAM, so the host
// budget is what is left of MemAvailable + both tiers' own usage - reserve after the device
// budget: device + host budgets together stay within MemAvailable. On `cpu` the device budget
// leaves the host tier its share first (the host limit, at most half of MemAvailable + own
// usage - reserve), so jobs can decode and encode; a device limit caps the device tier further
// but never takes the host's share (a limit above a cgroup's memory cap left the host tier
// ~60 MiB and 4-way concurrent jobs waited for host memory until their deadline). Part of fusiond_core (it needs the device layer), not of fusion_memory.
// Thread-safety: Create/Stop from one thread; the watcher thread only calls the manager.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/mutex.h"
#include "device/device.h"
#include "device/host_memory.h"
#include "memory/residency_manager.h"

namespace fusion {

class BudgetWatcher {
 public:
  struct Options {
    uint64_t device_limit = 0;    // bytes, 0 = none
    uint64_t device_reserve = 0;  // bytes kept free for other processes
    uint64_t host_limit = 0;      // bytes, 0 = none
    absl::Duration period = absl::Seconds(1);
    // Called with each new device budget after the manager has it (e.g. to keep the CPU
    // device allocator's budget equal to it). Runs on the watcher's thread; may be empty.
    std::function<void(uint64_t)> on_device_budget;
    // Host RAM figures; empty = ReadProcessHostMemory (/proc/meminfo capped by the cgroup).
    std::function<absl::StatusOr<HostMemoryInfo>()> read_host;
  };
  // Applies the first evaluation, then starts the thread. Errors: those of Device::QueryMemory.
  // `device` and `manager` must outlive the watcher.
  static absl::StatusOr<std::unique_ptr<BudgetWatcher>> Create(const Device* device,
                                                               ResidencyManager* manager,
                                                               Options options);
  ~BudgetWatcher() { Stop(); }
  void Stop();
  // One evaluation now. UNAVAILABLE when the device or /proc/meminfo cannot be read (the
  // budgets are then left as they are).
  absl::Status Refresh();

 private:
  BudgetWatcher(const Device* d, ResidencyManager* m, Options o)
      : device_(d), manager_(m), options_(o) {}
  void Run();

  const Device* const device_;
  ResidencyManager* const manager_;
  const Options options_;
  Mutex mu_;
  CondVar wake_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace fusion
