#include "rpc/memory_state.h"

#include <map>
#include <set>
#include <string>
#include <utility>

#include "absl/time/clock.h"
#include "device/cgroup_memory.h"
#include "base/status_macros.h"

namespace fusion {
namespace {

void FillTier(const TierUsage& usage, v1::TierState* t) {
  t->set_budget_bytes(usage.budget_bytes);
  t->set_used_bytes(usage.used_bytes);
  t->set_reserved_bytes(usage.reserved_bytes);
  t->set_peak_bytes(usage.peak_bytes);
  t->set_over_budget(usage.over_budget);
}

void FillCounters(const ResidencyCounters& c, v1::Counters* out) {
  out->set_bytes_uploaded(c.bytes_uploaded);
  out->set_loads(c.loads);
  out->set_uploads(c.uploads);
  out->set_evictions(c.evictions);
  out->set_hits(c.hits);
  out->set_misses(c.misses);
  out->set_waits(c.waits);
  out->set_refusals(c.refusals);
  out->set_expirations(c.expirations);
}

}  // namespace

void FillModelInfo(const ModelSnapshot& m, v1::ModelInfo* info) {
  info->set_name(m.name);
  info->set_state(ToString(m.state));
  info->set_tier(ToString(TierOf(m.state)));
  info->set_bytes(m.bytes);
  info->set_host_bytes(m.host_bytes);
  info->set_pinned(m.pinned);
  info->set_leases(m.leases);
  info->set_last_use_unix_ms(m.last_use_unix_ms);
  info->set_loads(m.counters.loads);
  info->set_uploads(m.counters.uploads);
  info->set_evictions(m.counters.evictions);
  info->set_hits(m.counters.hits);
  info->set_misses(m.counters.misses);
  info->set_one_shot(m.one_shot);
  if (m.keep_alive) info->set_keep_alive_seconds(absl::ToDoubleSeconds(*m.keep_alive));
  if (m.expires_in) info->set_expires_in_seconds(absl::ToDoubleSeconds(*m.expires_in));
}

absl::StatusOr<v1::MemoryState> ResidencyMemoryStateSource::Snapshot() const {
  ASSIGN_OR_RETURN(auto dev, device_->QueryMemory());
  ASSIGN_OR_RETURN(auto host, ReadProcessHostMemory());
  const ResidencySnapshot r = manager_->Snapshot();

  v1::MemoryState state;
  state.set_unix_ms(absl::ToUnixMillis(absl::Now()));
  v1::TierState* d = state.mutable_device();
  d->set_tier("device");
  d->set_kind(device_->Kind());
  d->set_capacity_bytes(dev.capacity_bytes);
  d->set_available_bytes(dev.available_bytes);
  d->set_limit_bytes(limits_.device_limit);
  FillTier(r.device, d);
  // Everyone else: what is not available and not ours.
  const uint64_t taken = dev.capacity_bytes - dev.available_bytes;
  const uint64_t own = r.device.used_bytes + r.device.reserved_bytes;
  d->set_external_bytes(taken > own ? taken - own : 0);

  v1::TierState* h = state.mutable_host();
  h->set_tier("host");
  h->set_kind("host");
  h->set_capacity_bytes(host.total_bytes);
  h->set_available_bytes(host.available_bytes);
  h->set_limit_bytes(limits_.host_limit);
  FillTier(r.host, h);
  const uint64_t host_taken = host.total_bytes - host.available_bytes;
  h->set_external_bytes(host_taken > r.host.used_bytes ? host_taken - r.host.used_bytes : 0);

  for (const ModelSnapshot& m : r.models) FillModelInfo(m, state.add_models());
  // Per uid: working bytes (and, without a job queue, running jobs) from the leases held now;
  // queued and running jobs from the job queue.
  struct Usage {
    std::set<std::string> leased_jobs;
    uint64_t working_bytes = 0;
    UidJobCounts jobs;
  };
  std::map<uint32_t, Usage> clients;
  for (const LeaseSnapshot& l : r.leases) {
    clients[l.owner.uid].leased_jobs.insert(l.owner.job_id);
    clients[l.owner.uid].working_bytes += l.working_bytes;
  }
  if (job_counts_) {
    for (const auto& [uid, counts] : job_counts_()) clients[uid].jobs = counts;
  } else {
    for (auto& [uid, usage] : clients) usage.jobs.running = static_cast<uint32_t>(usage.leased_jobs.size());
  }
  for (const auto& [uid, usage] : clients) {
    if (usage.jobs.queued == 0 && usage.jobs.running == 0 && usage.working_bytes == 0) continue;
    v1::ClientUsage* c = state.add_clients();
    c->set_uid(uid);
    c->set_jobs_queued(usage.jobs.queued);
    c->set_jobs_running(usage.jobs.running);
    c->set_working_bytes(usage.working_bytes);
  }
  // The daemon's caches hold host leases between jobs (Owner kCacheOwnerJob).
  uint64_t host_cache = 0;
  for (const LeaseSnapshot& l : r.host_leases) {
    if (l.owner.job_id == kCacheOwnerJob) host_cache += l.working_bytes;
  }
  h->set_cache_bytes(host_cache);
  if (live_ != nullptr) {
    for (v1::LiveSessionInfo& s : live_->List(std::nullopt)) *state.add_live_sessions() = std::move(s);
  }
  FillCounters(r.totals, state.mutable_counters());
  for (const auto& [step, n] : r.oom_recovered) (*state.mutable_counters()->mutable_oom_recovered())[step] = n;
  return state;
}

}  // namespace fusion
