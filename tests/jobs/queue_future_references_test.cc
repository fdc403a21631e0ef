// Lookahead eviction sees the job queue: QueueFutureReferences between the JobManager's
// upcoming stages and the ResidencyManager.
#include "jobs/queue_future_references.h"

#include <gtest/gtest.h>

#include "fake_loader.h"
#include "memory/residency_manager.h"

namespace fusion::jobs {
namespace {

constexpr uint64_t MiB = 1ull << 20;

std::vector<std::string> Models(const std::vector<FutureRequest>& requests) {
  std::vector<std::string> out;
  for (const FutureRequest& r : requests) out.push_back(r.model);
  return out;
}

TEST(QueueFutureReferences, DistancesAreRoundRobinTurnsOverUpcomingJobs) {
  // Job 0 runs next with its remaining stages; job 1 is queued.
  auto d = QueueFutureReferences::Distances({{"generator", "enhancer"}, {"detector", "generator"}}, 2);
  EXPECT_EQ(d.at("generator"), 0u);  // job 0, stage 0
  EXPECT_EQ(d.at("detector"), 1u);   // job 1, stage 0
  EXPECT_EQ(d.at("enhancer"), 2u);   // job 0, stage 1
  EXPECT_FALSE(d.contains("landmarks"));
}

// Two jobs run at once (two slots): the two queued jobs do not start before a running one ends,
// and each takes the slot of the first to finish, at the end of the rotation.
TEST(QueueFutureReferences, TurnOrderIsTheRotationOfTheRunningSlotsNotOfEveryQueuedJob) {
  const std::vector<std::vector<std::string>> upcoming = {
      {"generator", "enhancer"},        // running
      {"landmarks", "encoder", "generator"},  // running
      {"detector", "landmarks"},        // queued
      {"detector"}};                    // queued
  EXPECT_EQ(Models(QueueFutureReferences::TurnOrder(upcoming, 2)),
            (std::vector<std::string>{"generator", "landmarks", "enhancer", "encoder", "detector",
                                      "generator", "landmarks", "detector"}));
  // One slot: job after job. As many slots as jobs: round robin over all of them.
  EXPECT_EQ(Models(QueueFutureReferences::TurnOrder(upcoming, 1)),
            (std::vector<std::string>{"generator", "enhancer", "landmarks", "encoder", "generator",
                                      "detector", "landmarks", "detector"}));
  EXPECT_EQ(Models(QueueFutureReferences::TurnOrder(upcoming, 4)),
            (std::vector<std::string>{"generator", "landmarks", "detector", "detector", "enhancer",
                                      "encoder", "landmarks", "generator"}));
  // A running job with no stage left (it is writing its result) takes no slot.
  EXPECT_EQ(Models(QueueFutureReferences::TurnOrder({{}, {"encoder"}, {"detector"}}, 2)),
            (std::vector<std::string>{"encoder", "detector"}));
  auto d = QueueFutureReferences::Distances(upcoming, 2);
  EXPECT_EQ(d.at("detector"), 4u);  // not 2: the queued job starts when job 0 has ended
}

TEST(QueueFutureReferences, SequenceIsTheTurnOrderWithANewVersionEachRefresh) {
  QueueFutureReferences refs(2);
  EXPECT_EQ(refs.Sequence(), nullptr);  // never refreshed
  std::vector<std::vector<std::string>> upcoming = {{"generator", "enhancer"}, {"detector"}};
  refs.SetSource([&] { return upcoming; });
  refs.Refresh();
  auto first = refs.Sequence();
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(Models(first->requests), (std::vector<std::string>{"generator", "detector", "enhancer"}));
  refs.Refresh();
  EXPECT_GT(refs.Sequence()->version, first->version);
  EXPECT_EQ(first->concurrent, 2u);  // the slots
  EXPECT_EQ(refs.Sequence()->requests[0].bytes, 0u);  // no model info: unknown
  refs.SetModelInfo([] {
    absl::flat_hash_map<std::string, QueueFutureReferences::ModelInfo> info;
    info["generator"] = {500, false, 64};
    info["detector"] = {20, true};
    return info;
  });
  refs.Refresh();
  auto seq = refs.Sequence();
  EXPECT_EQ(seq->requests[0].bytes, 500u);
  EXPECT_FALSE(seq->requests[0].pinned);
  EXPECT_EQ(seq->requests[0].working_bytes, 64u);
  EXPECT_EQ(seq->requests[1].working_bytes, 0u);  // detector: none known
  EXPECT_TRUE(seq->requests[1].pinned);
  EXPECT_EQ(seq->requests[2].bytes, 0u);  // enhancer: not in the info
}

TEST(QueueFutureReferences, AnswersFromTheLastRefreshOnly) {
  QueueFutureReferences refs(2);
  EXPECT_EQ(refs.NextUse("detector"), kNoFutureUse);  // no source yet
  std::vector<std::vector<std::string>> upcoming = {{"detector"}};
  refs.SetSource([&] { return upcoming; });
  EXPECT_EQ(refs.NextUse("detector"), kNoFutureUse);  // not refreshed yet
  refs.Refresh();
  EXPECT_EQ(refs.NextUse("detector"), 0u);
  upcoming.clear();
  refs.Refresh();
  EXPECT_EQ(refs.NextUse("detector"), kNoFutureUse);
}

// LRU would evict `b` (least recently used); the queue still needs `b` and not `a`, so the
// daemon's lookahead evicts `a`.
TEST(QueueFutureReferences, LookaheadEvictsWhatTheQueueDoesNotNeedWhereLruWouldNot) {
  for (const std::string policy : {"lru", "lookahead"}) {
    testing::FakeLoader loader;
    for (const char* m : {"a", "b", "c"}) loader.SetBytes(m, 40 * MiB);
    QueueFutureReferences refs(2);
    std::vector<std::vector<std::string>> upcoming = {{"c", "b"}};
    refs.SetSource([&] { return upcoming; });
    refs.Refresh();
    auto rm = *ResidencyManager::Create({.device_budget_bytes = 100 * MiB, .policy = policy,
                                         .loader = &loader, .future = &refs});
    for (const char* m : {"a", "b", "c"}) ASSERT_TRUE(rm->RegisterModel({m, 40 * MiB}).ok());
    const Owner owner{"j-1", 1000};
    { auto l = rm->Acquire(owner, "b", 0, absl::InfiniteFuture()); ASSERT_TRUE(l.ok()); }
    { auto l = rm->Acquire(owner, "a", 0, absl::InfiniteFuture()); ASSERT_TRUE(l.ok()); }
    { auto l = rm->Acquire(owner, "c", 0, absl::InfiniteFuture()); ASSERT_TRUE(l.ok()); }
    std::string evicted;
    for (const auto& m : rm->Snapshot().models) {
      if (m.state == ModelState::kHost) evicted = m.name;
    }
    EXPECT_EQ(evicted, policy == "lru" ? "b" : "a") << policy;
  }
}

}  // namespace
}  // namespace fusion::jobs
