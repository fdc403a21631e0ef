#include "device/cpu_device_memory.h"

#include "device/device_meter.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <new>
#include <string>
#include <unordered_map>
#include <utility>

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <c10/util/Exception.h>

namespace fusion {
namespace {

thread_local ScopeId tls_scope = kNoScope;
thread_local bool tls_oom = false;

// c10's Allocator is a const interface, hence the mutable state.
class BudgetAllocator final : public c10::Allocator {
 public:
  explicit BudgetAllocator(c10::Allocator* base) : base_(base) {}

  c10::DataPtr allocate(size_t n) const override {
    const ScopeId scope = tls_scope;
    if (scope == kNoScope) return base_->allocate(n);
    Reserve(scope, n);
    c10::DataPtr inner;
    try {
      inner = base_->allocate(n);
    } catch (...) {
      Credit(scope, n);
      throw;
    }
    void* data = inner.get();
    const c10::Device device = inner.device();
    return c10::DataPtr(data, new Context{std::move(inner), n, scope, this}, &Delete, device);
  }

  struct Context {
    c10::DataPtr inner;
    size_t bytes;
    ScopeId scope;
    const BudgetAllocator* self;
  };
  static void Delete(void* ctx) {
    auto* c = static_cast<Context*>(ctx);
    c->self->Credit(c->scope, c->bytes);
    delete c;  // frees `inner` through c10's default allocator
  }

  std::atomic<uint64_t> budget{0};
  mutable std::atomic<uint64_t> in_use{0};
  mutable std::atomic<uint64_t> ooms{0};
  mutable std::mutex mu;
  mutable std::unordered_map<ScopeId, ScopeUsage> scopes;  // guarded by mu

 private:
  void Reserve(ScopeId scope, size_t n) const {
    uint64_t cur = in_use.load();
    do {
      if (cur + n > budget.load()) {
        tls_oom = true;  // recognised later even if rethrown as std::runtime_error
        ++ooms;
        C10_THROW_ERROR(OutOfMemoryError,
                        "CPU device budget exceeded: scope " + std::to_string(scope) +
                            " requested " + std::to_string(n) + " bytes, " + std::to_string(cur) +
                            " bytes in use, budget " + std::to_string(budget.load()) + " bytes");
      }
    } while (!in_use.compare_exchange_weak(cur, cur + n));
    std::lock_guard<std::mutex> lock(mu);
    ScopeUsage& u = scopes[scope];
    u.current_bytes += n;
    u.peak_bytes = std::max(u.peak_bytes, u.current_bytes);
  }
  void Credit(ScopeId scope, size_t n) const {
    in_use -= n;
    std::lock_guard<std::mutex> lock(mu);
    auto it = scopes.find(scope);
    if (it != scopes.end()) it->second.current_bytes -= n;
  }

  c10::Allocator* const base_;
};

BudgetAllocator* g_allocator = nullptr;
std::once_flag g_install;

}  // namespace

DeviceScope::DeviceScope(ScopeId scope) : previous_(tls_scope) { tls_scope = scope; }
DeviceScope::~DeviceScope() { tls_scope = previous_; }
ScopeId DeviceScope::Current() { return tls_scope; }

CpuDeviceAllocator& CpuDeviceAllocator::Install(uint64_t budget_bytes) {
  static CpuDeviceAllocator* facade = new CpuDeviceAllocator();
  std::call_once(g_install, [] {
    g_allocator = new BudgetAllocator(c10::GetDefaultCPUAllocator());  // leaked on purpose
    c10::SetCPUAllocator(g_allocator, /*priority=*/10);
  });
  facade->SetBudget(budget_bytes);
  return *facade;
}

void CpuDeviceAllocator::SetBudget(uint64_t bytes) { g_allocator->budget = bytes; }
uint64_t CpuDeviceAllocator::budget() const { return g_allocator->budget; }
uint64_t CpuDeviceAllocator::in_use() const { return g_allocator->in_use; }
uint64_t CpuDeviceAllocator::oom_count() const { return g_allocator->ooms; }

ScopeUsage CpuDeviceAllocator::Usage(ScopeId scope) const {
  std::lock_guard<std::mutex> lock(g_allocator->mu);
  auto it = g_allocator->scopes.find(scope);
  return it == g_allocator->scopes.end() ? ScopeUsage{} : it->second;
}

void CpuDeviceAllocator::ResetPeak(ScopeId scope) {
  std::lock_guard<std::mutex> lock(g_allocator->mu);
  auto it = g_allocator->scopes.find(scope);
  if (it != g_allocator->scopes.end()) it->second.peak_bytes = it->second.current_bytes;
}

void CpuDeviceAllocator::Forget(ScopeId scope) {
  std::lock_guard<std::mutex> lock(g_allocator->mu);
  auto it = g_allocator->scopes.find(scope);
  if (it != g_allocator->scopes.end() && it->second.current_bytes == 0) g_allocator->scopes.erase(it);
}

namespace {
class CpuDeviceMeter final : public DeviceMeter {
 public:
  explicit CpuDeviceMeter(CpuDeviceAllocator& a) : a_(a) {}
  void ResetPeak(ScopeId scope) override { a_.ResetPeak(scope); }
  ScopeUsage Usage(ScopeId scope) const override { return a_.Usage(scope); }
  void Forget(ScopeId scope) override { a_.Forget(scope); }
  void ReleaseCache() override {}
  uint64_t AllocatedBytes() const override { return a_.in_use(); }
  uint64_t ReservedBytes() const override { return a_.in_use(); }  // malloc'd, no cache

 private:
  CpuDeviceAllocator& a_;
};
}  // namespace

std::unique_ptr<DeviceMeter> MakeCpuDeviceMeter(uint64_t budget_bytes) {
  return std::make_unique<CpuDeviceMeter>(CpuDeviceAllocator::Install(budget_bytes));
}

bool IsDeviceOom(const std::exception& e) {
  const bool flagged = std::exchange(tls_oom, false);
  return flagged || dynamic_cast<const c10::OutOfMemoryError*>(&e) != nullptr ||
         dynamic_cast<const std::bad_alloc*>(&e) != nullptr;
}

}  // namespace fusion
