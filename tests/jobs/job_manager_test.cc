#include "jobs/job_manager.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <set>
#include <thread>
#include <utility>

#include "notification.h"
#include "process.h"
#include "scripted_runner.h"
#include "temp_dir.h"

namespace fusion::jobs {
namespace {

JobSpec Spec(uid_t uid, std::string target = "target", float ratio = 0.5f) {
  JobSpec s;
  s.owner_uid = uid;
  s.options.set_ratio(ratio);
  s.source_image = "src";
  s.target_image = std::move(target);
  return s;
}

class JobManagerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto j = Journal::Open({.path = dir_.File("journal.sqlite3")});
    ASSERT_TRUE(j.ok());
    journal_ = *std::move(j);
  }
  std::unique_ptr<JobManager> Manager(size_t concurrency = 2) {
    auto m = JobManager::Create({.concurrency = concurrency}, journal_.get(), &runner_, nullptr);
    EXPECT_TRUE(m.ok()) << m.status();
    return *std::move(m);
  }
  v1::JobState WaitFinal(JobManager& m, const std::string& id, uid_t uid) {
    v1::JobState state = v1::JOB_STATE_UNSPECIFIED;
    testing::WaitFor([&] {
      state = m.Get(id, uid)->state();
      return state == v1::SUCCEEDED || state == v1::FAILED || state == v1::CANCELLED;
    }, absl::Seconds(20));
    return state;
  }
  testing::TempDir dir_;
  std::unique_ptr<Journal> journal_;
  ScriptedRunner runner_;
};

TEST_F(JobManagerTest, SubmittedJobSucceedsWithResultAndStreamsEvents) {
  auto m = Manager();
  runner_.stage_ms = 50;
  auto job = m->Submit(Spec(1000, "abc"));
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->state(), v1::QUEUED);
  EXPECT_EQ(job->owner_uid(), 1000u);
  Mutex mu;
  std::vector<v1::JobEvent> events;
  Notification done;
  auto handle = m->Watch(job->job_id(), 1000, [&](const v1::JobEvent& e) {
    MutexLock lock(&mu);
    events.push_back(e);
    if (e.has_done()) done.Notify();
  });
  ASSERT_TRUE(handle.ok()) << handle.status();
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(20)));
  MutexLock lock(&mu);
  ASSERT_GE(events.size(), 2u);
  EXPECT_EQ(events.back().done().job().state(), v1::SUCCEEDED);
  EXPECT_EQ(std::count_if(events.begin(), events.end(), [](auto& e) { return e.has_done(); }), 1);
  EXPECT_TRUE(std::any_of(events.begin(), events.end(), [](auto& e) {
    return e.has_stage_finished() && e.stage_finished().report().name() == "generate";
  }));
  auto result = m->Result(job->job_id(), 1000);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->image, "cba3");
  v1::JobResult report;
  ASSERT_TRUE(report.ParseFromString(result->report));
  EXPECT_EQ(report.job_id(), job->job_id());
  EXPECT_EQ(report.faces_swapped(), 1u);
}

// A video's frames take the progress on from what its first stages showed, never back.
TEST_F(JobManagerTest, ProgressNeverGoesBackWhenTheFramesStart) {
  auto m = Manager();
  runner_.frames = 10;
  Notification watching;  // the job's stages wait for the watch: it sees every event
  runner_.gate = &watching;
  auto job = m->Submit(Spec(1000, "abc"));
  ASSERT_TRUE(job.ok()) << job.status();
  Mutex mu;
  std::vector<float> progress;  // of every event that has one, in order
  Notification done;
  bool snapshot = true;  // Watch's first call: the job's state then (Queued, or its stage at 0)
  auto handle = m->Watch(job->job_id(), 1000, [&](const v1::JobEvent& e) {
    MutexLock lock(&mu);
    if (std::exchange(snapshot, false)) return;
    if (e.has_stage_started()) progress.push_back(e.stage_started().progress());
    if (e.has_stage_finished()) progress.push_back(e.stage_finished().progress());
    if (e.has_frames()) progress.push_back(e.frames().progress());
    if (e.has_done()) done.Notify();
  });
  ASSERT_TRUE(handle.ok()) << handle.status();
  watching.Notify();
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(20)));
  MutexLock lock(&mu);
  ASSERT_EQ(progress.size(), 4u + 10u);  // 2 stages started and finished, 10 frames
  EXPECT_FLOAT_EQ(progress[3], 0.5f);    // the stages' last
  EXPECT_FLOAT_EQ(progress[4], 0.5f);    // frame 1 of 10, not 0.1
  EXPECT_FLOAT_EQ(progress[9], 0.6f);    // frame 6 of 10 passes it
  EXPECT_FLOAT_EQ(progress.back(), 1.0f);
  EXPECT_TRUE(std::is_sorted(progress.begin() + 3, progress.end()));
}

