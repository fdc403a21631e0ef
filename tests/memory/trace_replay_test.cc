// bench/residency_trace's replay rules on a hand-made trace, with golden figures.
#include "bench/trace_replay.h"

#include "gtest/gtest.h"
#include "memory/eviction_policy.h"

namespace fusion::bench {
namespace {

// Schedule (concurrency 2): j1 a, j2 c, j1 b, j2 a; then the clock jumps to t=10 and j3's d
// (300 > budget 250) is refused.
constexpr char kTrace[] =
    R"({"models":[{"name":"a","bytes":100},{"name":"b","bytes":100},{"name":"c","bytes":100},)"
    R"({"name":"d","bytes":300}]})"
    "\n"
    R"({"t":0,"client":"x","job":"j1","stages":[{"model":"a","working_bytes":0},{"model":"b","working_bytes":0}]})"
    "\n"
    R"({"t":0,"client":"y","job":"j2","stages":[{"model":"c","working_bytes":0},{"model":"a","working_bytes":50}]})"
    "\n"
    R"({"t":10,"client":"z","job":"j3","stages":[{"model":"d","working_bytes":0}]})"
    "\n";

ReplayResult ReplayWith(const std::string& policy) {
  auto trace = ParseTrace(kTrace);
  EXPECT_TRUE(trace.ok()) << trace.status();
  auto r = Replay(*trace, {.policy = policy, .budget_bytes = 250});
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : ReplayResult{};
}

TEST(TraceReplayTest, LruEvictsTheModelNeededNextTurn) {
  ReplayResult r = ReplayWith("lru");  // b evicts a, then a evicts c: 4 uploads
  EXPECT_EQ(r.loads, 4u);
  EXPECT_EQ(r.bytes_uploaded, 400u);
  EXPECT_EQ(r.evictions, 2u);
  EXPECT_EQ(r.peak_bytes, 250u);  // last turn: b + a + a's 50 working bytes
  EXPECT_EQ(r.refused, 1u);
}

TEST(TraceReplayTest, LookaheadKeepsTheModelTheRotationUsesNext) {
  ReplayResult r = ReplayWith("lookahead");  // b evicts c (unused), a stays: 3 uploads
  EXPECT_EQ(r.loads, 3u);
  EXPECT_EQ(r.bytes_uploaded, 300u);
  EXPECT_EQ(r.evictions, 1u);
  EXPECT_EQ(r.refused, 1u);
  EXPECT_EQ(ReplayWith("belady").bytes_uploaded, 300u);
}

// One job: b a c b a, models a 50, b 40, c 40, budget 100. At c, lookahead evicts a (farther,
// 50 bytes) and uploads it again; the planner evicts b (40) and uploads that.
constexpr char kSizedTrace[] =
    R"({"models":[{"name":"a","bytes":50},{"name":"b","bytes":40},{"name":"c","bytes":40}]})"
    "\n"
    R"({"t":0,"client":"x","job":"j","stages":[{"model":"b","working_bytes":0},)"
    R"({"model":"a","working_bytes":0},{"model":"c","working_bytes":0},)"
    R"({"model":"b","working_bytes":0},{"model":"a","working_bytes":0}]})"
    "\n";

uint64_t SizedBytes(const std::string& policy) {
  auto trace = ParseTrace(kSizedTrace);
  EXPECT_TRUE(trace.ok()) << trace.status();
  auto r = Replay(*trace, {.policy = policy, .budget_bytes = 100});
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? r->bytes_uploaded : 0;
}

TEST(TraceReplayTest, PlannerUploadsTheOptimumWhereLookaheadDoesNot) {
  EXPECT_EQ(SizedBytes("lookahead"), 180u);
  EXPECT_EQ(SizedBytes("planner"), 170u);
  EXPECT_EQ(SizedBytes("planner-offline"), 170u);
  EXPECT_EQ(SizedBytes("default"), SizedBytes(kDefaultEvictionPolicy));
}

TEST(TraceReplayTest, DumpedRequestsAreTheTurnsWithTheForecastAtEachArrival) {
  auto trace = ParseTrace(kTrace);
  ASSERT_TRUE(trace.ok());
  std::vector<ReplayRequest> requests;
  ASSERT_TRUE(Replay(*trace, {.policy = "lru", .budget_bytes = 250, .requests = &requests}).ok());
  ASSERT_EQ(requests.size(), 5u);  // j1 a, j2 c, j1 b, j2 a, j3 d (refused)
  EXPECT_EQ(requests[1].model, "c");
  EXPECT_EQ(requests[3].working_bytes, 50u);
  EXPECT_TRUE(requests[3].fits);
  EXPECT_FALSE(requests[4].fits);
  // Turn 0 sees j1 and j2 (both arrived at t=0), not j3: a c b a.
  ASSERT_EQ(requests[0].forecast.requests.size(), 4u);
  EXPECT_EQ(requests[0].forecast.requests[2].model, "b");
  EXPECT_TRUE(requests[1].forecast.requests.empty());  // no arrival since
  EXPECT_EQ(requests[4].arrived, 3u);
  ASSERT_EQ(requests[4].forecast.requests.size(), 1u);
}

TEST(TraceReplayTest, MalformedLineIsInvalidArgumentNamingTheLine) {
  auto trace = ParseTrace("{\"models\":[{\"name\":\"a\",\"bytes\":1}]}\n{\"t\":0}\n");
  EXPECT_EQ(trace.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(trace.status().message().find("trace line 2"), absl::string_view::npos);
}

}  // namespace
}  // namespace fusion::bench
