#include "memory/residency_planner.h"

#include <algorithm>
#include <array>
#include <limits>
#include <utility>

namespace fusion {
namespace {

constexpr uint64_t kInf = std::numeric_limits<uint64_t>::max();

// In place: f[S] = min over subsets T of S of f[T].
void SubsetMin(std::vector<uint64_t>& f, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const size_t bit = size_t{1} << i;
    for (size_t s = 0; s < f.size(); ++s) {
      if ((s & bit) != 0) f[s] = std::min(f[s], f[s ^ bit]);
    }
  }
}

}  // namespace

std::vector<uint64_t> PlanCostToGo(const std::vector<uint64_t>& model_bytes,
                                   const std::vector<PlanStep>& steps, uint64_t base) {
  const size_t n = model_bytes.size(), sets = size_t{1} << n;
  std::vector<uint64_t> sum(sets, 0);
  for (size_t s = 1; s < sets; ++s) {
    const size_t low = static_cast<size_t>(__builtin_ctzll(s));
    sum[s] = sum[s & (s - 1)] + model_bytes[low];
  }
  std::vector<uint64_t> next(sets, 0), f(sets);
  for (size_t t = steps.size(); t-- > 1;) {
    const PlanStep& step = steps[t];
    if (step.working_bytes > base) continue;  // refused: nothing happens
    const uint64_t cap = base - step.working_bytes;
    const int m = step.model;
    if (m >= 0 && model_bytes[m] > cap) continue;
    const size_t mbit = m >= 0 ? size_t{1} << m : 0;
    const size_t held = mbit | (step.with >= 0 ? size_t{1} << step.with : 0);
    // f[T]: the cost from t+1 on if T is resident during step t (T must hold the model and the
    // model of the stage beside it).
    for (size_t s = 0; s < sets; ++s) {
      f[s] = ((s & held) == held && sum[s] <= cap) ? next[s] : kInf;
    }
    SubsetMin(f, n);  // from a resident set S, any subset of it can be kept
    for (size_t s = 0; s < sets; ++s) {
      next[s] = f[s | mbit] + ((s & mbit) != 0 ? 0 : step.cost);
    }
  }
  return next;
}

PlannerPolicy::PlannerPolicy() : fallback_(*MakeEvictionPolicy("lookahead")) {}

uint64_t PlannerPolicy::plans() const {
  MutexLock lock(&mu_);
  return plans_;
}

uint64_t PlannerPolicy::inline_plans() const {
  MutexLock lock(&mu_);
  return inline_plans_;
}

uint64_t PlannerPolicy::BytesOf(const FutureRequest& r, const SizeMap& seen) {
  if (r.pinned) return 0;
  if (r.bytes != 0) return r.bytes;
  auto it = seen.find(r.model);
  return it == seen.end() ? 0 : it->second;
}

// Universe: `first` (the resident models: the decisions to make are about them) that the window
// uses, then the window's other models in order of first request. A model past kMaxModels is
// planned as never kept: its turn needs its bytes on top of the working set and its upload is a
// cost no decision changes. A candidate outside the universe with no use in the window changes
// no cost either (dropping it is free). The window ends where one more step would pass kMaxWork.
std::shared_ptr<const PlannerPolicy::Plan> PlannerPolicy::Build(
    const FutureSequence& seq, uint64_t base, size_t front, const SizeMap& seen,
    const std::vector<std::string>& first) {
  auto plan = std::make_shared<Plan>();
  plan->version = seq.version;
  plan->base = base;
  plan->front = front;
  // The request served now first, then the others in their order: with several jobs running, the
  // stage admitted now is often not requests[0], and the stages before it are still to come.
  static const FutureRequest kNothing;  // no model, no working set: not a cost
  std::vector<const FutureRequest*> order;
  order.reserve(seq.requests.size() + 1);
  order.push_back(front < seq.requests.size() ? &seq.requests[front] : &kNothing);
  for (size_t i = 0; i < seq.requests.size(); ++i) {
    if (i != front) order.push_back(&seq.requests[i]);
  }
  absl::flat_hash_map<std::string, int> index;
  absl::flat_hash_map<std::string, uint64_t> used;
  for (const FutureRequest& r : seq.requests) used.try_emplace(r.model, BytesOf(r, seen));
  for (const std::string& name : first) {
    auto u = used.find(name);
    if (u == used.end() || u->second == 0 || plan->universe.size() == kMaxModels) continue;
    if (!index.emplace(name, static_cast<int>(plan->universe.size())).second) continue;
    plan->universe.push_back(name);
    plan->bytes.push_back(u->second);
  }
  std::vector<PlanStep> steps;
  PlanStep before;  // the last step as planned alone (its own model and working set)
  for (const FutureRequest* request : order) {
    const FutureRequest& r = *request;
    const uint64_t bytes = r.model.empty() ? 0 : BytesOf(r, seen);
    PlanStep step{-1, bytes, r.working_bytes, 0};
    if (bytes != 0) {
      auto it = index.find(r.model);
      if (it == index.end() && plan->universe.size() < kMaxModels) {
        it = index.emplace(r.model, static_cast<int>(plan->universe.size())).first;
        plan->universe.push_back(r.model);
        plan->bytes.push_back(bytes);
      }
      if (it != index.end()) {
        step.model = it->second;
        step.cost = plan->bytes[step.model];
      } else {
        step.working_bytes += bytes;  // outside the universe: never kept
      }
    }
    // Beside the stage before it (another job's), where the two fit the base together.
    const PlanStep alone = step;
    if (seq.concurrent > 1 && !steps.empty()) {
      const uint64_t prev_model = before.model >= 0 ? before.bytes : 0;
      const uint64_t own = step.model >= 0 ? step.bytes : 0;
      if (prev_model + before.working_bytes + own + step.working_bytes <= base) {
        step.with = before.model;
        step.working_bytes += before.working_bytes;
      }
    }
    const uint64_t n = plan->universe.size();
    if ((steps.size() + 1) * std::max<uint64_t>(n, 1) * (uint64_t{1} << n) > kMaxWork) break;
    steps.push_back(step);
    before = alone;
  }
  if (!steps.empty()) plan->first_model = steps[0].model;
  plan->cost_to_go = PlanCostToGo(plan->bytes, steps, base);
  return plan;
}

