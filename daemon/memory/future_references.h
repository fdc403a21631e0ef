// FutureReferences: the queued work's known future use of each model (jobs are pipelines).
//
// The job queue implements it over its queued and running jobs; bench/residency_trace
// implements it over the replay's rotation (lookahead, planner: only jobs that have arrived) or
// the whole trace (belady). A distance is counted in stage turns from now: 0 = the stage about
// to run, kNoFutureUse = no known use. Sequence() is the same knowledge as an ordered list of
// requests (what the planner policy solves over); an implementation that cannot give it
// returns null and the planner falls back to the lookahead rule.
// Called by eviction policies while the residency manager holds its lock: implementations must
// be quick and must never call back into the manager.
// Thread-safety: NextUse and Sequence may be called from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

namespace fusion {

inline constexpr uint64_t kNoFutureUse = std::numeric_limits<uint64_t>::max();

// One known future stage: it will Acquire `model` with `working_bytes` reserved.
struct FutureRequest {
  std::string model;
  uint64_t bytes = 0;          // the model's device bytes; 0 = not known to the source
  uint64_t working_bytes = 0;  // 0 when not known
  bool pinned = false;         // pinned models are always resident: never a cost
};

// The known future in request order: requests[0] is the stage about to run. `version` changes
// whenever the sequence changes (an arrival, a stage done, a job ended), so a policy may cache
// what it derives from it under that key.
struct FutureSequence {
  uint64_t version = 0;
  std::vector<FutureRequest> requests;
  // Jobs running at once: the stage admitted next may be any of the first `concurrent`
  // requests (fusiond: max_concurrent_jobs; a sequential replay: 1).
  size_t concurrent = 1;
};

class FutureReferences {
 public:
  virtual ~FutureReferences() = default;
  // Turns until `model`'s next use, or kNoFutureUse.
  virtual uint64_t NextUse(const std::string& model) const = 0;
  // The known future request sequence, or null when this source does not know the order.
  virtual std::shared_ptr<const FutureSequence> Sequence() const { return nullptr; }
};

}  // namespace fusion
