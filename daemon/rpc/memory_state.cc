#include "rpc/memory_state.h"

#include "absl/time/clock.h"
#include "device/host_memory.h"

namespace fusion {

absl::StatusOr<v1::MemoryState> DeviceMemoryStateSource::Snapshot() const {
  auto dev = device_->QueryMemory();
  if (!dev.ok()) return dev.status();
  auto host = ReadHostMemory();
  if (!host.ok()) return host.status();

  v1::MemoryState state;
  state.set_unix_ms(absl::ToUnixMillis(absl::Now()));
  v1::TierState* d = state.mutable_device();
  d->set_tier("device");
  d->set_kind(device_->Kind());
  d->set_capacity_bytes(dev->capacity_bytes);
  d->set_available_bytes(dev->available_bytes);
  d->set_limit_bytes(limits_.device_limit);
  // Nothing is resident: fusiond's own usage is 0, so everyone else uses capacity - available.
  d->set_budget_bytes(
      EffectiveBudget(limits_.device_limit, dev->available_bytes, 0, limits_.device_reserve));
  d->set_external_bytes(dev->capacity_bytes - dev->available_bytes);

  v1::TierState* h = state.mutable_host();
  h->set_tier("host");
  h->set_kind("host");
  h->set_capacity_bytes(host->total_bytes);
  h->set_available_bytes(host->available_bytes);
  h->set_limit_bytes(limits_.host_limit);
  h->set_budget_bytes(EffectiveBudget(limits_.host_limit, host->available_bytes, 0, 0));
  h->set_external_bytes(host->total_bytes - host->available_bytes);
  state.mutable_counters();
  return state;
}

}  // namespace fusion