// Stores `plan` beside those of its (version, base); a later version replaces them. Two queue
// changes prepared at once: the later version's plans stay.
void PlannerPolicy::Keep(std::shared_ptr<const Plan> plan) const {
  if (!plans_cache_.empty()) {
    const Plan& held = *plans_cache_.front();
    if (held.version > plan->version) return;
    if (held.version != plan->version || held.base != plan->base) plans_cache_.clear();
  }
  for (auto& p : plans_cache_) {
    if (p->front == plan->front) {
      p = std::move(plan);
      return;
    }
  }
  plans_cache_.push_back(std::move(plan));
}

void PlannerPolicy::Prepare(const FutureReferences& future, uint64_t room,
                            const std::vector<std::string>& resident) const {
  std::shared_ptr<const FutureSequence> seq = future.Sequence();
  if (seq == nullptr || seq->requests.empty()) return;
  // The first request of each distinct model among the first `concurrent`.
  std::vector<size_t> fronts;
  for (size_t i = 0; i < seq->requests.size() && i < std::max<size_t>(seq->concurrent, 1); ++i) {
    bool seen_model = false;
    for (size_t f : fronts) seen_model |= seq->requests[f].model == seq->requests[i].model;
    if (!seen_model) fronts.push_back(i);
  }
  for (size_t front : fronts) {
    SizeMap seen;
    {
      MutexLock lock(&mu_);
      bool have = false;
      for (const auto& p : plans_cache_) {
        have |= p->version == seq->version && p->base == room && p->front == front;
      }
      if (have) continue;
      seen = seen_bytes_;
    }
    std::shared_ptr<const Plan> plan = Build(*seq, room, front, seen, resident);  // no lock held
    MutexLock lock(&mu_);
    ++plans_;
    Keep(std::move(plan));
  }
}

std::shared_ptr<const PlannerPolicy::Plan> PlannerPolicy::GetPlan(
    const std::vector<EvictionCandidate>& c, const FutureSequence& seq, uint64_t base,
    size_t front) const {
  MutexLock lock(&mu_);
  for (const EvictionCandidate& e : c) seen_bytes_[*e.name] = e.bytes;
  // A prepared plan serves if every candidate the window uses has a bit in it (when the
  // universe is full, a candidate without one would be planned as never kept).
  for (const auto& plan : plans_cache_) {
    if (plan->version != seq.version || plan->base != base || plan->front != front) continue;
    const auto& u = plan->universe;
    const bool covers = u.size() < kMaxModels ||
                        std::all_of(c.begin(), c.end(), [&](const EvictionCandidate& e) {
                          return std::find(u.begin(), u.end(), *e.name) != u.end();
                        });
    if (covers) return plan;
  }
  std::vector<std::string> names;
  for (const EvictionCandidate& e : c) names.push_back(*e.name);
  std::shared_ptr<const Plan> plan = Build(seq, base, front, seen_bytes_, names);  // nobody prepared this: plan now
  ++plans_;
  ++inline_plans_;
  Keep(plan);
  return plan;
}

