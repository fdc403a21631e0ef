#include "jobs/fair_queue.h"

#include <gtest/gtest.h>

#include <set>

namespace fusion::jobs {
namespace {

FairQueue::Entry Job(const std::string& id, uid_t uid, int64_t seq,
                     Priority p = Priority::kNormal, std::vector<std::string> stages = {"detect"}) {
  return {id, uid, p, seq, std::move(stages)};
}

std::vector<std::string> Drain(FairQueue& q, const FairQueue::IsResident& resident = nullptr) {
  std::vector<std::string> out;
  while (auto e = q.Pop(resident)) out.push_back(e->id);
  return out;
}

TEST(FairQueue, UidsAreServedRoundRobinInSubmitOrder) {
  FairQueue q({});
  // uid 1 submits three jobs before uid 2 submits two: they still alternate.
  ASSERT_TRUE(q.Push(Job("a1", 1, 1)).ok());
  ASSERT_TRUE(q.Push(Job("a2", 1, 2)).ok());
  ASSERT_TRUE(q.Push(Job("a3", 1, 3)).ok());
  ASSERT_TRUE(q.Push(Job("b1", 2, 4)).ok());
  ASSERT_TRUE(q.Push(Job("b2", 2, 5)).ok());
  EXPECT_EQ(*q.Position("a1"), 0u);
  EXPECT_EQ(*q.Position("b1"), 1u);
  EXPECT_EQ(*q.Position("a2"), 2u);
  EXPECT_EQ(*q.Position("a3"), 4u);
  EXPECT_EQ(Drain(q), (std::vector<std::string>{"a1", "b1", "a2", "b2", "a3"}));
  EXPECT_EQ(q.size(), 0u);
}

TEST(FairQueue, PriorityOrdersWithinAUidNotAcrossUids) {
  FairQueue q({});
  ASSERT_TRUE(q.Push(Job("a-low", 1, 1, Priority::kLow)).ok());
  ASSERT_TRUE(q.Push(Job("a-high", 1, 2, Priority::kHigh)).ok());
  ASSERT_TRUE(q.Push(Job("b-low", 2, 3, Priority::kLow)).ok());
  ASSERT_TRUE(q.Push(Job("a-normal", 1, 4, Priority::kNormal)).ok());
  EXPECT_EQ(Drain(q), (std::vector<std::string>{"a-high", "b-low", "a-normal", "a-low"}));
}

// The slot a yielding job lends: only a job that outranks it, the first such uid in the
// rotation; TopPriority is the best queued across uids.
TEST(FairQueue, PopAboveTakesOnlyAnOutrankingJobAndTopPriorityIsAcrossUids) {
  FairQueue q({});
  EXPECT_EQ(q.TopPriority(), std::nullopt);
  ASSERT_TRUE(q.Push(Job("a-low", 1, 1, Priority::kLow)).ok());
  ASSERT_TRUE(q.Push(Job("b-normal", 2, 2, Priority::kNormal)).ok());
  ASSERT_TRUE(q.Push(Job("c-normal", 3, 3, Priority::kNormal)).ok());
  EXPECT_EQ(q.TopPriority(), Priority::kNormal);
  EXPECT_EQ(q.Pop(nullptr, Priority::kNormal), std::nullopt);
  EXPECT_EQ(q.size(), 3u);
  EXPECT_EQ(q.Pop(nullptr, Priority::kLow)->id, "b-normal");
  EXPECT_EQ(q.Pop(nullptr, Priority::kLow)->id, "c-normal");
  EXPECT_EQ(q.Pop(nullptr, Priority::kLow), std::nullopt);
  EXPECT_EQ(q.TopPriority(), Priority::kLow);
  EXPECT_EQ(q.Pop(nullptr)->id, "a-low");
}

TEST(FairQueue, PerUidLimitIsResourceExhaustedNamingTheUid) {
  FairQueue q({.max_queued_per_uid = 2});
  ASSERT_TRUE(q.Push(Job("a1", 7, 1)).ok());
  ASSERT_TRUE(q.Push(Job("a2", 7, 2)).ok());
  absl::Status st = q.Push(Job("a3", 7, 3));
  EXPECT_EQ(st.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(st.message().find("uid 7 already has 2 queued jobs (limit 2)"), std::string::npos);
  EXPECT_TRUE(q.Push(Job("b1", 8, 4)).ok());  // other uids are unaffected
  EXPECT_EQ(q.QueuedPerUid(), (std::map<uid_t, size_t>{{7, 2}, {8, 1}}));
}

TEST(FairQueue, ResidentModelJobOvertakesButTheDueUidNeverStarves) {
  FairQueue q({.max_bypass = 2});
  // uid 1 needs "enhance" (not resident); uid 2 has many jobs whose first model is resident.
  ASSERT_TRUE(q.Push(Job("cold", 1, 1, Priority::kNormal, {"enhance"})).ok());
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(q.Push(Job("warm" + std::to_string(i), 2, 2 + i, Priority::kNormal, {"detect"})).ok());
  }
  auto resident = [](const std::string& m) { return m == "detect"; };
  // Two bypasses allowed, then the due job must run.
  EXPECT_EQ(Drain(q, resident),
            (std::vector<std::string>{"warm0", "warm1", "cold", "warm2", "warm3", "warm4"}));
}

TEST(FairQueue, RemoveCancelsAQueuedJobOnly) {
  FairQueue q({});
  ASSERT_TRUE(q.Push(Job("a1", 1, 1)).ok());
  ASSERT_TRUE(q.Push(Job("b1", 2, 2)).ok());
  EXPECT_TRUE(q.Remove("a1"));
  EXPECT_FALSE(q.Remove("a1"));
  EXPECT_FALSE(q.Position("a1").has_value());
  EXPECT_EQ(*q.Position("b1"), 0u);
  EXPECT_EQ(Drain(q), (std::vector<std::string>{"b1"}));
}

TEST(FairQueue, UpcomingStagesFollowTheFairOrder) {
  FairQueue q({});
  ASSERT_TRUE(q.Push(Job("a1", 1, 1, Priority::kNormal, {"detect", "generator"})).ok());
  ASSERT_TRUE(q.Push(Job("a2", 1, 2, Priority::kNormal, {"detect", "enhance"})).ok());
  ASSERT_TRUE(q.Push(Job("b1", 2, 3, Priority::kNormal, {"landmarks"})).ok());
  auto up = q.UpcomingStages(10);
  ASSERT_EQ(up.size(), 3u);
  EXPECT_EQ(up[0], (std::vector<std::string>{"detect", "generator"}));
  EXPECT_EQ(up[1], (std::vector<std::string>{"landmarks"}));
  EXPECT_EQ(up[2], (std::vector<std::string>{"detect", "enhance"}));
  EXPECT_EQ(q.UpcomingStages(1).size(), 1u);
}

TEST(FairQueue, EveryPushedJobIsPoppedExactlyOnceUnderRandomOrder) {
  FairQueue q({.max_queued_per_uid = 1000, .max_bypass = 3});
  std::set<std::string> pushed;
  uint32_t x = 12345;  // fixed LCG: reproducible
  for (int i = 0; i < 500; ++i) {
    x = x * 1103515245u + 12345u;
    const uid_t uid = 1000 + (x >> 16) % 5;
    const auto prio = static_cast<Priority>(1 + (x >> 8) % 3);
    const std::string id = "j" + std::to_string(i);
    ASSERT_TRUE(q.Push(Job(id, uid, i, prio, {(x & 1) ? "detect" : "enhance"})).ok());
    pushed.insert(id);
  }
  std::set<std::string> popped;
  auto resident = [](const std::string& m) { return m == "detect"; };
  while (auto e = q.Pop(resident)) EXPECT_TRUE(popped.insert(e->id).second) << e->id;
  EXPECT_EQ(popped, pushed);
}

}  // namespace
}  // namespace fusion::jobs
