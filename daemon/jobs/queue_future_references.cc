#include "jobs/queue_future_references.h"

#include <algorithm>
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
    const std::vector<std::vector<std::string>>& upcoming) {
  absl::flat_hash_map<std::string, uint64_t> out;
  const uint64_t jobs = upcoming.size();
  for (uint64_t j = 0; j < jobs; ++j) {
    for (uint64_t k = 0; k < upcoming[j].size(); ++k) {
      const uint64_t turn = k * jobs + j;
      auto [it, inserted] = out.try_emplace(upcoming[j][k], turn);
      if (!inserted) it->second = std::min(it->second, turn);
    }
  }
  return out;
}

std::vector<FutureRequest> QueueFutureReferences::TurnOrder(
    const std::vector<std::vector<std::string>>& upcoming) {
  std::vector<FutureRequest> out;
  size_t longest = 0;
  for (const auto& stages : upcoming) longest = std::max(longest, stages.size());
  for (size_t k = 0; k < longest; ++k) {
    for (const auto& stages : upcoming) {
      if (k < stages.size()) out.push_back({stages[k], 0, 0, false});
    }
  }
  return out;
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
  auto distances = Distances(upcoming);
  auto sequence = std::make_shared<FutureSequence>();
  sequence->requests = TurnOrder(upcoming);
  if (model_info) {
    const absl::flat_hash_map<std::string, ModelInfo> info = model_info();
    for (FutureRequest& r : sequence->requests) {
      auto it = info.find(r.model);
      if (it != info.end()) r.bytes = it->second.bytes, r.pinned = it->second.pinned;
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
