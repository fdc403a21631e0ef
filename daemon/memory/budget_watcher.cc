#include "memory/budget_watcher.h"

#include "device/cgroup_memory.h"
#include "spdlog/spdlog.h"

#include <algorithm>
#include "base/status_macros.h"

namespace fusion {

absl::StatusOr<std::unique_ptr<BudgetWatcher>> BudgetWatcher::Create(const Device* device,
                                                                     ResidencyManager* manager,
                                                                     Options options) {
  std::unique_ptr<BudgetWatcher> self(new BudgetWatcher(device, manager, options));
  RETURN_IF_ERROR(self->Refresh());
  self->thread_ = std::thread([w = self.get()] { w->Run(); });
  return self;
}

absl::Status BudgetWatcher::Refresh() {
  ASSIGN_OR_RETURN(auto dev, device_->QueryMemory());
  ASSIGN_OR_RETURN(auto host, options_.read_host ? options_.read_host() : ReadProcessHostMemory());
  const ResidencySnapshot s = manager_->Snapshot();
  const bool cpu = device_->Kind() == "cpu";
  const uint64_t host_own = s.host.used_bytes + s.host.reserved_bytes;
  const uint64_t device_own = s.device.used_bytes + s.device.reserved_bytes;
  // On the CPU the device tier could take all of RAM (no device limit, or one above what is
  // reachable) and leave the host tier (decode, encode, host stages: every job needs it)
  // nothing. It leaves the host its share instead: the host limit, at most half of what fusiond
  // can reach (MemAvailable + both tiers' own usage - reserve); the host's own usage is already
  // out of MemAvailable. A device limit below the rest binds as it is.
  uint64_t host_share = 0;
  if (cpu) {
    const uint64_t reachable = EffectiveBudget(0, host.available_bytes, host_own + device_own, options_.device_reserve);
    host_share = std::min(options_.host_limit == 0 ? reachable : options_.host_limit, reachable / 2);
    host_share = host_share > host_own ? host_share - host_own : 0;
  }
  const uint64_t budget =
      EffectiveBudget(options_.device_limit, dev.available_bytes, device_own, options_.device_reserve + host_share);
  if (budget != s.device.budget_bytes) {
    // Free memory moves a little all the time: log only changes of 1% or more.
    const uint64_t delta = budget > s.device.budget_bytes ? budget - s.device.budget_bytes
                                                          : s.device.budget_bytes - budget;
    if (delta * 100 >= s.device.budget_bytes) {
      spdlog::info("device budget {} -> {} bytes (available {} bytes)", s.device.budget_bytes,
                   budget, dev.available_bytes);
    }
    manager_->SetDeviceBudget(budget);
    if (options_.on_device_budget) options_.on_device_budget(budget);
  }
  // On the CPU both tiers are RAM: the host tier gets what MemAvailable (plus fusiond's own
  // usage of both tiers) leaves after the device budget, so device + host <= MemAvailable + own.
  const uint64_t host_budget =
      cpu ? EffectiveBudget(options_.host_limit, host.available_bytes, host_own + device_own,
                            options_.device_reserve + budget)
          : EffectiveBudget(options_.host_limit, host.available_bytes, host_own, 0);
  if (host_budget != s.host.budget_bytes) manager_->SetHostBudget(host_budget);
  return absl::OkStatus();
}

void BudgetWatcher::Run() {
  MutexLock lock(&mu_);
  while (!stop_) {
    wake_.WaitWithDeadline(&mu_, absl::Now() + options_.period);
    if (stop_) break;
    mu_.Unlock();  // never hold our lock while the manager evicts
    if (absl::Status s = Refresh(); !s.ok()) spdlog::warn("budget re-evaluation: {}", s.ToString());
    mu_.Lock();
  }
}

void BudgetWatcher::Stop() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
  }
  wake_.SignalAll();
  if (thread_.joinable()) thread_.join();
}

}  // namespace fusion
