#include "jobs/queue_future_references.h"

#include <algorithm>
#include <deque>
#include <utility>

namespace fusion::jobs {

void QueueFutureReferences::SetSource(Source source) {
  MutexLock lock(&mu_);
  source_ = std::move(source);
}

void QueueFutureReferences::SetModelInfo(ModelInfoSource source) {
  MutexLock lock(&mu_);
  model_info_ = std::move(source);
}

absl::flat_hash_map<std::string, uint64_t> QueueFutureReferences::Distances(
    const std::vector<std::vector<std::string>>& upcoming, size_t slots) {
  absl::flat_hash_map<std::string, uint64_t> out;
  const std::vector<FutureRequest> turns = TurnOrder(upcoming, slots);
  for (uint64_t t = 0; t < turns.size(); ++t) out.try_emplace(turns[t].model, t);
  return out;
}

std::vector<FutureRequest> QueueFutureReferences::TurnOrder(
    const std::vector<std::vector<std::string>>& upcoming, size_t slots) {
  struct Active {
    size_t job, next;
  };
  std::vector<FutureRequest> out;
  std::deque<Active> rotation;
  size_t queued = 0;  // upcoming[queued] is the next job to take a slot
  while (true) {
    while (rotation.size() < std::max<size_t>(slots, 1) && queued < upcoming.size()) {
      if (!upcoming[queued].empty()) rotation.push_back({queued, 0});
      ++queued;
    }
    if (rotation.empty()) return out;
    Active a = rotation.front();
    rotation.pop_front();
    out.push_back({upcoming[a.job][a.next], 0, 0, false});
    if (++a.next < upcoming[a.job].size()) rotation.push_back(a);
  }
}

void QueueFutureReferences::Refresh() {
  Source source;
  ModelInfoSource model_info;
  {
    MutexLock lock(&mu_);
    source = source_;
    model_info = model_info_;
  }
  if (!source) return;
  const std::vector<std::vector<std::string>> upcoming = source();  // the job manager's locks
  auto sequence = std::make_shared<FutureSequence>();
  sequence->requests = TurnOrder(upcoming, slots_);
  sequence->concurrent = slots_;
  absl::flat_hash_map<std::string, uint64_t> distances;
  for (uint64_t t = 0; t < sequence->requests.size(); ++t) {
    distances.try_emplace(sequence->requests[t].model, t);
  }
  if (model_info) {
    const absl::flat_hash_map<std::string, ModelInfo> info = model_info();
    for (FutureRequest& r : sequence->requests) {
      auto it = info.find(r.model);
      if (it == info.end()) continue;
      r.bytes = it->second.bytes;
      r.pinned = it->second.pinned;
      r.working_bytes = it->second.working_bytes;
    }
  }
  MutexLock lock(&mu_);
  next_use_ = std::move(distances);
  sequence->version = ++version_;
  sequence_ = std::move(sequence);
}

std::shared_ptr<const FutureSequence> QueueFutureReferences::Sequence() const {
  MutexLock lock(&mu_);
  return sequence_;
}

uint64_t QueueFutureReferences::NextUse(const std::string& model) const {
  MutexLock lock(&mu_);
  auto it = next_use_.find(model);
  return it == next_use_.end() ? kNoFutureUse : it->second;
}

}  // namespace fusion::jobs
