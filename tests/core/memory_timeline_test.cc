// MemoryTimeline: the ring buffer behind GET /timeline (daemon/rpc/memory_timeline.h).
#include "observe/memory_timeline.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <sstream>
#include <string>
#include <vector>

#include "observe/metrics_http.h"

namespace fusion {
namespace {

v1::MemoryState State(int64_t unix_ms, uint64_t used, const std::string& tier = "device") {
  v1::MemoryState s;
  s.set_unix_ms(unix_ms);
  s.mutable_device()->set_budget_bytes(1000);
  s.mutable_device()->set_used_bytes(used);
  s.mutable_device()->set_reserved_bytes(7);
  s.mutable_host()->set_used_bytes(50);
  s.mutable_counters()->set_evictions(unix_ms / 10);
  (*s.mutable_counters()->mutable_oom_recovered())["tiled"] = 2;
  (*s.mutable_counters()->mutable_oom_recovered())["failed"] = 5;  // not a recovery
  v1::ModelInfo* m = s.add_models();
  m->set_name("esrgan \"x2\"");
  m->set_tier(tier);
  m->set_bytes(used);
  m->set_host_bytes(3);
  v1::ModelInfo* absent = s.add_models();
  absent->set_name("on-disk");
  absent->set_tier("storage");
  return s;
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

TEST(MemoryTimelineTest, RecordsPerModelTierBytesAndCountersAsJsonLines) {
  MemoryTimeline t(4);
  t.Record(State(100, 40));
  t.Record(State(200, 60, "host"));
  const std::vector<std::string> lines = Lines(t.JsonLines());
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0],
            "{\"unix_ms\":100,\"device_budget\":1000,\"device_used\":40,\"device_reserved\":7,\"host_used\":50,"
            "\"evictions\":10,\"oom_recovered\":2,\"models\":{\"esrgan \\\"x2\\\"\":{\"tier\":\"device\",\"bytes\":40,"
            "\"host_bytes\":3}}}");
  // A model on the host tier holds no device bytes; the storage-tier model is left out.
  EXPECT_NE(lines[1].find("{\"tier\":\"host\",\"bytes\":0,\"host_bytes\":3}"), std::string::npos) << lines[1];
  EXPECT_EQ(lines[1].find("on-disk"), std::string::npos);
}

TEST(MemoryTimelineTest, DropsTheOldestPastCapacityAndFiltersBySince) {
  MemoryTimeline t(3);
  for (int64_t ms = 1; ms <= 5; ++ms) t.Record(State(ms * 100, ms));
  EXPECT_EQ(t.size(), 3u);
  std::vector<std::string> lines = Lines(t.JsonLines());
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0].rfind("{\"unix_ms\":300,", 0), 0u) << lines[0];
  EXPECT_EQ(lines[2].rfind("{\"unix_ms\":500,", 0), 0u) << lines[2];
  lines = Lines(t.JsonLines(/*since_unix_ms=*/400));
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].rfind("{\"unix_ms\":500,", 0), 0u);
}

TEST(MemoryTimelineTest, StartSamplesPeriodicallyUntilStop) {
  MemoryTimeline t(100);
  std::atomic<int64_t> calls{0};
  t.Start(absl::Milliseconds(5), [&]() -> absl::StatusOr<v1::MemoryState> {
    const int64_t n = ++calls;
    if (n == 2) return absl::UnavailableError("snapshot failed");  // skipped
    return State(n, 1);
  });
  while (calls < 6) absl::SleepFor(absl::Milliseconds(1));
  t.Stop();
  const int64_t after_stop = calls;
  absl::SleepFor(absl::Milliseconds(30));
  EXPECT_EQ(calls, after_stop);
  EXPECT_EQ(t.size(), static_cast<size_t>(after_stop - 1));
}

}  // namespace
}  // namespace fusion

namespace fusion {
namespace {

TEST(MemoryTimelineTest, MetricsEndpointServesTheTimelineSinceAGivenTime) {
  MemoryTimeline t(10);
  t.Record(State(100, 1));
  t.Record(State(200, 2));
  auto http = MetricsHttpServer::Start(
      "127.0.0.1:0", [] { return absl::StatusOr<std::string>("# metrics\n"); },
      [&t](int64_t since) { return t.JsonLines(since); });
  ASSERT_TRUE(http.ok()) << http.status();
  httplib::Client c("127.0.0.1", (*http)->port());
  auto all = c.Get("/timeline");
  ASSERT_TRUE(all);
  EXPECT_EQ(all->status, 200);
  EXPECT_EQ(Lines(all->body).size(), 2u);
  auto since = c.Get("/timeline?since=100");
  ASSERT_TRUE(since);
  ASSERT_EQ(Lines(since->body).size(), 1u);
  EXPECT_EQ(since->body.rfind("{\"unix_ms\":200,", 0), 0u);
  auto bad = c.Get("/timeline?since=yesterday");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400);
  EXPECT_NE(bad->body.find("since must be a unix time in ms"), std::string::npos);
}

}  // namespace
}  // namespace fusion
