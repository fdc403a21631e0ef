// The job manager's priorities: a running job yields, at its yield points, to a queued job that
// outranks it and to live work (JobManager::ClaimForLive), computes what it would have without
// yielding, and goes on before queued jobs of its priority. A StepRunner job is N steps with a
// yield point before each; its result names every step it ran, in order.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/match.h"
#include "jobs/job_manager.h"
#include "notification.h"
#include "process.h"
#include "temp_dir.h"

namespace fusion::jobs {
namespace {

// A job's target is "<name>:<steps>"; each step sleeps `step_ms`. `gate`, when set, holds the
// job named "gated" before its first step (a long higher-priority job the test ends).
class StepRunner : public JobRunner {
 public:
  absl::StatusOr<JobPlan> Plan(const v1::JobOptions& o, const std::string&, const std::string&) override {
    return JobPlan{.options = o, .target = v1::IMAGE, .stage_models = {"m"}, .result_bound_bytes = 4096};
  }
  absl::StatusOr<Output> Run(const JobRecord&, const std::string&, const std::string& target,
                             Context& ctx) override {
    const auto colon = target.find(':');
    const std::string name = target.substr(0, colon);
    int steps = 0;
    if (!absl::SimpleAtoi(target.substr(colon + 1), &steps)) return absl::InvalidArgumentError(target);
    if (name == "gated") gate.WaitForNotification();
    std::vector<std::string> ran;
    for (int i = 0; i < steps; ++i) {
      ctx.YieldPoint();
      if (ctx.Cancelled()) {
        if (ctx.Interrupted()) ++interrupted;
        return absl::CancelledError(absl::StrCat(name, " cancelled at step ", i));
      }
      const int now = ++executing;
      int seen = max_executing.load();
      while (now > seen && !max_executing.compare_exchange_weak(seen, now)) {}
      {
        MutexLock lock(&mu);
        log.push_back(absl::StrCat(name, ":", i));
        steps_done[name] = i + 1;
      }
      absl::SleepFor(absl::Milliseconds(step_ms));
      --executing;
      ran.push_back(absl::StrCat(i));
    }
    {
      MutexLock lock(&mu);
      log.push_back(absl::StrCat(name, ":end"));
    }
    Output out;
    out.image = absl::StrJoin(ran, ",");
    return out;
  }
  int StepsDone(const std::string& name) {
    MutexLock lock(&mu);
    return steps_done[name];
  }
  // Index in the log of `entry` ("low:end", "normal:0"); -1 when absent.
  int At(const std::string& entry) {
    MutexLock lock(&mu);
    auto it = std::find(log.begin(), log.end(), entry);
    return it == log.end() ? -1 : static_cast<int>(it - log.begin());
  }

  int step_ms = 10;
  Notification gate;
  std::atomic<int> executing{0}, max_executing{0}, interrupted{0};
  Mutex mu;
  std::vector<std::string> log;  // "name:i" as steps start, "name:end"
  std::map<std::string, int> steps_done;
};

std::string Steps(int n) {
  std::vector<std::string> v;
  for (int i = 0; i < n; ++i) v.push_back(absl::StrCat(i));
  return absl::StrJoin(v, ",");
}

class PreemptionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto j = Journal::Open({.path = dir_.File("journal.sqlite3")});
    ASSERT_TRUE(j.ok());
    journal_ = *std::move(j);
  }
  void Start(size_t concurrency) {
    auto m = JobManager::Create({.concurrency = concurrency}, journal_.get(), &runner_, nullptr);
    ASSERT_TRUE(m.ok()) << m.status();
    manager_ = *std::move(m);
  }
  std::string Submit(uid_t uid, Priority priority, const std::string& name, int steps) {
    JobSpec s;
    s.owner_uid = uid;
    s.priority = priority;
    s.source_image = "src";
    s.target_image = absl::StrCat(name, ":", steps);
    auto job = manager_->Submit(std::move(s));
    EXPECT_TRUE(job.ok()) << job.status();
    uids_[job->job_id()] = uid;
    return job->job_id();
  }
  v1::Job Get(const std::string& id) { return *manager_->Get(id, uids_[id]); }
  v1::JobState WaitFinal(const std::string& id) {
    v1::JobState state = v1::JOB_STATE_UNSPECIFIED;
    testing::WaitFor([&] {
      state = Get(id).state();
      return state == v1::SUCCEEDED || state == v1::FAILED || state == v1::CANCELLED;
    }, absl::Seconds(20));
    return state;
  }
  std::string ResultOf(const std::string& id) {
    auto r = manager_->Result(id, uids_[id]);
    return r.ok() ? r->image : r.status().ToString();
  }
  bool WaitSteps(const std::string& name, int n) {
    return testing::WaitFor([&] { return runner_.StepsDone(name) >= n; }, absl::Seconds(20));
  }

