// QueueFutureReferences: the job queue's future use of each model, for lookahead eviction
// (memory/future_references.h).
//
// The residency manager asks NextUse() while holding its own lock, so this class never calls
// the job manager from there: it answers from a cache that Refresh() rebuilds from the job
// manager's upcoming stages (running jobs' remaining stages, then queued jobs in start order)
// each time the queue changes. The forecast is the job manager's rotation: `slots` jobs run at
// once (max_concurrent_jobs), taking stage turns round robin, and a queued job takes the slot
// of the first one to finish, joining the end of the rotation (bench/trace_replay.h's rule, so
// the planner is fed in fusiond what it is fed in the replay). Sequence() lists the stages in
// that turn order (the planner policy's input), with a version bumped by every Refresh;
// NextUse() is a model's first index in it (lookahead). The queue names models only: their
// bytes, pins and working sets come from SetModelInfo's source (fusiond: the residency
// manager's snapshot), else they are 0 (unknown: the planner uses the sizes it saw as
// candidates, and no working set) and nothing is pinned.
// Thread-safety: all methods may be called concurrently; NextUse takes only this class's lock
// (a leaf lock), so it can be called under any other.
#pragma once

#include <cstddef>
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

  // `slots`: the jobs that run at once (>= 1; fusiond: max_concurrent_jobs).
  explicit QueueFutureReferences(size_t slots) : slots_(slots < 1 ? 1 : slots) {}

  // Where upcoming stages come from (set once the job manager exists).
  void SetSource(Source source);
  // Where Sequence() takes each model's device bytes, pin and working set (fusiond: the working
  // set its most recent Acquire asked for; 0 = unknown) from; called by Refresh with no lock of
  // this class held (it may take the residency manager's lock).
  struct ModelInfo {
    uint64_t bytes = 0;
    bool pinned = false;
    uint64_t working_bytes = 0;
  };
  using ModelInfoSource = std::function<absl::flat_hash_map<std::string, ModelInfo>()>;
  void SetModelInfo(ModelInfoSource source);
  // Rebuilds the cache from the source. Must not be called with the residency lock held.
  void Refresh();
  uint64_t NextUse(const std::string& model) const override;
  std::shared_ptr<const FutureSequence> Sequence() const override;

  // The distances for `upcoming` with `slots` jobs at once: each model's first turn in
  // TurnOrder (exposed for tests).
  static absl::flat_hash_map<std::string, uint64_t> Distances(
      const std::vector<std::vector<std::string>>& upcoming, size_t slots);
  // The models of `upcoming` in the rotation's turn order: the first `slots` jobs with stages
  // left take turns round robin; when one has no stage left the next job joins at the end
  // (exposed for tests). A job with no stage left takes no slot.
  static std::vector<FutureRequest> TurnOrder(const std::vector<std::vector<std::string>>& upcoming,
                                              size_t slots);

 private:
  const size_t slots_;
  mutable Mutex mu_;
  Source source_ ABSL_GUARDED_BY(mu_);
  ModelInfoSource model_info_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, uint64_t> next_use_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<const FutureSequence> sequence_ ABSL_GUARDED_BY(mu_);
  uint64_t version_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace fusion::jobs
