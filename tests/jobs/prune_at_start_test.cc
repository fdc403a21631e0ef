// A restart that prunes to a smaller retention serves at once: pruning at start runs in the
// background, in small transactions (the WAL stays within journal_size_limit after each
// checkpoint), and is logged.
#include <sys/stat.h>

#include <atomic>
#include <thread>

#include <gtest/gtest.h>

#include "absl/time/clock.h"
#include "jobs/job_manager.h"
#include "jobs/journal.h"
#include "process.h"
#include "scripted_runner.h"
#include "temp_dir.h"

namespace fusion::jobs {
namespace {

constexpr uint64_t kMiB = 1ull << 20;

int64_t FileSize(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 ? st.st_size : 0;
}

TEST(PruneAtStartTest, ARestartWithASmallerRetentionServesAtOnceAndKeepsTheWalSmall) {
  testing::TempDir dir;
  const std::string path = dir.File("journal.sqlite3");
  constexpr int kJobs = 200;
  constexpr size_t kResult = 1 * kMiB;
  {
    auto journal = *Journal::Open({.path = path, .retention_bytes = 1ull << 30});
    JobSpec spec;
    spec.owner_uid = 1000;
    spec.source_image = "s";
    spec.target_image = "t";
    for (int i = 0; i < kJobs; ++i) {
      auto r = journal->Insert(spec, JobPlan{}, i);
      ASSERT_TRUE(r.ok()) << r.status();
      StoredResult result{"report", std::string(kResult, static_cast<char>('a' + i % 26)), "", 0};
      ASSERT_TRUE(journal->Finish(r->id, JobState::SUCCEEDED, 0, "", result, absl::ToUnixMillis(absl::Now())).ok());
    }
  }
  const int64_t before = FileSize(path);
  std::atomic<bool> done{false};
  std::atomic<int64_t> max_wal{0};
  std::thread sampler([&] {
    while (!done) {
      max_wal = std::max<int64_t>(max_wal, FileSize(path + "-wal"));
      absl::SleepFor(absl::Milliseconds(2));
    }
  });
  ScriptedRunner runner;
  const absl::Time start = absl::Now();
  auto journal = *Journal::Open({.path = path, .retention_bytes = 20 * kMiB});
  auto m = JobManager::Create({.concurrency = 1}, journal.get(), &runner, nullptr);
  ASSERT_TRUE(m.ok()) << m.status();
  auto listed = (*m)->List(1000, {}, 1);  // the first call a client makes
  const absl::Duration first_call = absl::Now() - start;
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_TRUE(testing::WaitFor([&] { return journal->List(std::nullopt, {}, 0)->size() <= 21u; }, absl::Seconds(60)));
  const absl::Duration pruned = absl::Now() - start;
  done = true;
  sampler.join();
  std::printf("restart of a %lld-byte journal (%d results of %zu bytes) with a 20 MiB retention: first call "
              "answered after %lld ms, pruned in %lld ms, WAL at most %lld bytes, journal %lld bytes after\n",
              static_cast<long long>(before), kJobs, kResult, static_cast<long long>(absl::ToInt64Milliseconds(first_call)),
              static_cast<long long>(absl::ToInt64Milliseconds(pruned)), static_cast<long long>(max_wal.load()),
              static_cast<long long>(FileSize(path)));
  EXPECT_LT(first_call, absl::Seconds(2));
  // A batch per call (each of its two deletions up to kPruneBatchBytes and one row more), the
  // free pages given back at 8 MiB (Reclaim), the WAL truncated to its limit after checkpoints.
  EXPECT_LE(max_wal.load(), static_cast<int64_t>(Journal::kReclaimPages * 4096 +
                                                 2 * (JobManager::kPruneBatchBytes + kResult) + Journal::kWalLimitBytes));
  m->reset();
}

}  // namespace
}  // namespace fusion::jobs
