// The SDK's job calls (sync and async) against a real daemon socket with a scripted runner.
#include <gtest/gtest.h>

#include "fusion/client.h"
#include "rpc/server.h"
#include "scripted_runner.h"
#include "temp_dir.h"

namespace fusion {
namespace {

class SdkJobsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config_.socket = dir_.File("f.sock");
    config_.state_dir = dir_.File("state");
    config_.drain_ms = 100;
    auto server = DaemonServer::Create(config_, &runner_);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    client_ = *Client::Connect({.socket = config_.socket, .memfd_threshold_bytes = 1 << 20});
  }
  testing::TempDir dir_;
  DaemonConfig config_;
  jobs::ScriptedRunner runner_;
  std::unique_ptr<DaemonServer> server_;
  std::unique_ptr<Client> client_;
};

TEST_F(SdkJobsTest, SubmitWatchResultRoundTripWithLargeImagesByMemfd) {
  const std::string target(5 << 20, 'T');  // over both thresholds: memfd both ways
  // The job's stages wait until the watch is subscribed (its first event is sent on
  // subscription), so the watcher sees every stage event: WatchJob does not replay the past.
  absl::Notification subscribed;
  runner_.gate = &subscribed;
  auto job = client_->SubmitJob("src", target, {.ratio = 0.7f, .priority = Priority::kHigh});
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->state, JobState::kQueued);
  std::vector<JobEvent> events;
  ASSERT_TRUE(client_->WatchJob(job->job_id, [&](const JobEvent& e) {
                       events.push_back(e);
                       if (!subscribed.HasBeenNotified()) subscribed.Notify();
                     }).ok());
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().kind, JobEvent::Kind::kDone);
  EXPECT_EQ(events.back().job.state, JobState::kSucceeded);
  int finished = 0;
  for (const auto& e : events) finished += e.kind == JobEvent::Kind::kStageFinished;
  EXPECT_EQ(finished, 2);
  auto result = client_->GetJobResult(job->job_id);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_TRUE(result->image_by_memfd);
  EXPECT_EQ(result->image.size(), target.size() + 1);  // reversed target + "3"
  EXPECT_EQ(result->faces_swapped, 1u);
  auto got = client_->GetJob(job->job_id);
  EXPECT_EQ(got->state, JobState::kSucceeded);
  EXPECT_FLOAT_EQ(got->progress, 1.0f);
}

TEST_F(SdkJobsTest, AsyncCallsDeliverThroughFutures) {
  auto submitted = client_->SubmitJobAsync("s", "abc").get();
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  auto watched = client_->WatchJobAsync(submitted->job_id, [](const JobEvent&) {}).get();
  ASSERT_TRUE(watched.ok());
  auto result = client_->GetJobResultAsync(submitted->job_id).get();
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->image, "cba1");
  EXPECT_FALSE(result->image_by_memfd);
  EXPECT_TRUE(client_->GetMemoryStateAsync().get().ok());
  EXPECT_EQ(*client_->HealthAsync().get(), ServingStatus::kServing);
  auto listed = client_->ListJobsAsync({JobState::kSucceeded}).get();
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ(listed->size(), 1u);
  int states = 0;
  EXPECT_TRUE(client_->WatchMemoryAsync(100, [&](const MemoryState&) { return ++states < 2; })
                  .get().ok());
  EXPECT_EQ(states, 2);
  EXPECT_EQ(client_->GetJobAsync("j-nope").get().status().code(), absl::StatusCode::kNotFound);
}

TEST_F(SdkJobsTest, ListCancelAndErrorsKeepTheirCodes) {
  absl::Notification gate;
  runner_.gate = &gate;
  auto a = client_->SubmitJob("s", "t");
  auto b = client_->SubmitJob("s", "t");
  auto c = client_->SubmitJob("s", "t");
  auto cancelled = client_->CancelJob(c->job_id);
  ASSERT_TRUE(cancelled.ok()) << cancelled.status();
  EXPECT_EQ(cancelled->state, JobState::kCancelled);
  auto listed = client_->ListJobs({JobState::kCancelled});
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].job_id, c->job_id);
  EXPECT_EQ(client_->ListJobs({}, 2)->size(), 2u);
  auto early = client_->GetJobResult(a->job_id);
  EXPECT_EQ(early.status().code(), absl::StatusCode::kFailedPrecondition);
  auto bad = client_->SubmitJob("s", "t", {.ratio = 2});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  gate.Notify();
  ASSERT_TRUE(client_->WatchJob(b->job_id, [](const JobEvent&) {}).ok());
}

}  // namespace
}  // namespace fusion