  testing::TempDir dir_;
  std::unique_ptr<Journal> journal_;
  StepRunner runner_;
  std::unique_ptr<JobManager> manager_;  // destroyed first: its workers run runner_
  std::map<std::string, uid_t> uids_;
};

TEST_F(PreemptionTest, ALowJobYieldsToAnotherUidsNormalJobAndEndsWithTheSameResult) {
  Start(1);
  const std::string low = Submit(1000, Priority::kLow, "low", 40);
  ASSERT_TRUE(WaitSteps("low", 3));
  const std::string normal = Submit(1001, Priority::kNormal, "normal", 5);
  ASSERT_EQ(WaitFinal(normal), v1::SUCCEEDED);
  EXPECT_EQ(Get(low).state(), v1::RUNNING) << "the normal job waited for the low one";
  ASSERT_EQ(WaitFinal(low), v1::SUCCEEDED);
  EXPECT_EQ(ResultOf(low), Steps(40));  // every step once, in order: nothing lost or redone
  EXPECT_EQ(ResultOf(normal), Steps(5));
  // The low job stopped at a yield point: the normal one ran between two of its steps.
  const int normal_first = runner_.At("normal:0"), normal_end = runner_.At("normal:end");
  EXPECT_GT(normal_first, runner_.At("low:2"));
  EXPECT_LT(normal_end, runner_.At("low:39"));
  for (int i = normal_first; i < normal_end; ++i) EXPECT_FALSE(absl::StartsWith(runner_.log[i], "low")) << i;
  EXPECT_EQ(runner_.max_executing, 1);  // one slot: never both at once
  EXPECT_LT(Get(normal).finished_unix_ms(), Get(low).finished_unix_ms());
}

TEST_F(PreemptionTest, AJobOfEqualPriorityWaitsForTheRunningOne) {
  Start(1);
  const std::string a = Submit(1000, Priority::kLow, "a", 10);
  ASSERT_TRUE(WaitSteps("a", 1));
  const std::string b = Submit(1001, Priority::kLow, "b", 3);
  ASSERT_EQ(WaitFinal(a), v1::SUCCEEDED);
  ASSERT_EQ(WaitFinal(b), v1::SUCCEEDED);
  EXPECT_LT(runner_.At("a:end"), runner_.At("b:0"));
}

TEST_F(PreemptionTest, HighOutranksNormalOutranksLowAndEachGoesOnInTurn) {
  Start(1);
  const std::string low = Submit(1000, Priority::kLow, "low", 30);
  ASSERT_TRUE(WaitSteps("low", 2));
  const std::string normal = Submit(1001, Priority::kNormal, "normal", 30);
  ASSERT_TRUE(WaitSteps("normal", 2));
  const std::string high = Submit(1002, Priority::kHigh, "high", 5);
  for (const std::string& id : {low, normal, high}) ASSERT_EQ(WaitFinal(id), v1::SUCCEEDED);
  EXPECT_LT(runner_.At("high:end"), runner_.At("normal:29"));
  EXPECT_LT(runner_.At("normal:end"), runner_.At("low:29"));
  EXPECT_EQ(ResultOf(low), Steps(30));
  EXPECT_EQ(ResultOf(normal), Steps(30));
  EXPECT_EQ(ResultOf(high), Steps(5));
  EXPECT_EQ(runner_.max_executing, 1);
}