TEST_F(JobManagerTest, AnotherUidGetsNotFoundEverywhere) {
  auto m = Manager();
  auto job = m->Submit(Spec(1000));
  ASSERT_TRUE(job.ok());
  const std::string id = job->job_id();
  EXPECT_EQ(m->Get(id, 1001).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(m->Cancel(id, 1001).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(m->Result(id, 1001).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(m->Watch(id, 1001, [](const v1::JobEvent&) {}).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_TRUE(m->List(1001, {}, 0)->empty());
  EXPECT_EQ(WaitFinal(*m, id, 1000), v1::SUCCEEDED);
  EXPECT_EQ(m->List(1000, {}, 0)->size(), 1u);
}

TEST_F(JobManagerTest, InvalidOptionsAreRefusedAndNothingIsJournaled) {
  auto m = Manager();
  auto job = m->Submit(Spec(1, "t", 1.5f));
  EXPECT_EQ(job.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(job.status().message().find("ratio"), std::string::npos);
  EXPECT_TRUE(journal_->List(std::nullopt, {}, 0)->empty());
}

TEST_F(JobManagerTest, ImagesTheRunnerRefusesAreRefusedAtSubmitAndNothingIsJournaled) {
  auto m = Manager();
  auto bomb = m->Submit(Spec(1000, "bomb"));
  EXPECT_EQ(bomb.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bomb.status().message(), "target image: a bomb (scripted)");
  EXPECT_TRUE(m->List(1000, {}, 10)->empty());
  MutexLock lock(&runner_.mu);
  EXPECT_TRUE(runner_.start_order.empty());
}

TEST_F(JobManagerTest, FailedRunKeepsTheStatusAndResultIsFailedPrecondition) {
  auto m = Manager();
  auto job = m->Submit(Spec(1, "fail"));
  ASSERT_EQ(WaitFinal(*m, job->job_id(), 1), v1::FAILED);
  auto got = m->Get(job->job_id(), 1);
  EXPECT_EQ(got->error_code(), static_cast<int>(absl::StatusCode::kFailedPrecondition));
  EXPECT_EQ(got->error_message(), "detect: no face in the target");
  EXPECT_EQ(got->error_stage(), "detect");  // the status's own stage, not "generate" it ran last
  EXPECT_EQ(m->Result(job->job_id(), 1).status().code(), absl::StatusCode::kFailedPrecondition);
  // The job's own error says why there is no result.
  EXPECT_EQ(m->Result(job->job_id(), 1).status().message(),
            "job '" + job->job_id() + "' is FAILED, not SUCCEEDED: detect: no face in the target");
}

// An operator (the service lets admins) lists every uid's jobs and cancels another uid's
// running job; without the override that uid's job stays NOT_FOUND.
TEST_F(JobManagerTest, AnOperatorListsEveryUidsJobsAndCancelsOneRunning) {
  Notification gate;
  runner_.gate = &gate;
  auto m = Manager(1);
  const std::string running = m->Submit(Spec(1000, "a"))->job_id();
  const std::string queued = m->Submit(Spec(1001, "b"))->job_id();
  ASSERT_TRUE(testing::WaitFor([&] { return runner_.running == 1; }, absl::Seconds(10)));
  auto all = m->ListAll({}, 0);
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[0].job_id(), queued);  // newest first, each with its owner
  EXPECT_EQ((*all)[0].owner_uid(), 1001u);
  EXPECT_EQ((*all)[1].owner_uid(), 1000u);
  EXPECT_EQ(m->Cancel(running, 0).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(m->Cancel(queued, 0, /*operator_override=*/true)->state(), v1::CANCELLED);
  auto cancelled = m->Cancel(running, 0, /*operator_override=*/true);
  ASSERT_TRUE(cancelled.ok()) << cancelled.status();
  EXPECT_EQ(cancelled->owner_uid(), 1000u);
  EXPECT_TRUE(cancelled->cancel_requested());
  EXPECT_EQ(WaitFinal(*m, running, 1000), v1::CANCELLED);
  EXPECT_EQ(m->Cancel("j-0000000000000000", 0, true).status().code(), absl::StatusCode::kNotFound);
  gate.Notify();
}

TEST_F(JobManagerTest, CancelStopsQueuedAtOnceAndRunningAtTheNextStage) {
  Notification gate;
  runner_.gate = &gate;
  auto m = Manager(/*concurrency=*/1);
  auto first = m->Submit(Spec(1));
  auto second = m->Submit(Spec(1));
  ASSERT_TRUE(testing::WaitFor([&] { return m->Get(first->job_id(), 1)->state() == v1::RUNNING; },
                               absl::Seconds(10)));
  auto queued = m->Cancel(second->job_id(), 1);
  ASSERT_TRUE(queued.ok()) << queued.status();
  EXPECT_EQ(queued->state(), v1::CANCELLED);
  ASSERT_TRUE(m->Cancel(first->job_id(), 1).ok());
  EXPECT_EQ(WaitFinal(*m, first->job_id(), 1), v1::CANCELLED);
  EXPECT_EQ(m->Cancel(first->job_id(), 1).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(runner_.completed.empty());
  EXPECT_EQ(m->CountsByUid()[1].running, 0u);
}

TEST_F(JobManagerTest, RunningJobCancelledInsideAStageSaysCancelRequestedAndEndsBeforeTheStageEnds) {
  Notification hold;  // the first unit of "detect" runs until the cancel has been seen
  runner_.hold = &hold;
  runner_.units = 1000;  // 1 s per stage unless cancelled
  runner_.stage_ms = 1;
  auto m = Manager(1);
  const std::string id = m->Submit(Spec(1))->job_id();
  ASSERT_TRUE(testing::WaitFor([&] { return m->Get(id, 1)->stage() == "detect"; }, absl::Seconds(10)));
  auto asked = m->Cancel(id, 1);
  ASSERT_TRUE(asked.ok()) << asked.status();
  EXPECT_EQ(asked->state(), v1::RUNNING);
  EXPECT_TRUE(asked->cancel_requested());
  EXPECT_TRUE(m->Get(id, 1)->cancel_requested());
  hold.Notify();
  ASSERT_EQ(WaitFinal(*m, id, 1), v1::CANCELLED);
  auto done = m->Get(id, 1);
  EXPECT_EQ(done->error_message(), "job cancelled during stage 'detect' (unit 2 of 1000)");
  EXPECT_EQ(done->error_stage(), "detect");  // the stage it was in: the status names none
  EXPECT_FALSE(done->cancel_requested());  // only while RUNNING
  EXPECT_EQ(runner_.units_run.load(), 1);  // of the 2000 the job had
  EXPECT_EQ(runner_.interrupted_seen.load(), 0);  // the owner's cancel: nothing to keep for a rerun
  EXPECT_TRUE(runner_.completed.empty());
}

TEST_F(JobManagerTest, ShutdownLetsRunningJobsFinishUntilTheDeadlineAndStartsNoQueuedJob) {
  Notification gate;
  runner_.gate = &gate;
  auto m = Manager(1);
  const std::string first = m->Submit(Spec(1))->job_id();
  ASSERT_TRUE(testing::WaitFor([&] { return runner_.running == 1; }, absl::Seconds(10)));
  const std::string second = m->Submit(Spec(1))->job_id();
  std::thread stopper([&] { m->Shutdown(absl::Now() + absl::Seconds(30)); });
  // Draining: new jobs are refused while the running one may still finish.
  ASSERT_TRUE(testing::WaitFor([&] { return absl::IsUnavailable(m->Submit(Spec(1)).status()); },
                               absl::Seconds(10)));
  gate.Notify();
  stopper.join();
  EXPECT_EQ(journal_->Get(first)->state, JobState::SUCCEEDED);
  EXPECT_EQ(journal_->Get(second)->state, JobState::QUEUED);
  MutexLock lock(&runner_.mu);
  EXPECT_EQ(runner_.start_order, std::vector<std::string>{first});
}

TEST_F(JobManagerTest, ShutdownPastTheDeadlineInterruptsTheRunningStageAndTheNextStartRunsItOnce) {
  runner_.units = 100000;  // 100 s per stage: only an interruption inside the stage ends it
  runner_.stage_ms = 1;
  std::string id, queued;
  {
    auto m = Manager(1);
    id = m->Submit(Spec(1))->job_id();
    ASSERT_TRUE(testing::WaitFor([&] { return runner_.units_run > 0; }, absl::Seconds(10)));
    queued = m->Submit(Spec(2))->job_id();
    m->Shutdown(absl::Now());  // the deadline has passed: interrupt at the next unit
    EXPECT_EQ(m->Get(id, 1)->state(), v1::RUNNING);
  }
  EXPECT_LT(runner_.units_run.load(), runner_.units);
  EXPECT_EQ(runner_.interrupted_seen.load(), 1);  // Context::Interrupted: a video keeps its segments
  // Interrupted, not cancelled: the journal still says RUNNING (no error), so it runs again.
  auto record = journal_->Get(id);
  EXPECT_EQ(record->state, JobState::RUNNING);
  EXPECT_EQ(record->error_code, 0);
  EXPECT_EQ(journal_->Get(queued)->state, JobState::QUEUED);
  runner_.units = 2;
  auto m = Manager(1);
  EXPECT_EQ(WaitFinal(*m, id, 1), v1::SUCCEEDED);
  EXPECT_EQ(WaitFinal(*m, queued, 2), v1::SUCCEEDED);
  MutexLock lock(&runner_.mu);
  EXPECT_EQ(runner_.completed[id], 1);
  EXPECT_EQ(runner_.completed[queued], 1);
}

TEST_F(JobManagerTest, ConcurrencyLimitHoldsAndUidsAlternate) {
  Notification gate;
  runner_.gate = &gate;
  auto m = Manager(/*concurrency=*/1);
  std::vector<std::string> a, b;
  // The first job holds the only worker (at the gate) while the rest queue up.
  a.push_back(m->Submit(Spec(1))->job_id());
  ASSERT_TRUE(testing::WaitFor([&] { return runner_.running == 1; }, absl::Seconds(10)));
  for (int i = 0; i < 3; ++i) a.push_back(m->Submit(Spec(1))->job_id());
  for (int i = 0; i < 3; ++i) b.push_back(m->Submit(Spec(2))->job_id());
  EXPECT_EQ(m->CountsByUid()[1].queued, 3u);
  EXPECT_EQ(m->CountsByUid()[2].queued, 3u);
  EXPECT_EQ(m->CountsByUid()[1].running, 1u);
  gate.Notify();
  for (const auto& id : b) ASSERT_EQ(WaitFinal(*m, id, 2), v1::SUCCEEDED);
  for (const auto& id : a) ASSERT_EQ(WaitFinal(*m, id, 1), v1::SUCCEEDED);
  EXPECT_EQ(runner_.max_running, 1);
  MutexLock lock(&runner_.mu);
  EXPECT_EQ(runner_.start_order,
            (std::vector<std::string>{a[0], a[1], b[0], a[2], b[1], a[3], b[2]}));
}

TEST_F(JobManagerTest, JobsInterruptedByShutdownRunAgainExactlyOnceAfterRestart) {
  Notification gate;
  runner_.gate = &gate;
  std::vector<std::string> ids;
  {
    auto m = Manager(2);
    for (int i = 0; i < 6; ++i) ids.push_back(m->Submit(Spec(1 + i % 2))->job_id());
    ASSERT_TRUE(testing::WaitFor([&] { return runner_.running == 2; }, absl::Seconds(10)));
    m->Shutdown();  // two jobs are RUNNING: they stay so in the journal
    EXPECT_EQ(m->Submit(Spec(1)).status().code(), absl::StatusCode::kUnavailable);
  }
  EXPECT_EQ(journal_->List(std::nullopt, {JobState::RUNNING}, 0)->size(), 2u);
  gate.Notify();
  auto m = Manager(2);
  for (size_t i = 0; i < ids.size(); ++i) {
    EXPECT_EQ(WaitFinal(*m, ids[i], 1 + i % 2), v1::SUCCEEDED) << ids[i];
  }
  MutexLock lock(&runner_.mu);
  for (const auto& id : ids) EXPECT_EQ(runner_.completed[id], 1) << id;
}

TEST_F(JobManagerTest, ResultsBeyondTheRetentionBytesAreRemovedOldestFirst) {
  journal_.reset();
  journal_ = *Journal::Open({.path = dir_.File("retained.sqlite3"), .retention_bytes = 25});
  auto m = Manager(1);
  std::vector<std::string> ids;
  for (int i = 0; i < 4; ++i) {  // each result is 12 bytes (the target reversed + "3")
    ids.push_back(m->Submit(Spec(1, "target-" + std::to_string(1000 + i)))->job_id());
    ASSERT_EQ(WaitFinal(*m, ids.back(), 1), v1::SUCCEEDED);
  }
  // 25 bytes keep the two newest results; the two oldest jobs are gone. The worker prunes after
  // recording the last job's end (which WaitFinal saw), so ids[1] may go a moment later.
  EXPECT_TRUE(testing::WaitFor(
      [&] { return absl::IsNotFound(m->Get(ids[1], 1).status()); }, absl::Seconds(10)));
  EXPECT_EQ(m->Get(ids[0], 1).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(m->Get(ids[1], 1).status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(m->Result(ids[2], 1).ok());
  EXPECT_TRUE(m->Result(ids[3], 1).ok());
}

TEST(RemainingStageModels, AnImageDropsItsFinishedStagesAVideoKeepsEveryStageForItsNextFrames) {
  const JobPlan image{.target = v1::IMAGE, .stage_models = {"detector", "landmarks", "generator"}};
  EXPECT_EQ(RemainingStageModels(image, 0), image.stage_models);
  EXPECT_EQ(RemainingStageModels(image, 2), (std::vector<std::string>{"generator"}));
  EXPECT_TRUE(RemainingStageModels(image, 5).empty());
  JobPlan video = image;
  video.target = v1::VIDEO;
  EXPECT_EQ(RemainingStageModels(video, 2), video.stage_models);
  EXPECT_EQ(RemainingStageModels(video, 5), video.stage_models);
}

// The pipeline's stages against its plan: detect, landmarks, encode (skipped: the source's
// analysis is cached), generate, the host blend (no model), score (the encoder again).
TEST(StagesDoneAfter, FollowsTheStagesModelsNotTheCountOfStageEvents) {
  const JobPlan plan{.target = v1::IMAGE,
                     .stage_models = {"detector", "landmarks", "encoder", "generator", "encoder"}};
  size_t done = 0;
  done = StagesDoneAfter(plan, done, "detector");
  EXPECT_EQ(done, 1u);
  done = StagesDoneAfter(plan, done, "landmarks");
  EXPECT_EQ(done, 2u);
  done = StagesDoneAfter(plan, done, "generator");  // the encode was skipped: passed over
  EXPECT_EQ(done, 4u);
  EXPECT_EQ(RemainingStageModels(plan, done), (std::vector<std::string>{"encoder"}));
  done = StagesDoneAfter(plan, done, "");  // the host blend: the score's encoder still comes
  EXPECT_EQ(done, 4u);
  EXPECT_EQ(StagesDoneAfter(plan, done, "enhancer"), 4u);  // not in the rest of the plan
  done = StagesDoneAfter(plan, done, "encoder");
  EXPECT_EQ(done, 5u);
  EXPECT_TRUE(RemainingStageModels(plan, done).empty());
  // Entries of one model back to back run as one stage.
  const JobPlan twice{.target = v1::IMAGE, .stage_models = {"a", "a", "b"}};
  EXPECT_EQ(StagesDoneAfter(twice, 0, "a"), 2u);
}

TEST_F(JobManagerTest, RunningJobsRemainingStagesAdvanceByTheFinishedStagesModel) {
  Notification gate;
  runner_.gate = &gate;
  runner_.hold_after_detect = true;
  auto m = Manager(1);
  auto job = m->Submit(Spec(1));
  ASSERT_TRUE(job.ok());
  gate.Notify();
  // The runner holds after its detect stage finished (a model stage) and a host stage.
  ASSERT_TRUE(runner_.after_detect.WaitForNotificationWithTimeout(absl::Seconds(20)));
  EXPECT_EQ(m->UpcomingStages(10), (std::vector<std::vector<std::string>>{{"generator"}}));
  runner_.release_after_detect.Notify();
  EXPECT_EQ(WaitFinal(*m, job->job_id(), 1), v1::SUCCEEDED);
}

TEST_F(JobManagerTest, UpcomingStagesListRunningRemaindersThenQueuedJobs) {
  Notification gate;
  runner_.gate = &gate;
  auto m = Manager(1);
  auto first = m->Submit(Spec(1));
  ASSERT_TRUE(testing::WaitFor([&] { return runner_.running == 1; }, absl::Seconds(10)));
  auto second = m->Submit(Spec(2));
  auto up = m->UpcomingStages(10);
  ASSERT_EQ(up.size(), 2u);
  EXPECT_LE(up[0].size(), 2u);  // the running job's remaining stages
  EXPECT_EQ(up[1], (std::vector<std::string>{"detector", "generator"}));
  ASSERT_TRUE(m->Cancel(first->job_id(), 1).ok());
  ASSERT_TRUE(m->Cancel(second->job_id(), 2).ok());
}

// Each job runs until its target's notification (or cancellation).
class GatedRunner : public JobRunner {
 public:
  absl::StatusOr<JobPlan> Plan(const v1::JobOptions& o, const std::string&, const std::string&) override {
    return JobPlan{.options = o, .target = v1::IMAGE, .stage_models = {"model"}, .result_bound_bytes = 0};  // no image
  }
  absl::StatusOr<Output> Run(const JobRecord&, const std::string&, const std::string& target,
                             Context& ctx) override {
    ++running;
    Notification& release = target == "a" ? release_a : release_b;
    while (!release.WaitForNotificationWithTimeout(absl::Milliseconds(1)) && !ctx.Cancelled()) {}
    --running;
    return Output{};
  }
  Notification release_a, release_b;
  std::atomic<int> running{0};
};

TEST_F(JobManagerTest, OnIdleRunsAfterTheLastRunningJobEndsNotWhileAnotherRuns) {
  GatedRunner runner;
  std::atomic<int> idle_calls{0};
  auto m = JobManager::Create({.concurrency = 2, .on_idle = [&] { ++idle_calls; }}, journal_.get(), &runner,
                              nullptr);
  ASSERT_TRUE(m.ok()) << m.status();
  const std::string a = (*m)->Submit(Spec(1, "a"))->job_id(), b = (*m)->Submit(Spec(2, "b"))->job_id();
  ASSERT_TRUE(testing::WaitFor([&] { return runner.running == 2; }, absl::Seconds(10)));
  runner.release_b.Notify();
  EXPECT_EQ(WaitFinal(**m, b, 2), v1::SUCCEEDED);
  absl::SleepFor(absl::Milliseconds(100));
  EXPECT_EQ(idle_calls, 0);  // job a still runs
  runner.release_a.Notify();
  EXPECT_EQ(WaitFinal(**m, a, 1), v1::SUCCEEDED);
  ASSERT_TRUE(testing::WaitFor([&] { return idle_calls == 1; }, absl::Seconds(10)));
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_EQ(idle_calls, 1);
}

}  // namespace
}  // namespace fusion::jobs
