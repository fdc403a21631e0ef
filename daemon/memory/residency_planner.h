// PlannerPolicy ("planner"): victims from an exact plan over the visible future.
//
// What: generalized caching (models of different sizes, cost = bytes uploaded) solved exactly
// over the known request sequence (FutureReferences::Sequence: the running jobs' remaining
// stages and the queued jobs', in the order they will run; only jobs that have arrived). A
// backward dynamic program over the sets of resident models gives, for each set the device
// could hold after the current stage, the least bytes the rest of the window must upload
// (PlanCostToGo). ChooseVictims keeps the subset of the candidates with the least cost-to-go
// among those that free `bytes_to_free`. Plans that tie over the known window (the future past
// it is unknown) are told apart by recency weighted by reload cost: keep the largest sum of
// bytes / (1 + r)^3, r = 0 for the most recently used candidate; then evict the oldest.
// Re-planning at every change of the sequence makes it a rolling-horizon optimum; fed the whole
// schedule (residency_trace --policy planner-offline) it is the offline optimum.
//
// Now: the plan's step 0 is the request of the model being admitted (ChooseVictimsWithRoom's
// `admitting`: its first request; none named: requests[0]), then the others in their order.
// With several jobs running (fusiond) the stage admitted is often not requests[0]; planned as if
// it were, requests[0]'s model counted as served and could be evicted just before its own
// Acquire. A model the sequence does not name is planned as a step of no cost before them all.
//
// Concurrency: with FutureSequence::concurrent > 1 (fusiond: two jobs at once) a stage runs
// beside the one before it in the rotation (the other job's): at step t both models stay
// resident and both working sets are reserved, where they fit the base together; where they do
// not, the manager's admission makes the stage wait for the other's lease, and it is planned
// alone. A sequential replay (concurrent 1) plans each stage alone.
//
// Capacity: the bytes the unpinned resident models may hold at step t are base - working(t),
// where base is the manager's `room` (device budget less pinned bytes, ChooseVictimsWithRoom);
// called without it, base = (sum of candidates - bytes_to_free) + bytes(now) + working(now),
// the same number when no other stage holds a lease. A step whose model and working set exceed base is refused by the manager
// and skipped by the plan. Now, the kept candidates must free bytes_to_free whatever base says.
//
// Window: the plan's universe is the resident models the sequence uses, then the sequence's
// other models in order of first use, at most kMaxModels; a model past that is planned as never
// kept (its stage needs its bytes on top of its working set). The window ends where the DP work
// (steps x models x 2^models) would pass kMaxWork. Models of unknown size (FutureRequest::bytes
// 0) take the size seen when they were last a candidate, else they are left out of the plan
// (their working set still counts). fusiond's queue gives sizes, pins and, as each stage's
// working set, the one its model's last Acquire asked for (from the residency snapshot; 0
// before a model's first stage).
// Plan cache: the cost-to-go table depends on the sequence, base, step 0 and universe, not on
// the candidates, so it is computed once per (sequence version, base, front): by Prepare, which
// the manager's PrepareEviction runs off its lock when the queue changes (fusiond: after each
// QueueFutureReferences::Refresh, one plan per distinct model among the sequence's first
// `concurrent` requests; the replay: before each turn, one), or else by the first ChooseVictims
// of that key (under the manager's lock). ChooseVictims then only enumerates the candidates'
// subsets (2^candidates table reads, ~1 us). A plan is at most kMaxWork simple operations (~3 ms
// at 12 models).
// Fallback: the lookahead rule (eviction_policy.h) without a sequence or with more than
// kMaxModels candidates.
// Invariants: victims are only ever candidates; their bytes reach bytes_to_free whenever all
// candidates' do (else all are returned), as EvictionPolicy requires.
// Thread-safety: all methods may run concurrently; the cache sits behind a leaf mutex that is
// never held during a DP run by Prepare.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "common/mutex.h"
#include "memory/eviction_policy.h"