std::vector<size_t> PlannerPolicy::ChooseVictims(const std::vector<EvictionCandidate>& c,
                                                 uint64_t need,
                                                 const FutureReferences* future) const {
  return ChooseVictimsWithRoom(c, need, future, 0, nullptr);
}

std::vector<size_t> PlannerPolicy::ChooseVictimsWithRoom(const std::vector<EvictionCandidate>& c,
                                                         uint64_t need,
                                                         const FutureReferences* future,
                                                         uint64_t room,
                                                         const std::string* admitting) const {
  std::shared_ptr<const FutureSequence> seq =
      future == nullptr || c.size() > kMaxModels ? nullptr : future->Sequence();
  if (seq == nullptr || seq->requests.empty()) return fallback_->ChooseVictims(c, need, future);
  uint64_t total = 0;
  for (const EvictionCandidate& e : c) total += e.bytes;
  std::vector<size_t> by_age(c.size());
  for (size_t i = 0; i < c.size(); ++i) by_age[i] = i;
  std::sort(by_age.begin(), by_age.end(),
            [&](size_t a, size_t b) { return c[a].last_use < c[b].last_use; });
  if (total < need) return by_age;
  // The request served now: the admitted model's first, else (none named) requests[0].
  size_t front = 0;
  if (admitting != nullptr) {
    front = kNoFront;
    for (size_t i = 0; i < seq->requests.size(); ++i) {
      if (seq->requests[i].model == *admitting) {
        front = i;
        break;
      }
    }
  }
  uint64_t base = room;
  if (base == 0) {
    static const FutureRequest kNothing;
    const FutureRequest& now = front < seq->requests.size() ? seq->requests[front] : kNothing;
    MutexLock lock(&mu_);
    base = total - need + BytesOf(now, seen_bytes_) + now.working_bytes;
  }
  std::shared_ptr<const Plan> plan = GetPlan(c, *seq, base, front);
  return Choose(c, need, *plan, by_age);
}

// Every kept subset of the candidates that frees `need`, the best by: least cost-to-go, then
// most reload-cost-weighted recency kept (sum of bytes / (1 + r)^3, r = 0 for the most recently
// used candidate: among plans equal over the known window, keep what was used last, the
// larger first), then the evicted ones oldest.
std::vector<size_t> PlannerPolicy::Choose(const std::vector<EvictionCandidate>& c, uint64_t need,
                                          const Plan& plan, const std::vector<size_t>& by_age) {
  std::vector<uint64_t> bit(c.size()), value(c.size());
  uint64_t total = 0;
  for (size_t i = 0; i < c.size(); ++i) {
    const auto& u = plan.universe;
    const size_t at = static_cast<size_t>(std::find(u.begin(), u.end(), *c[i].name) - u.begin());
    bit[i] = at < u.size() ? uint64_t{1} << at : 0;  // 0: no use the plan can save
    total += c[i].bytes;
  }
  for (size_t r = 0; r < by_age.size(); ++r) {
    const uint64_t recency = by_age.size() - r;  // 1 = the most recently used
    value[by_age[r]] = c[by_age[r]].bytes / (recency * recency * recency);
  }
  uint64_t forced = 0;  // the stage about to run stays resident (never a candidate itself)
  if (plan.first_model >= 0) forced = uint64_t{1} << plan.first_model;
  for (size_t i = 0; i < c.size(); ++i) forced &= ~bit[i];

  const size_t subsets = size_t{1} << c.size();
  std::vector<uint64_t> kept_bytes(subsets, 0), kept_set(subsets, 0), kept_value(subsets, 0),
      kept_age(subsets, 0);
  size_t best = 0;
  std::array<uint64_t, 3> best_key{kInf, kInf, kInf};
  for (size_t k = 1; k < subsets; ++k) {
    const size_t low = static_cast<size_t>(__builtin_ctzll(k)), rest = k & (k - 1);
    kept_bytes[k] = kept_bytes[rest] + c[low].bytes;
    kept_set[k] = kept_set[rest] | bit[low];
    kept_value[k] = kept_value[rest] + value[low];
    kept_age[k] = kept_age[rest] + c[low].last_use;
  }
  for (size_t k = 0; k < subsets; ++k) {
    if (total - kept_bytes[k] < need) continue;
    const std::array<uint64_t, 3> key{plan.cost_to_go[kept_set[k] | forced], ~kept_value[k],
                                      ~kept_age[k]};
    if (key < best_key) best = k, best_key = key;
  }
  std::vector<size_t> victims;
  for (size_t i : by_age) {
    if ((best & (size_t{1} << i)) == 0) victims.push_back(i);
  }
  return victims;
}

}  // namespace fusion
