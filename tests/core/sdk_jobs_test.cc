// The SDK's job calls (sync and async) against a real daemon socket with a scripted runner.
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <vector>

#include "absl/strings/str_cat.h"
#include "fd_protocol.h"

#include "fusion/client.h"
#include "daemon.h"
#include "test_backend.h"
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
    auto server = Daemon::Create(config_, testing::RunnerBackend(&runner_));
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    client_ = *Client::Connect({.socket = config_.socket, .memfd_threshold_bytes = 1 << 20});
  }
  testing::TempDir dir_;
  DaemonConfig config_;
  jobs::ScriptedRunner runner_;
  std::unique_ptr<Daemon> server_;
  std::unique_ptr<Client> client_;
};

TEST_F(SdkJobsTest, SubmitWatchResultRoundTripWithLargeImagesByMemfd) {
  const std::string target(5 << 20, 'T');  // over both thresholds: memfd both ways
  // The job's stages wait until the watch is subscribed (its first event is sent on
  // subscription), so the watcher sees every stage event: WatchJob does not replay the past.
  Notification subscribed;
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
  Notification gate;
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

std::string Pattern(size_t n) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>((i * 131) ^ (i >> 7));
  return s;
}

// Runs one job to its end and returns its result.
absl::StatusOr<JobResult> RunJob(Client& client, const std::string& target) {
  auto job = client.SubmitJob("src", target);
  if (!job.ok()) return job.status();
  if (auto st = client.WatchJob(job->job_id, [](const JobEvent&) {}); !st.ok()) return st;
  return client.GetJobResult(job->job_id);
}

// A new user's report: with the fd socket gone (or refusing), large images went nowhere.
// Now they go inline, both ways, and the result is the same bytes as by memfd.
TEST_F(SdkJobsTest, WithoutTheFdSocketImagesGoInlineWithTheSameResult) {
  const std::string target = Pattern(5 << 20);  // over both thresholds
  auto by_memfd = RunJob(*client_, target);
  ASSERT_TRUE(by_memfd.ok()) << by_memfd.status();
  EXPECT_TRUE(by_memfd->image_by_memfd);
  EXPECT_EQ(client_->transfer_stats().images_by_memfd, 2u);

  std::vector<std::string> notes;
  auto client = *Client::Connect({.socket = config_.socket, .memfd_threshold_bytes = 1 << 20,
                                  .debug_log = [&](const std::string& n) { notes.push_back(n); }});
  ASSERT_EQ(unlink((config_.socket + ".fd").c_str()), 0);
  auto by_inline = RunJob(*client, target);
  ASSERT_TRUE(by_inline.ok()) << by_inline.status();
  EXPECT_FALSE(by_inline->image_by_memfd);
  EXPECT_EQ(by_inline->image.size(), target.size() + 1);
  EXPECT_TRUE(by_inline->image == by_memfd->image);
  const TransferStats t = client->transfer_stats();
  EXPECT_EQ(t.images_by_memfd, 0u);
  EXPECT_EQ(t.images_inline_fallback, 2u);  // the target up, the result down
  EXPECT_EQ(t.bytes_inline, 3u + target.size() + target.size() + 1);
  ASSERT_EQ(notes.size(), 2u);
  EXPECT_NE(notes[0].find(absl::StrCat("fd socket ", config_.socket, ".fd: cannot reach fusiond")),
            std::string::npos) << notes[0];
  EXPECT_NE(notes[0].find("sending the image of 5242880 bytes inline instead"), std::string::npos) << notes[0];
  EXPECT_NE(notes[1].find("fetching the result of 5242881 bytes inline instead"), std::string::npos)
      << notes[1];
}

// One uid's idle connections saturate its share of the fd socket: its own large image still
// goes inline when it fits max_message_bytes, and fails naming the fd socket and the daemon's
// reason when it does not.
TEST_F(SdkJobsTest, ASaturatedFdSocketFallsBackOrSaysWhy) {
  std::vector<int> idle;
  std::string reply;
  for (int i = 0; i < 9 && reply.empty(); ++i) {
    idle.push_back(socket(AF_UNIX, SOCK_STREAM, 0));
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s.fd", config_.socket.c_str());
    ASSERT_EQ(connect(idle.back(), reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  }
  int unused = -1;  // the 9th is refused at once: the 8 before it hold this uid's share
  ASSERT_EQ(fdproto::RecvLine(idle.back(), reply, unused, 5000), 0);
  const std::string why = absl::StrCat("too many fd-socket connections from uid ", getuid());
  ASSERT_NE(reply.find(why), std::string::npos) << reply;

  // (The 8 idle connections keep their slots for 2 s: both submits below take milliseconds.)
  auto fits = client_->SubmitJob("src", Pattern(5 << 20));
  EXPECT_TRUE(fits.ok()) << fits.status();
  EXPECT_EQ(client_->transfer_stats().images_inline_fallback, 1u);
  auto small = *Client::Connect({.socket = config_.socket, .memfd_threshold_bytes = 1 << 20,
                                 .max_message_bytes = 4 << 20});
  auto too_big = small->SubmitJob("src", Pattern(5 << 20));
  EXPECT_EQ(too_big.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(too_big.status().message().find(absl::StrCat("fd socket ", config_.socket, ".fd: ", why)),
            std::string::npos) << too_big.status();
  EXPECT_NE(too_big.status().message().find("cannot go inline instead"), std::string::npos);
  for (int fd : idle) close(fd);
}

}  // namespace
}  // namespace fusion
