// LiveSessionRegistry (rpc/live_sessions.h): what ListLiveSessions, MemoryState.live_sessions
// and the metrics endpoint report of live sessions; and the live metrics (observe/metrics.h).
#include "rpc/live_sessions.h"

#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/clock.h"
#include "observe/metrics.h"

namespace fusion {
namespace {

TEST(NearestRankPercentileTest, IsTheCeilOfPTimesNthSmallest) {
  EXPECT_EQ(NearestRankPercentile({}, 0.5), 0);
  EXPECT_EQ(NearestRankPercentile({7}, 0.99), 7);
  EXPECT_EQ(NearestRankPercentile({4, 1, 3, 2}, 0.5), 2);   // ceil(2) = 2nd
  EXPECT_EQ(NearestRankPercentile({4, 1, 3, 2}, 0.95), 4);  // ceil(3.8) = 4th
  std::vector<double> hundred;
  for (int i = 100; i >= 1; --i) hundred.push_back(i);
  EXPECT_EQ(NearestRankPercentile(hundred, 0.50), 50);
  EXPECT_EQ(NearestRankPercentile(hundred, 0.95), 95);
  EXPECT_EQ(NearestRankPercentile(hundred, 0.99), 99);
}

TEST(LiveSessionRegistryTest, ListsOpenSessionsWithTheirCountsAndLeasesPerUid) {
  LiveSessionRegistry registry;
  const absl::Time t0 = absl::FromUnixMillis(1'700'000'000'000);
  auto a = registry.Open({"live-1", 1000}, t0);
  auto b = registry.Open({"live-2", 2000}, t0 + absl::Seconds(1));
  a->Leased("cpu", {"m1", "m2"}, 300);
  for (int i = 0; i < 4; ++i) a->Received();
  a->Dropped();
  a->Returned(10);
  a->Returned(30);
  a->Returned(20);
  b->Received();

  const auto all = registry.List(std::nullopt);
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].session_id(), "live-1");  // the order they started
  EXPECT_EQ(all[1].session_id(), "live-2");
  const v1::LiveSessionInfo& s = all[0];
  EXPECT_EQ(s.owner_uid(), 1000u);
  EXPECT_EQ(s.started_unix_ms(), 1'700'000'000'000);
  EXPECT_EQ(s.device(), "cpu");
  EXPECT_EQ(std::vector<std::string>(s.models().begin(), s.models().end()), (std::vector<std::string>{"m1", "m2"}));
  EXPECT_EQ(s.model_bytes(), 300u);
  EXPECT_EQ(s.frames_received(), 4u);
  EXPECT_EQ(s.frames_returned(), 3u);
  EXPECT_EQ(s.frames_dropped(), 1u);
  EXPECT_EQ(s.latency().frames(), 3u);
  EXPECT_EQ(s.latency().p50_ms(), 20);
  EXPECT_EQ(s.latency().p95_ms(), 30);
  EXPECT_EQ(s.latency().p99_ms(), 30);
  // Before its leases and its first result: none, and zeros.
  EXPECT_EQ(all[1].models_size(), 0);
  EXPECT_EQ(all[1].latency().frames(), 0u);
  EXPECT_EQ(all[1].latency().p50_ms(), 0);

  const auto of_b = registry.List(2000);
  ASSERT_EQ(of_b.size(), 1u);
  EXPECT_EQ(of_b[0].session_id(), "live-2");
  EXPECT_TRUE(registry.List(3000).empty());
}

TEST(LiveSessionRegistryTest, LatencyIsOverTheLast256Frames) {
  LiveSessionRegistry registry;
  auto e = registry.Open({"live-1", 1}, absl::Now());
  // 100 slow frames, then 256 fast ones: the slow ones have left the window.
  for (int i = 0; i < 100; ++i) e->Returned(1000);
  for (int i = 1; i <= 256; ++i) e->Returned(i);
  const auto s = registry.List(std::nullopt).at(0);
  EXPECT_EQ(s.frames_returned(), 356u);
  EXPECT_EQ(s.latency().frames(), 256u);
  EXPECT_EQ(s.latency().p50_ms(), 128);
  EXPECT_EQ(s.latency().p95_ms(), 244);  // ceil(0.95 * 256) = 244th
  EXPECT_EQ(s.latency().p99_ms(), 254);  // ceil(0.99 * 256) = 254th
}

