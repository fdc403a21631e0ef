#include "device/cpu_device_memory.h"

#include "device/device_meter.h"
#include "models/common/torch_compat.h"

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

  // Context == data (what raw_allocate, used by oneDNN/mkldnn, requires): the bookkeeping of a
  // scoped allocation lives in `owned`, keyed by its pointer.
  c10::DataPtr allocate(size_t n) FUSION_C10_ALLOCATE_CONST override {
    const ScopeId scope = tls_scope;
    if (scope == kNoScope) return base_->allocate(n);
    const bool host = Reserve(scope, n);
    c10::DataPtr inner;
    try {
      inner = base_->allocate(n);
    } catch (...) {
      Credit(scope, n, host);
      throw;
    }
    void* data = inner.get();
    const c10::Device device = inner.device();
    const c10::DeleterFnPtr base_deleter = inner.get_deleter();
    if (data == nullptr) return inner;  // zero bytes: nothing to count
    inner.release_context();
    {
      std::lock_guard<std::mutex> lock(mu);
      owned[data] = Owned{n, scope, host, base_deleter};
    }
    return c10::DataPtr(data, data, &Delete, device);
  }
  c10::DeleterFnPtr raw_deleter() const override { return &Delete; }
  FUSION_C10_COPY_DATA

  struct Owned {
    size_t bytes;
    ScopeId scope;
    bool host;
    c10::DeleterFnPtr deleter;
  };
  static void Delete(void* ptr);

  std::atomic<uint64_t> budget{0};
  mutable std::atomic<uint64_t> in_use{0};
  mutable std::atomic<uint64_t> host_in_use{0};
  mutable std::atomic<uint64_t> peak_in_use{0};
  mutable std::atomic<uint64_t> ooms{0};
  mutable std::mutex mu;
  mutable std::unordered_map<ScopeId, ScopeUsage> scopes;  // guarded by mu
  mutable std::unordered_map<void*, Owned> owned;          // guarded by mu

  void Credit(ScopeId scope, size_t n, bool host) const {
    (host ? host_in_use : in_use) -= n;
    std::lock_guard<std::mutex> lock(mu);
    auto it = scopes.find(scope);
    if (it != scopes.end()) it->second.current_bytes -= n;
  }
  c10::Allocator* base() const { return base_; }

 private:
  [[noreturn]] void Refuse(const std::string& message) const {
    tls_oom = true;  // recognised later even if rethrown as std::runtime_error
    ++ooms;
    C10_THROW_ERROR(OutOfMemoryError, message);
  }
  // Charges `n` bytes to `scope` or throws c10::OutOfMemoryError. Returns whether the scope is
  // a host scope (its bytes are outside the device tier).
  bool Reserve(ScopeId scope, size_t n) const {
    std::lock_guard<std::mutex> lock(mu);
    ScopeUsage& u = scopes[scope];
    if (u.limit_bytes != 0 && u.current_bytes + n > u.limit_bytes) {
      ++u.limit_refusals;
      Refuse(std::string("CPU ") + (u.kind == ScopeKind::kHost ? "host" : "device") +
             " scope limit exceeded: scope " + std::to_string(scope) + " requested " + std::to_string(n) +
             " bytes, " + std::to_string(u.current_bytes) + " of its " + std::to_string(u.limit_bytes) +
             " admitted bytes in use");
    }
    const bool host = u.kind == ScopeKind::kHost;
    if (host) {
      host_in_use += n;
    } else {
      uint64_t cur = in_use.load();
      do {
        if (cur + n > budget.load()) {
          ++u.shared_refusals;
          Refuse("CPU device budget exceeded: scope " + std::to_string(scope) + " requested " +
                 std::to_string(n) + " bytes, " + std::to_string(cur) + " bytes in use, budget " +
                 std::to_string(budget.load()) + " bytes");
        }
      } while (!in_use.compare_exchange_weak(cur, cur + n));
      uint64_t peak = peak_in_use.load();
      while (cur + n > peak && !peak_in_use.compare_exchange_weak(peak, cur + n)) {
      }
    }
    u.current_bytes += n;
    u.peak_bytes = std::max(u.peak_bytes, u.current_bytes);
    return host;
  }
  c10::Allocator* const base_;
};

BudgetAllocator* g_allocator = nullptr;
std::once_flag g_install;

// Frees a scoped allocation (credited to the scope it was made in, whichever thread frees it),
// or, for a pointer this allocator did not count, hands it to c10's default deleter.
void BudgetAllocator::Delete(void* ptr) {
  BudgetAllocator* self = g_allocator;
  Owned o{0, kNoScope, false, nullptr};
  {
    std::lock_guard<std::mutex> lock(self->mu);
    auto it = self->owned.find(ptr);
    if (it != self->owned.end()) {
      o = it->second;
      self->owned.erase(it);
    }
  }
  if (o.deleter == nullptr) {
    self->base()->raw_deleter()(ptr);
    return;
  }
  self->Credit(o.scope, o.bytes, o.host);
  o.deleter(ptr);
}

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
uint64_t CpuDeviceAllocator::host_in_use() const { return g_allocator->host_in_use; }
uint64_t CpuDeviceAllocator::peak_in_use() const { return g_allocator->peak_in_use; }
void CpuDeviceAllocator::ResetPeakInUse() { g_allocator->peak_in_use = g_allocator->in_use.load(); }
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

void CpuDeviceAllocator::LimitScope(ScopeId scope, uint64_t limit_bytes, ScopeKind kind) {
  std::lock_guard<std::mutex> lock(g_allocator->mu);
  ScopeUsage& u = g_allocator->scopes[scope];
  u.limit_bytes = limit_bytes;
  u.kind = kind;
  u.limit_refusals = u.shared_refusals = 0;
}

namespace {
class CpuDeviceMeter final : public DeviceMeter {
 public:
  explicit CpuDeviceMeter(CpuDeviceAllocator& a) : a_(a) {}
  void ResetPeak(ScopeId scope) override { a_.ResetPeak(scope); }
  ScopeUsage Usage(ScopeId scope) const override { return a_.Usage(scope); }
  void Forget(ScopeId scope) override { a_.Forget(scope); }
  void LimitScope(ScopeId scope, uint64_t bytes, ScopeKind kind) override { a_.LimitScope(scope, bytes, kind); }
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
