#include "convert.h"

namespace fusion {

const char* ToString(ServingStatus status) {
  switch (status) {
    case ServingStatus::kServing: return "SERVING";
    case ServingStatus::kNotServing: return "NOT_SERVING";
    case ServingStatus::kServiceUnknown: return "SERVICE_UNKNOWN";
    case ServingStatus::kUnknown: break;
  }
  return "UNKNOWN";
}

namespace internal {

TierState FromProto(const v1::TierState& p) {
  TierState t;
  t.tier = p.tier();
  t.kind = p.kind();
  t.capacity_bytes = p.capacity_bytes();
  t.available_bytes = p.available_bytes();
  t.budget_bytes = p.budget_bytes();
  t.limit_bytes = p.limit_bytes();
  t.used_bytes = p.used_bytes();
  t.reserved_bytes = p.reserved_bytes();
  t.peak_bytes = p.peak_bytes();
  t.external_bytes = p.external_bytes();
  t.over_budget = p.over_budget();
  return t;
}

ModelState FromProto(const v1::ModelInfo& p) {
  ModelState m;
  m.name = p.name();
  m.stage = p.stage();
  m.state = p.state();
  m.tier = p.tier();
  m.bytes = p.bytes();
  m.pinned = p.pinned();
  m.leases = p.leases();
  m.last_use_unix_ms = p.last_use_unix_ms();
  m.loads = p.loads();
  m.uploads = p.uploads();
  m.evictions = p.evictions();
  m.hits = p.hits();
  m.misses = p.misses();
  m.one_shot = p.one_shot();
  m.tileable = p.tileable();
  return m;
}

MemoryState FromProto(const v1::MemoryState& p) {
  MemoryState s;
  s.device = FromProto(p.device());
  s.host = FromProto(p.host());
  for (const auto& m : p.models()) s.models.push_back(FromProto(m));
  for (const auto& c : p.clients()) {
    s.clients.push_back({c.uid(), c.jobs_queued(), c.jobs_running(), c.working_bytes()});
  }
  const v1::Counters& c = p.counters();
  s.counters.bytes_uploaded = c.bytes_uploaded();
  s.counters.loads = c.loads();
  s.counters.uploads = c.uploads();
  s.counters.evictions = c.evictions();
  s.counters.hits = c.hits();
  s.counters.misses = c.misses();
  s.counters.waits = c.waits();
  s.counters.refusals = c.refusals();
  for (const auto& [step, n] : c.oom_recovered()) s.counters.oom_recovered[step] = n;
  s.unix_ms = p.unix_ms();
  return s;
}

}  // namespace internal
}  // namespace fusion