TEST_F(PreemptionTest, AYieldedJobGoesOnBeforeAQueuedJobOfItsPriority) {
  Start(1);
  const std::string first = Submit(1000, Priority::kLow, "first", 10);
  ASSERT_TRUE(WaitSteps("first", 1));
  const std::string normal = Submit(1001, Priority::kNormal, "gated", 2);
  ASSERT_TRUE(testing::WaitFor([&] { return Get(normal).state() == v1::RUNNING; }, absl::Seconds(20)));
  const std::string second = Submit(1002, Priority::kLow, "second", 2);  // another uid, due next
  runner_.gate.Notify();
  for (const std::string& id : {first, normal, second}) ASSERT_EQ(WaitFinal(id), v1::SUCCEEDED);
  EXPECT_LT(runner_.At("gated:end"), runner_.At("first:9"));
  EXPECT_LT(runner_.At("first:end"), runner_.At("second:0"));
}

TEST_F(PreemptionTest, WithTwoSlotsOneLowJobYieldsAndTheOtherRunsOn) {
  Start(2);
  const std::string a = Submit(1000, Priority::kLow, "a", 40);
  const std::string b = Submit(1001, Priority::kLow, "b", 40);
  ASSERT_TRUE(WaitSteps("a", 2) && WaitSteps("b", 2));
  const std::string normal = Submit(1002, Priority::kNormal, "normal", 10);
  ASSERT_EQ(WaitFinal(normal), v1::SUCCEEDED);
  // While the normal job ran, one low job went on: exactly one yielded its slot.
  const int from = runner_.At("normal:0"), to = runner_.At("normal:end");
  std::map<char, int> low_steps;
  {
    MutexLock lock(&runner_.mu);
    for (int i = from; i < to; ++i) ++low_steps[runner_.log[i][0]];
  }
  EXPECT_EQ((low_steps['a'] > 0) + (low_steps['b'] > 0), 1) << low_steps['a'] << " " << low_steps['b'];
  EXPECT_EQ(WaitFinal(a), v1::SUCCEEDED);
  EXPECT_EQ(WaitFinal(b), v1::SUCCEEDED);
  EXPECT_EQ(ResultOf(a), Steps(40));
  EXPECT_EQ(ResultOf(b), Steps(40));
  EXPECT_EQ(runner_.max_executing, 2);
}

TEST_F(PreemptionTest, ALiveClaimHoldsEveryJobAtItsNextYieldPointAndStartsNone) {
  Start(1);
  const std::string high = Submit(1000, Priority::kHigh, "high", 30);
  ASSERT_TRUE(WaitSteps("high", 2));
  JobManager::LiveClaim claim = manager_->ClaimForLive();
  const std::string queued = Submit(1001, Priority::kHigh, "queued", 2);
  ASSERT_TRUE(testing::WaitFor([&] { return absl::StrContains(Get(high).stage(), "yielding"); }, absl::Seconds(5)));
  const int held_at = runner_.StepsDone("high");
  absl::SleepFor(absl::Milliseconds(200));  // 20 steps' time
  EXPECT_EQ(runner_.StepsDone("high"), held_at);
  EXPECT_EQ(Get(queued).state(), v1::QUEUED);
  // A yielded job is no stalled one: the watchdog looks past it.
  EXPECT_TRUE(manager_->CheckProgress(absl::Milliseconds(100)).ok());
  claim.Release();
  ASSERT_EQ(WaitFinal(high), v1::SUCCEEDED);
  ASSERT_EQ(WaitFinal(queued), v1::SUCCEEDED);
  EXPECT_EQ(ResultOf(high), Steps(30));
  EXPECT_LT(runner_.At("high:end"), runner_.At("queued:0"));
}

