#include "memory/eviction_policy.h"

#include <algorithm>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "memory/residency_planner.h"

namespace fusion {
namespace {

// Takes victims from `order` until `bytes_to_free` is reached.
std::vector<size_t> TakeUntil(const std::vector<EvictionCandidate>& c,
                              const std::vector<size_t>& order, uint64_t bytes_to_free) {
  std::vector<size_t> victims;
  uint64_t freed = 0;
  for (size_t i : order) {
    if (freed >= bytes_to_free) break;
    victims.push_back(i);
    freed += c[i].bytes;
  }
  return victims;
}

std::vector<size_t> Indices(size_t n) {
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t{0});
  return order;
}

class LruPolicy final : public EvictionPolicy {
 public:
  const char* Name() const override { return "lru"; }
  std::vector<size_t> ChooseVictims(const std::vector<EvictionCandidate>& c, uint64_t need,
                                    const FutureReferences*) const override {
    std::vector<size_t> order = Indices(c.size());
    std::sort(order.begin(), order.end(),
              [&](size_t a, size_t b) { return c[a].last_use < c[b].last_use; });
    return TakeUntil(c, order, need);
  }
};

class SmallestPolicy final : public EvictionPolicy {
 public:
  const char* Name() const override { return "smallest"; }
  std::vector<size_t> ChooseVictims(const std::vector<EvictionCandidate>& c, uint64_t need,
                                    const FutureReferences*) const override {
    std::vector<size_t> order = Indices(c.size());
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      if (c[a].bytes != c[b].bytes) return c[a].bytes < c[b].bytes;
      return c[a].last_use < c[b].last_use;
    });
    return TakeUntil(c, order, need);
  }
};

class BeladyPolicy final : public EvictionPolicy {
 public:
  const char* Name() const override { return "belady"; }
  std::vector<size_t> ChooseVictims(const std::vector<EvictionCandidate>& c, uint64_t need,
                                    const FutureReferences* future) const override {
    std::vector<uint64_t> next(c.size(), kNoFutureUse);
    if (future != nullptr) {
      for (size_t i = 0; i < c.size(); ++i) next[i] = future->NextUse(*c[i].name);
    }
    std::vector<size_t> order = Indices(c.size());
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      if (next[a] != next[b]) return next[a] > next[b];
      return c[a].last_use < c[b].last_use;
    });
    return TakeUntil(c, order, need);
  }
};

// lookahead and belady-bytes: the same rule, fed with the queue's or the whole trace's future.
class CostAwarePolicy final : public EvictionPolicy {
 public:
  explicit CostAwarePolicy(const char* name) : name_(name) {}
  const char* Name() const override { return name_; }
  std::vector<size_t> ChooseVictims(const std::vector<EvictionCandidate>& c, uint64_t need,
                                    const FutureReferences* future) const override {
    // Expected reload cost of evicting a model: its bytes, discounted by how far away its next
    // use is (a model needed far ahead is likely to be evicted by then anyway). Unused = 0.
    std::vector<double> cost(c.size(), 0.0);
    for (size_t i = 0; i < c.size(); ++i) {
      const uint64_t next = future == nullptr ? kNoFutureUse : future->NextUse(*c[i].name);
      cost[i] = next == kNoFutureUse ? 0.0 : static_cast<double>(c[i].bytes) / (1.0 + next);
    }
    std::vector<size_t> order = Indices(c.size());
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      if (cost[a] != cost[b]) return cost[a] < cost[b];
      if (cost[a] == 0.0 && c[a].bytes != c[b].bytes) return c[a].bytes < c[b].bytes;
      return c[a].last_use < c[b].last_use;
    });
    std::vector<size_t> victims = TakeUntil(c, order, need);
    return PutBackUnneeded(c, cost, std::move(victims), need);
  }

 private:
  // Drops victims, costliest first, while the rest still free `need` bytes.
  static std::vector<size_t> PutBackUnneeded(const std::vector<EvictionCandidate>& c,
                                             const std::vector<double>& cost,
                                             std::vector<size_t> victims, uint64_t need) {
    uint64_t freed = 0;
    for (size_t i : victims) freed += c[i].bytes;
    if (freed < need) return victims;
    std::vector<size_t> by_cost = victims;
    std::sort(by_cost.begin(), by_cost.end(), [&](size_t a, size_t b) {
      if (cost[a] != cost[b]) return cost[a] > cost[b];
      return c[a].bytes > c[b].bytes;
    });
    for (size_t i : by_cost) {
      if (freed - c[i].bytes >= need) {
        freed -= c[i].bytes;
        victims.erase(std::find(victims.begin(), victims.end(), i));
      }
    }
    return victims;
  }
  const char* name_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<EvictionPolicy>> MakeEvictionPolicy(const std::string& name) {
  if (name == "default") return MakeEvictionPolicy(kDefaultEvictionPolicy);
  if (name == "planner") return std::make_unique<PlannerPolicy>();
  if (name == "lru") return std::make_unique<LruPolicy>();
  if (name == "smallest") return std::make_unique<SmallestPolicy>();
  if (name == "lookahead") return std::make_unique<CostAwarePolicy>("lookahead");
  if (name == "belady") return std::make_unique<BeladyPolicy>();
  if (name == "belady-bytes") return std::make_unique<CostAwarePolicy>("belady-bytes");
  return absl::InvalidArgumentError(
      absl::StrCat("unknown eviction policy '", name,
                   "' (known: default, planner, lru, smallest, lookahead, belady, belady-bytes)"));
}

}  // namespace fusion
