// QueueFutureReferences: the job queue's future use of each model, for lookahead eviction
// (memory/future_references.h).
//
// The residency manager asks NextUse() while holding its own lock, so this class never calls
// the job manager from there: it answers from a cache that Refresh() rebuilds from the job
// manager's upcoming stages (running jobs' remaining stages, then queued jobs in start order)
// each time the queue changes. Distances are turns of a round robin over those jobs: the k-th
// remaining stage of the j-th job is turn k * jobs + j. Sequence() lists the same stages in that
// turn order (the planner policy's input), with a version bumped by every Refresh; the queue
// names models only: their bytes and pins come from SetModelInfo's source (fusiond: the
// residency manager's snapshot), else bytes are 0 (unknown: the planner uses the sizes it saw as
// candidates) and nothing is pinned; working bytes are 0 (not known before a stage runs).
// Thread-safety: all methods may be called concurrently; NextUse takes only this class's lock
// (a leaf lock), so it can be called under any other.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "common/mutex.h"
#include "memory/future_references.h"

namespace fusion::jobs {

class QueueFutureReferences final : public FutureReferences {
 public:
  using Source = std::function<std::vector<std::vector<std::string>>()>;

  // Where upcoming stages come from (set once the job manager exists).
  void SetSource(Source source);
  // Where Sequence() takes each model's device bytes and pin from; called by Refresh with no
  // lock of this class held (it may take the residency manager's lock).
  struct ModelInfo {
    uint64_t bytes = 0;
    bool pinned = false;
  };
  using ModelInfoSource = std::function<absl::flat_hash_map<std::string, ModelInfo>()>;
  void SetModelInfo(ModelInfoSource source);
  // Rebuilds the cache from the source. Must not be called with the residency lock held.
  void Refresh();
  uint64_t NextUse(const std::string& model) const override;
  std::shared_ptr<const FutureSequence> Sequence() const override;

  // The distances for `upcoming` (exposed for tests).
  static absl::flat_hash_map<std::string, uint64_t> Distances(
      const std::vector<std::vector<std::string>>& upcoming);
  // The models of `upcoming` in round-robin turn order (exposed for tests).
  static std::vector<FutureRequest> TurnOrder(const std::vector<std::vector<std::string>>& upcoming);

 private:
  mutable Mutex mu_;
  Source source_ ABSL_GUARDED_BY(mu_);
  ModelInfoSource model_info_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, uint64_t> next_use_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<const FutureSequence> sequence_ ABSL_GUARDED_BY(mu_);
  uint64_t version_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace fusion::jobs
