#include "jobs/queue_future_references.h"

#include <algorithm>
#include <utility>

namespace fusion::jobs {

void QueueFutureReferences::SetSource(Source source) {
  MutexLock lock(&mu_);
  source_ = std::move(source);
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

void QueueFutureReferences::Refresh() {
  Source source;
  {
    MutexLock lock(&mu_);
    source = source_;
  }
  if (!source) return;
  auto distances = Distances(source());  // the job manager's locks only, not ours
  MutexLock lock(&mu_);
  next_use_ = std::move(distances);
}

uint64_t QueueFutureReferences::NextUse(const std::string& model) const {
  MutexLock lock(&mu_);
  auto it = next_use_.find(model);
  return it == next_use_.end() ? kNoFutureUse : it->second;
}

}  // namespace fusion::jobs