TEST(LiveSessionRegistryTest, EveryFrameEventGoesToTheHookAndAnEndedSessionIsGone) {
  std::vector<std::pair<LiveSessionRegistry::FrameEvent, double>> events;
  LiveSessionRegistry registry([&](LiveSessionRegistry::FrameEvent e, double ms) { events.emplace_back(e, ms); });
  auto e = registry.Open({"live-1", 1}, absl::Now());
  e->Received();
  e->Dropped();
  e->Returned(12.5);
  using E = LiveSessionRegistry::FrameEvent;
  EXPECT_EQ(events, (std::vector<std::pair<E, double>>{{E::kReceived, 0}, {E::kDropped, 0}, {E::kReturned, 12.5}}));
  e.reset();
  EXPECT_TRUE(registry.List(std::nullopt).empty());
}

// The value of the exposition line that starts with `series` ("name{labels}"), or -1.
double Sample(const std::string& text, const std::string& series) {
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(series + " ", 0) == 0) return std::stod(line.substr(series.size() + 1));
  }
  return -1;
}

TEST(LiveMetricsTest, OpenSessionsPerUidAndTheFramesSinceStart) {
  Metrics metrics;
  for (int i = 0; i < 3; ++i) metrics.OnLiveFrameReceived();
  metrics.OnLiveFrameDropped();
  metrics.OnLiveFrameReturned(3);    // 0.003 s: le 0.005
  metrics.OnLiveFrameReturned(400);  // 0.4 s: le 0.5
  v1::MemoryState state;
  for (uint32_t uid : {7u, 7u, 9u}) {
    v1::LiveSessionInfo* s = state.add_live_sessions();
    s->set_owner_uid(uid);
    s->set_model_bytes(100);
  }
  const std::string text = metrics.Exposition(state);
  EXPECT_EQ(Sample(text, "fusiond_live_sessions{uid=\"7\"}"), 2) << text;
  EXPECT_EQ(Sample(text, "fusiond_live_sessions{uid=\"9\"}"), 1);
  EXPECT_EQ(Sample(text, "fusiond_live_leased_bytes{uid=\"7\"}"), 200);
  EXPECT_EQ(Sample(text, "fusiond_live_frames_received_total"), 3);
  EXPECT_EQ(Sample(text, "fusiond_live_frames_dropped_total"), 1);
  EXPECT_EQ(Sample(text, "fusiond_live_frames_returned_total"), 2);
  EXPECT_EQ(Sample(text, "fusiond_live_frame_seconds_bucket{le=\"0.005\"}"), 1);
  EXPECT_EQ(Sample(text, "fusiond_live_frame_seconds_bucket{le=\"0.25\"}"), 1);
  EXPECT_EQ(Sample(text, "fusiond_live_frame_seconds_bucket{le=\"0.5\"}"), 2);
  EXPECT_EQ(Sample(text, "fusiond_live_frame_seconds_bucket{le=\"+Inf\"}"), 2);
  EXPECT_EQ(Sample(text, "fusiond_live_frame_seconds_count"), 2);
  EXPECT_DOUBLE_EQ(Sample(text, "fusiond_live_frame_seconds_sum"), 0.403);
  // No session open: the families stay, with no sample of the gauges.
  const std::string idle = metrics.Exposition(v1::MemoryState());
  EXPECT_NE(idle.find("# TYPE fusiond_live_sessions gauge"), std::string::npos);
  EXPECT_EQ(idle.find("fusiond_live_sessions{"), std::string::npos);
}

}  // namespace
}  // namespace fusion
