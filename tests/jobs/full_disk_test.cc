// A full state directory: jobs are refused at submit when they do not fit (DiskBudget), and a
// job whose end cannot be recorded still ends and is not run again (EndLedger, Journal).
#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include <gtest/gtest.h>

#include "absl/cleanup/cleanup.h"
#include "jobs/disk_budget.h"
#include "jobs/end_ledger.h"
#include "jobs/job_manager.h"
#include "jobs/journal.h"
#include "notification.h"
#include "process.h"
#include "scripted_runner.h"
#include "temp_dir.h"

namespace fusion::jobs {
namespace {

constexpr uint64_t kMiB = 1ull << 20;

TEST(DiskBudgetTest, AdmitsAgainstFreeSpaceLessTheReserveAndTheHeldBytes) {
  DiskBudget::Space space{.free_bytes = 3 * kMiB, .size_bytes = 8 * kMiB};
  DiskBudget disk("/srv/state", [&] { return absl::StatusOr<DiskBudget::Space>(space); });
  EXPECT_EQ(DiskBudget::ReserveFor(8 * kMiB), 8 * kMiB / 20);  // 5% of a small file system
  EXPECT_EQ(DiskBudget::ReserveFor(1ull << 40), 64 * kMiB);   // at most 64 MiB
  EXPECT_EQ(DiskBudget::JobBytes(100, 200, 300), 600u);
  // 3 MiB free - 409.6 KiB reserve = 2.6 MiB of room.
  auto first = disk.Reserve(2 * kMiB);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(disk.held_bytes(), 2 * kMiB);
  auto second = disk.Reserve(kMiB);  // 0.6 MiB left
  EXPECT_EQ(second.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(second.status().message(),
            "state directory /srv/state is too full for this job: it needs 1.0 MiB (1048576 bytes: source + "
            "target + result bound); 3.0 MiB free, less a reserve of 409.6 KiB and 2.0 MiB held by jobs not yet ended");
  disk.Release(*first);
  EXPECT_EQ(disk.held_bytes(), 0u);
  EXPECT_TRUE(disk.Reserve(kMiB).ok());
  space.free_bytes = 100 * 1024;  // less than the reserve: nothing fits
  EXPECT_EQ(disk.Reserve(1).status().code(), absl::StatusCode::kResourceExhausted);
}

TEST(EndLedgerTest, EntriesSurviveAReopenUntilCleared) {
  testing::TempDir dir;
  const std::string path = dir.File("journal.sqlite3-ends");
  {
    auto ledger = EndLedger::Open(path);
    ASSERT_TRUE(ledger.ok()) << ledger.status();
    struct stat st;
    ASSERT_EQ(::stat(path.c_str(), &st), 0);
    EXPECT_EQ(st.st_size, EndLedger::kSlots * EndLedger::kSlotBytes);  // all of it written now
    EXPECT_EQ(st.st_mode & 0777, 0600u);
    ASSERT_TRUE((*ledger)->Add({"j-1", JobState::FAILED, 8, 111, "journal: disk\nfull"}).ok());
    ASSERT_TRUE((*ledger)->Add({"j-2", JobState::CANCELLED, 1, 222, std::string(2000, 'x')}).ok());
    ASSERT_TRUE((*ledger)->Clear("j-1").ok());
    ASSERT_TRUE((*ledger)->Add({"j-3", JobState::FAILED, 8, 333, "third"}).ok());  // reuses j-1's slot
    ASSERT_EQ(::stat(path.c_str(), &st), 0);
    EXPECT_EQ(st.st_size, EndLedger::kSlots * EndLedger::kSlotBytes);
  }
  auto ledger = EndLedger::Open(path);
  ASSERT_TRUE(ledger.ok());
  ASSERT_EQ((*ledger)->entries().size(), 2u);
  const EndLedger::Entry& third = (*ledger)->entries()[0];  // slot order
  EXPECT_EQ(third.id, "j-3");
  EXPECT_EQ(third.finished_unix_ms, 333);
  EXPECT_EQ(third.error_message, "third");
  const EndLedger::Entry& second = (*ledger)->entries()[1];
  EXPECT_EQ(second.id, "j-2");
  EXPECT_EQ(second.state, JobState::CANCELLED);
  EXPECT_EQ(second.error_code, 1);
  EXPECT_EQ(second.error_message.size(), EndLedger::kSlotBytes - std::string("j-2\t5\t1\t222\t\n").size());
  for (int i = 0; i < EndLedger::kSlots - 2; ++i) ASSERT_TRUE((*ledger)->Add({absl::StrCat("j-x", i)}).ok());
  EXPECT_EQ((*ledger)->Add({"j-full"}).code(), absl::StatusCode::kResourceExhausted);
}

JobSpec Spec(std::string target) {
  JobSpec s;
  s.owner_uid = 1000;
  s.source_image = "src";
  s.target_image = std::move(target);
  return s;
}

// Fills the file system of `path` with one file, until ENOSPC.
void Fill(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  ASSERT_GE(fd, 0);
  const std::string block(4096, 'f');
  while (::write(fd, block.data(), block.size()) > 0) {}
  EXPECT_EQ(errno, ENOSPC);
  ::close(fd);
}

v1::JobState WaitFinal(JobManager& m, const std::string& id) {
  v1::JobState state = v1::JOB_STATE_UNSPECIFIED;
  testing::WaitFor([&] {
    state = m.Get(id, 1000)->state();
    return state == v1::SUCCEEDED || state == v1::FAILED || state == v1::CANCELLED;
  }, absl::Seconds(20));
  return state;
}

// On an 8 MB tmpfs a job must not stay QUEUED at position 0 once the journal cannot record its
// end: every job still ends, a cancel takes effect, a waiting client gets the end, and a restart
// does not run the ended jobs again.
TEST(FullDiskTest, JobsWhoseEndCannotBeRecordedStillEndAndDoNotRunAgain) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to mount a small tmpfs";
  testing::TempDir dir;
  const std::string state = dir.File("state");
  ASSERT_EQ(::mkdir(state.c_str(), 0700), 0);
  if (::mount("tmpfs", state.c_str(), "tmpfs", 0, "size=4m") != 0) GTEST_SKIP() << "mount: " << std::strerror(errno);
  absl::Cleanup unmount = [&] { ::umount2(state.c_str(), MNT_DETACH); };
  const std::string filler = state + "/filler";

  ScriptedRunner runner;
  Notification gate;
  runner.gate = &gate;
  DiskBudget disk(state, DiskBudget::StatvfsProbe(state));
  auto journal = *Journal::Open({.path = state + "/journal.sqlite3", .results_dir = state + "/results", .inputs_dir = state + "/inputs"});
  auto m = *JobManager::Create({.concurrency = 1, .disk = &disk}, journal.get(), &runner, nullptr);
  const std::string a = m->Submit(Spec(std::string(256 << 10, 'a')))->job_id();  // runs, waits at the gate
  const std::string b = m->Submit(Spec("b"))->job_id();                          // queued behind it
  const std::string c = m->Submit(Spec("c"))->job_id();                          // cancelled while queued
  ASSERT_TRUE(testing::WaitFor([&] { return runner.running == 1; }, absl::Seconds(10)));
  EXPECT_GT(disk.held_bytes(), kMiB / 2);  // a: 3 + 256 KiB + 256 KiB + 32
  Notification a_done;
  v1::JobState a_watched = v1::JOB_STATE_UNSPECIFIED;
  ASSERT_TRUE(m->Watch(a, 1000, [&](const v1::JobEvent& e) {
                 if (!e.has_done()) return;
                 a_watched = e.done().job().state();
                 a_done.Notify();
               }).ok());

  Fill(filler);
  auto cancelled = m->Cancel(c, 1000);
  ASSERT_TRUE(cancelled.ok()) << cancelled.status();
  EXPECT_EQ(cancelled->state(), v1::CANCELLED);
  auto refused = m->Submit(Spec("d"));
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(refused.status().message().find("state directory " + state + " is too full"), absl::string_view::npos)
      << refused.status();
  gate.Notify();
  ASSERT_TRUE(a_done.WaitForNotificationWithTimeout(absl::Seconds(20)));
  EXPECT_EQ(a_watched, v1::FAILED);
  auto a_job = m->Get(a, 1000);
  EXPECT_EQ(a_job->state(), v1::FAILED);
  EXPECT_NE(a_job->error_message().find("(the state directory " + state + " is full)"), std::string::npos)
      << a_job->error_message();
  EXPECT_EQ(WaitFinal(*m, b), v1::FAILED);
  EXPECT_NE(m->Get(b, 1000)->error_message().find(state), std::string::npos) << m->Get(b, 1000)->error_message();
  EXPECT_EQ(m->Cancel(b, 1000).status().code(), absl::StatusCode::kFailedPrecondition);  // ended
  EXPECT_GE(journal->UnrecordedEnds(), 2u);  // the ends the database could not take
  // Released as the jobs ended (by the worker, just after the end is recorded).
  EXPECT_TRUE(testing::WaitFor([&] { return disk.held_bytes() == 0; }, absl::Seconds(5))) << disk.held_bytes();
  auto listed = m->List(1000, {JobState::QUEUED, JobState::RUNNING}, 0);
  ASSERT_TRUE(listed.ok());
  EXPECT_TRUE(listed->empty()) << listed->size() << " jobs still QUEUED or RUNNING";

  // A restart, once some room is back: nothing runs again, the ends reach the database.
  m.reset();
  journal.reset();
  ASSERT_EQ(::truncate(filler.c_str(), 0), 0);
  journal = *Journal::Open({.path = state + "/journal.sqlite3", .results_dir = state + "/results", .inputs_dir = state + "/inputs"});
  EXPECT_EQ(journal->UnrecordedEnds(), 0u);
  const size_t runs = runner.start_order.size();
  m = *JobManager::Create({.concurrency = 1, .disk = &disk}, journal.get(), &runner, nullptr);
  const std::string e = m->Submit(Spec("grace"))->job_id();
  EXPECT_EQ(WaitFinal(*m, e), v1::SUCCEEDED);
  EXPECT_EQ(runner.start_order.size(), runs + 1);  // e only: a, b and c did not run again
  EXPECT_EQ(journal->Get(a)->state, JobState::FAILED);
  EXPECT_EQ(journal->Get(b)->state, JobState::FAILED);
  EXPECT_EQ(journal->Get(c)->state, JobState::CANCELLED);
  m.reset();
  journal.reset();
}

}  // namespace
}  // namespace fusion::jobs