// GiveWay (a stage's checkpoints, a session's keyframe scans): waits while a claim is alive,
// for at most the bound it is given, and goes on as the claim ends.
TEST_F(PreemptionTest, GivingWayWaitsForTheLiveClaimsForAtMostItsBound) {
  Start(1);
  absl::Time t = absl::Now();
  manager_->GiveWayToLive(absl::Seconds(5));
  EXPECT_LT(absl::Now() - t, absl::Milliseconds(100)) << "no claim: at once";

  JobManager::LiveClaim claim = manager_->ClaimForLive();
  t = absl::Now();
  manager_->GiveWayToLive(absl::Milliseconds(300));
  const absl::Duration bounded = absl::Now() - t;
  EXPECT_GE(bounded, absl::Milliseconds(300));
  EXPECT_LT(bounded, absl::Seconds(2));

  std::thread frame_ends([&claim] {
    absl::SleepFor(absl::Milliseconds(150));
    claim.Release();
  });
  t = absl::Now();
  manager_->GiveWayToLive(absl::Seconds(10));
  const absl::Duration released = absl::Now() - t;
  frame_ends.join();
  EXPECT_GE(released, absl::Milliseconds(100));
  EXPECT_LT(released, absl::Seconds(2)) << "woken by the claim's end, not by the bound";
}

TEST_F(PreemptionTest, ACancelEndsAYieldedJob) {
  Start(1);
  const std::string low = Submit(1000, Priority::kLow, "low", 40);
  ASSERT_TRUE(WaitSteps("low", 1));
  const std::string normal = Submit(1001, Priority::kNormal, "gated", 2);
  ASSERT_TRUE(testing::WaitFor([&] { return absl::StrContains(Get(low).stage(), "yielding"); }, absl::Seconds(5)));
  ASSERT_TRUE(manager_->Cancel(low, 1000).ok());
  EXPECT_EQ(WaitFinal(low), v1::CANCELLED);
  EXPECT_EQ(Get(normal).state(), v1::RUNNING);
  runner_.gate.Notify();
  EXPECT_EQ(WaitFinal(normal), v1::SUCCEEDED);
}

TEST_F(PreemptionTest, ADrainLetsAYieldedJobFinishAfterTheJobItYieldedTo) {
  Start(1);
  const std::string low = Submit(1000, Priority::kLow, "low", 10);
  ASSERT_TRUE(WaitSteps("low", 1));
  const std::string normal = Submit(1001, Priority::kNormal, "gated", 2);
  ASSERT_TRUE(testing::WaitFor([&] { return absl::StrContains(Get(low).stage(), "yielding"); }, absl::Seconds(5)));
  const std::string queued = Submit(1002, Priority::kHigh, "queued", 2);  // never starts: draining
  std::thread release([&] {
    absl::SleepFor(absl::Milliseconds(100));
    runner_.gate.Notify();
  });
  manager_->Shutdown(absl::Now() + absl::Seconds(20));
  release.join();
  EXPECT_EQ(journal_->Get(normal)->state, JobState::SUCCEEDED);
  EXPECT_EQ(journal_->Get(low)->state, JobState::SUCCEEDED);
  EXPECT_EQ(journal_->Get(queued)->state, JobState::QUEUED);
  EXPECT_EQ(runner_.interrupted, 0);
  EXPECT_LT(runner_.At("gated:end"), runner_.At("low:end"));
}

TEST_F(PreemptionTest, ShutdownInterruptsAYieldedJobAndLeavesItRunning) {
  Start(1);
  const std::string low = Submit(1000, Priority::kLow, "low", 40);
  ASSERT_TRUE(WaitSteps("low", 1));
  const std::string normal = Submit(1001, Priority::kNormal, "gated", 2);
  ASSERT_TRUE(testing::WaitFor([&] { return absl::StrContains(Get(low).stage(), "yielding"); }, absl::Seconds(5)));
  std::thread release([&] {
    absl::SleepFor(absl::Milliseconds(100));
    runner_.gate.Notify();  // the gated job's unit ends; the yielded one ends at once
  });
  manager_->Shutdown();
  release.join();
  EXPECT_EQ(runner_.interrupted, 2);  // the yielded job woke to end, the gated one after its gate
  EXPECT_EQ(journal_->Get(low)->state, JobState::RUNNING);
  EXPECT_EQ(journal_->Get(normal)->state, JobState::RUNNING);
}

}  // namespace
}  // namespace fusion::jobs
