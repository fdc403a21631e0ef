// Eviction policies on hand-made cases, alone and through the manager.
#include "memory/eviction_policy.h"

#include "absl/container/flat_hash_map.h"
#include "fake_loader.h"
#include "gtest/gtest.h"
#include "memory/residency_manager.h"

namespace fusion {
namespace {

constexpr uint64_t kMiB = 1ull << 20;

class MapFuture final : public FutureReferences {
 public:
  uint64_t NextUse(const std::string& model) const override {
    auto it = next.find(model);
    return it == next.end() ? kNoFutureUse : it->second;
  }
  absl::flat_hash_map<std::string, uint64_t> next;
};

struct Case {
  std::vector<std::string> names;
  std::vector<EvictionCandidate> candidates;
  void Add(const std::string& name, uint64_t mib, uint64_t last_use) {
    names.push_back(name);
    candidates.push_back({nullptr, mib * kMiB, last_use});
  }
  std::vector<std::string> Victims(const std::string& policy, uint64_t need_mib,
                                   const FutureReferences* future) {
    for (size_t i = 0; i < names.size(); ++i) candidates[i].name = &names[i];
    auto p = MakeEvictionPolicy(policy);
    EXPECT_TRUE(p.ok());
    std::vector<std::string> out;
    for (size_t i : (*p)->ChooseVictims(candidates, need_mib * kMiB, future)) {
      out.push_back(names[i]);
    }
    return out;
  }
};

TEST(EvictionPolicyTest, UnknownPolicyIsInvalidArgumentListingTheKnownOnes) {
  auto p = MakeEvictionPolicy("fifo");
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(p.status().message(),
            "unknown eviction policy 'fifo' (known: default, planner, lru, smallest, lookahead, belady, belady-bytes)");
}

TEST(EvictionPolicyTest, SmallestEvictsSmallestFirstTiesByLru) {
  Case c;
  c.Add("big", 500, 1), c.Add("small_new", 20, 9), c.Add("small_old", 20, 2);
  EXPECT_EQ(c.Victims("smallest", 30, nullptr), (std::vector<std::string>{"small_old", "small_new"}));
}

TEST(EvictionPolicyTest, LookaheadEvictsModelsNoQueuedJobUsesFirst) {
  Case c;
  c.Add("used_soon_old", 100, 1), c.Add("unused_new", 100, 9);
  MapFuture f;
  f.next["used_soon_old"] = 3;
  EXPECT_EQ(c.Victims("lookahead", 50, &f), (std::vector<std::string>{"unused_new"}));
  EXPECT_EQ(c.Victims("lru", 50, &f), (std::vector<std::string>{"used_soon_old"}));
}

TEST(EvictionPolicyTest, LookaheadEvictsCheapReloadBeforeLargeModelNeededLater) {
  // belady evicts the farthest (a 500 MiB reload); lookahead weighs bytes against distance and
  // evicts the 20 MiB model needed a little sooner.
  Case c;
  c.Add("swapper", 500, 1), c.Add("detector", 20, 2);
  MapFuture f;
  f.next["swapper"] = 6, f.next["detector"] = 4;
  EXPECT_EQ(c.Victims("belady", 10, &f), (std::vector<std::string>{"swapper"}));
  EXPECT_EQ(c.Victims("lookahead", 10, &f), (std::vector<std::string>{"detector"}));
}

TEST(EvictionPolicyTest, LookaheadKeepsAModelNeededNextOverOneNeededMuchLater) {
  Case c;
  c.Add("next", 100, 1), c.Add("later", 100, 2);
  MapFuture f;
  f.next["next"] = 0, f.next["later"] = 40;
  EXPECT_EQ(c.Victims("lookahead", 100, &f), (std::vector<std::string>{"later"}));
}

TEST(EvictionPolicyTest, LookaheadPutsBackVictimsNotNeededToFree) {
  // Cheapest-first takes the small one, then the large one; the small one is then not needed.
  Case c;
  c.Add("small", 20, 1), c.Add("large", 400, 2);
  MapFuture f;
  f.next["small"] = 1, f.next["large"] = 100;
  EXPECT_EQ(c.Victims("lookahead", 300, &f), (std::vector<std::string>{"large"}));
}

TEST(EvictionPolicyTest, LookaheadWithoutFutureIsLru) {
  Case c;
  c.Add("new", 100, 5), c.Add("old", 100, 1);
  EXPECT_EQ(c.Victims("lookahead", 50, nullptr), (std::vector<std::string>{"old"}));
}

TEST(EvictionPolicyTest, ManagerEvictsWhatTheLookaheadFutureDoesNotUse) {
  testing::FakeLoader loader;
  MapFuture future;
  ResidencyManager::Options o;
  o.device_budget_bytes = 300 * kMiB;
  o.loader = &loader;
  o.future = &future;
  auto m = ResidencyManager::Create(o);
  ASSERT_TRUE(m.ok());
  for (const char* n : {"a", "b", "c", "d"}) {
    loader.SetBytes(n, 100 * kMiB);
    ASSERT_TRUE((*m)->RegisterModel({n, 100 * kMiB}).ok());
  }
  const Owner job{"j", 1};
  for (const char* n : {"a", "b", "c"}) ASSERT_TRUE((*m)->Acquire(job, n, 0, absl::Now()).ok());
  future.next["a"] = 1, future.next["b"] = 2;  // c is used by no queued job
  loader.ClearLog();
  ASSERT_TRUE((*m)->Acquire(job, "d", 0, absl::Now()).ok());
  EXPECT_EQ(loader.log().front(), "release_device c");
}

}  // namespace
}  // namespace fusion