namespace fusion {

// One step of a plan: the model's index in the plan's universe (-1 = not a cost: pinned or of
// unknown size), its bytes and the stage's working bytes.
struct PlanStep {
  int model = -1;
  uint64_t bytes = 0;
  uint64_t working_bytes = 0;
  uint64_t cost = 0;  // of a miss: the model's bytes; less for a predicted (not known) step
  // A stage running beside this one (jobs at once): its model (-1 none) must stay resident
  // during this step, at no cost; its working set is counted in working_bytes.
  int with = -1;
};

// Cost-to-go of generalized caching: entry S (a bit set over `model_bytes`) is the least sum of
// bytes uploaded by steps[1..] when the resident set after steps[0] is S, with at most
// base - steps[t].working_bytes bytes resident at step t, holding steps[t].model and
// steps[t].with. Steps that cannot fit are skipped.
// `model_bytes.size()` <= 20.
std::vector<uint64_t> PlanCostToGo(const std::vector<uint64_t>& model_bytes,
                                   const std::vector<PlanStep>& steps, uint64_t base);

class PlannerPolicy final : public EvictionPolicy {
 public:
  static constexpr size_t kMaxModels = 12;
  static constexpr uint64_t kMaxWork = uint64_t{1} << 22;
  // Plan::front when the admitted model is not in the sequence (or none is named).
  static constexpr size_t kNoFront = static_cast<size_t>(-1);

  PlannerPolicy();
  const char* Name() const override { return "planner"; }
  std::vector<size_t> ChooseVictims(const std::vector<EvictionCandidate>& candidates,
                                    uint64_t bytes_to_free,
                                    const FutureReferences* future) const override;
  std::vector<size_t> ChooseVictimsWithRoom(const std::vector<EvictionCandidate>& candidates,
                                            uint64_t bytes_to_free, const FutureReferences* future,
                                            uint64_t room, const std::string* admitting) const override;
  // Computes the plans for `future`'s current sequence and `room`, `resident` first in their
  // universe, with no lock but its own leaf lock held briefly (never during the DP), so the
  // next ChooseVictims only reads them: one for each distinct model among the sequence's first
  // `concurrent` requests as the stage admitted now (the stages the running jobs run next).
  void Prepare(const FutureReferences& future, uint64_t room,
               const std::vector<std::string>& resident) const override;
  // Plans computed so far; those computed inside ChooseVictims (nobody had prepared that key:
  // version, room and front). For tests and the benchmark.
  uint64_t plans() const;
  uint64_t inline_plans() const;

 private:
  using SizeMap = absl::flat_hash_map<std::string, uint64_t>;
  struct Plan {
    uint64_t version = 0, base = 0;
    // The request served now, planned as step 0 before the others in their order (kNoFront:
    // none of them; a step of no cost comes first).
    size_t front = 0;
    std::vector<std::string> universe;  // bit i = universe[i]: resident, then window models
    std::vector<uint64_t> bytes;
    int first_model = -1;               // bit of step 0's model (the one admitted), -1 if not a cost
    std::vector<uint64_t> cost_to_go;   // PlanCostToGo
  };
  std::shared_ptr<const Plan> GetPlan(const std::vector<EvictionCandidate>& c,
                                      const FutureSequence& seq, uint64_t base, size_t front) const;
  static std::shared_ptr<const Plan> Build(const FutureSequence& seq, uint64_t base, size_t front,
                                           const SizeMap& seen,
                                           const std::vector<std::string>& first);
  static uint64_t BytesOf(const FutureRequest& r, const SizeMap& seen);
  void Keep(std::shared_ptr<const Plan> plan) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  static std::vector<size_t> Choose(const std::vector<EvictionCandidate>& c, uint64_t need,
                                    const Plan& plan, const std::vector<size_t>& by_age);

  std::unique_ptr<EvictionPolicy> fallback_;
  mutable Mutex mu_;
  // The plans of one (sequence version, base), one per front.
  mutable std::vector<std::shared_ptr<const Plan>> plans_cache_ ABSL_GUARDED_BY(mu_);
  mutable SizeMap seen_bytes_ ABSL_GUARDED_BY(mu_);
  mutable uint64_t plans_ ABSL_GUARDED_BY(mu_) = 0;
  mutable uint64_t inline_plans_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace fusion
