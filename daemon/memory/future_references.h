// FutureReferences: the queued work's known future use of each model (jobs are pipelines).
//
// The job queue implements it over its queued and running jobs; bench/residency_trace
// implements it over the replay's rotation (lookahead) or the whole trace (belady). A distance
// is counted in stage turns from now: 0 = the stage about to run, kNoFutureUse = no known use.
// Called by eviction policies while the residency manager holds its lock: implementations must
// be quick and must never call back into the manager.
// Thread-safety: NextUse may be called from any thread.
#pragma once

#include <cstdint>
#include <limits>
#include <string>

namespace fusion {

inline constexpr uint64_t kNoFutureUse = std::numeric_limits<uint64_t>::max();

class FutureReferences {
 public:
  virtual ~FutureReferences() = default;
  // Turns until `model`'s next use, or kNoFutureUse.
  virtual uint64_t NextUse(const std::string& model) const = 0;
};

}  // namespace fusion
