// EvictionPolicy: which unleased, unpinned device-resident models to evict to free bytes.
//
// The residency manager calls ChooseVictims under its lock with every evictable model and
// evicts the returned victims in order. Policies (MakeEvictionPolicy names):
//   lru           least recently used first.
//   smallest      smallest model first, ties LRU (what InvokeAI's VRAM cache does).
//   lookahead     (default) from the queued work's future references: models no queued job uses
//                 go first (LRU among them); then the model whose reload is cheapest relative to
//                 how far away its next use is (bytes / turns, smallest first), ties LRU. Then
//                 victims not needed to reach the target are put back, largest-cost first, so
//                 a large model is not evicted to free a few bytes.
//   belady        offline reference: farthest next use first (models never used again first),
//                 ties LRU. Optimal only when every model has the same size.
//   belady-bytes  offline reference that weighs next use against size: the lookahead rule fed
//                 with the whole trace's future.
// lookahead and the belady variants read distances from the FutureReferences given to the
// manager; without one they behave as lru.
// Thread-safety: policies are immutable after construction; ChooseVictims is const and may run
// concurrently.
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
  // (the budget less the pinned bytes; 0 = unknown). The manager calls this one; a policy that
  // plans capacity over time (planner) overrides it, the others ignore `room`.
  virtual std::vector<size_t> ChooseVictimsWithRoom(const std::vector<EvictionCandidate>& candidates,
                                                    uint64_t bytes_to_free,
                                                    const FutureReferences* future,
                                                    uint64_t room) const {
    return ChooseVictims(candidates, bytes_to_free, future);
  }
};

// What ResidencyManager::Options uses unless told otherwise; "default" names it too.
inline constexpr char kDefaultEvictionPolicy[] = "lookahead";

// "default", "planner", "lru", "smallest", "lookahead", "belady", "belady-bytes";
// INVALID_ARGUMENT naming the unknown policy and listing the known ones.
absl::StatusOr<std::unique_ptr<EvictionPolicy>> MakeEvictionPolicy(const std::string& name);

}  // namespace fusion
