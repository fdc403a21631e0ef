// EvictionPolicy: which unleased, unpinned device-resident models to evict to free bytes.
//
// The residency manager calls ChooseVictimsWithRoom under its lock with every evictable model
// (never a pinned or leased one) and evicts the returned victims in order; a policy only orders
// and picks among those candidates, so pins, leases, admission and the OOM ladder keep their
// guarantees whatever it answers. Policies (MakeEvictionPolicy names):
//   lru           least recently used first.
//   smallest      smallest model first, ties LRU (what InvokeAI's VRAM cache does).
//   lookahead     (default, kDefaultEvictionPolicy) from the queued work's future references:
//                 models no queued job uses go first (LRU among them); then the model whose
//                 reload is cheapest relative to how far away its next use is (bytes / turns,
//                 smallest first), ties LRU. Then victims not needed to reach the target are
//                 put back, largest-cost first, so a large model is not evicted to free a few
//                 bytes.
//   planner       exact generalized caching over the known future request sequence
//                 (FutureReferences::Sequence; memory/residency_planner.h): keeps the candidates
//                 that leave the least bytes to upload over the visible window, re-planned when
//                 the sequence's version changes; lookahead without a sequence or with more
//                 than 12 candidates. Within 1.00-1.18x of the offline optimum on the traces of
//                 docs/PERFORMANCE.md (lookahead 1.00-1.33x), but up to 1% above lookahead on
//                 two of them, hence not the default.
//   belady        offline reference: farthest next use first (models never used again first),
//                 ties LRU. Optimal only when every model has the same size.
//   belady-bytes  offline reference that weighs next use against size: the lookahead rule fed
//                 with the whole trace's future.
//   default       whichever kDefaultEvictionPolicy names.
// lookahead, planner and the belady variants read the FutureReferences given to the manager;
// without one they behave as lru (planner as lookahead).
// Errors: MakeEvictionPolicy is INVALID_ARGUMENT for an unknown name.
// Thread-safety: ChooseVictims is const and may run concurrently; lru, smallest, lookahead and
// the belady variants are immutable, the planner guards its plan cache with its own leaf lock.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "memory/future_references.h"

namespace fusion {

struct EvictionCandidate {
  const std::string* name = nullptr;
  uint64_t bytes = 0;     // device bytes freed by evicting it (= its reload cost)
  uint64_t last_use = 0;  // manager tick of its last use; smaller = older
};

class EvictionPolicy {
 public:
  virtual ~EvictionPolicy() = default;
  virtual const char* Name() const = 0;
  // Indices into `candidates` in eviction order. Their bytes sum to >= `bytes_to_free` when
  // all candidates together do; otherwise every candidate is returned. `future` may be null.
  virtual std::vector<size_t> ChooseVictims(const std::vector<EvictionCandidate>& candidates,
                                            uint64_t bytes_to_free,
                                            const FutureReferences* future) const = 0;
  // ChooseVictims told `room`: the device bytes that unpinned models and working sets may use
  // (the budget less the pinned bytes; 0 = unknown), and `admitting`: the model the bytes are
  // freed for (null: none, e.g. a budget that shrank). The manager calls this one; a policy
  // that plans capacity over time (planner) overrides it, the others ignore both.
  virtual std::vector<size_t> ChooseVictimsWithRoom(const std::vector<EvictionCandidate>& candidates,
                                                    uint64_t bytes_to_free,
                                                    const FutureReferences* future,
                                                    uint64_t room,
                                                    const std::string* admitting) const {
    return ChooseVictims(candidates, bytes_to_free, future);
  }
  // Called without the manager's lock after the future changed (ResidencyManager::
  // PrepareEviction) with `room` as above and the unpinned models resident now (the likely
  // candidates): a policy that plans computes its plan here, so that ChooseVictims, which runs
  // on the Acquire path under the lock, only reads it. The default does nothing.
  virtual void Prepare(const FutureReferences& future, uint64_t room,
                       const std::vector<std::string>& resident) const {}
};

// What ResidencyManager::Options uses unless told otherwise; "default" names it too.
inline constexpr char kDefaultEvictionPolicy[] = "planner";

// "default", "planner", "lru", "smallest", "lookahead", "belady", "belady-bytes";
// INVALID_ARGUMENT naming the unknown policy and listing the known ones.
absl::StatusOr<std::unique_ptr<EvictionPolicy>> MakeEvictionPolicy(const std::string& name);

}  // namespace fusion
