#include "jobs/journal.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "temp_dir.h"

namespace fusion::jobs {
namespace {

JobSpec Spec(uid_t uid, size_t image_bytes = 1000) {
  JobSpec s;
  s.owner_uid = uid;
  s.priority = Priority::kHigh;
  s.options.set_ratio(0.25f);
  s.source_image = std::string(image_bytes, 's');
  s.target_image = std::string(image_bytes, 't');
  return s;
}

// The plan Insert journals with a spec (the runner's, at submit).
JobPlan TestPlan() {
  JobPlan p;
  p.options.set_ratio(0.25f);
  p.target = v1::VIDEO;
  p.stage_models = {"tiny_face_detector", "face_landmark_68", "generator"};
  return p;
}

class JournalTest : public ::testing::Test {
 protected:
  std::unique_ptr<Journal> Open(Journal::Options o = {}) {
    o.path = dir_.File("journal.sqlite3");
    auto j = Journal::Open(o);
    EXPECT_TRUE(j.ok()) << j.status();
    return j.ok() ? *std::move(j) : nullptr;
  }
  testing::TempDir dir_;
};

TEST_F(JournalTest, InsertedJobIsQueuedWithItsInputs) {
  auto j = Open();
  auto r = j->Insert(Spec(1000), TestPlan(), 111);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->id.size(), 18u);  // "j-" + 16 hex digits
  auto got = j->Get(r->id);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->state, JobState::QUEUED);
  EXPECT_EQ(got->owner_uid, 1000u);
  EXPECT_EQ(got->priority, Priority::kHigh);
  EXPECT_EQ(got->created_unix_ms, 111);
  EXPECT_EQ(got->plan.stage_models, TestPlan().stage_models);
  EXPECT_EQ(got->plan.target, v1::VIDEO);
  EXPECT_FLOAT_EQ(got->plan.options.ratio(), 0.25f);
  auto in = j->LoadInputs(r->id);
  ASSERT_TRUE(in.ok());
  EXPECT_EQ(in->source_image, std::string(1000, 's'));
  EXPECT_EQ(in->target_image, std::string(1000, 't'));
  EXPECT_EQ(j->Get("j-nope").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(JournalTest, ResultIsStoredOnceAndInputsDropped) {
  auto j = Open();
  auto r = j->Insert(Spec(1), TestPlan(), 1);
  ASSERT_TRUE(j->MarkRunning(r->id, 2).ok());
  EXPECT_EQ(j->MarkRunning(r->id, 2).code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(j->Finish(r->id, JobState::SUCCEEDED, 0, "", {"report", "png-bytes"}, 3).ok());
  // A second finish (e.g. a duplicate after a restart) is refused: one result per job.
  EXPECT_EQ(j->Finish(r->id, JobState::SUCCEEDED, 0, "", {"r2", "i2"}, 4).code(),
            absl::StatusCode::kFailedPrecondition);
  auto res = j->GetResult(r->id);
  ASSERT_TRUE(res.ok());
  EXPECT_EQ(res->report, "report");
  EXPECT_EQ(res->image, "png-bytes");
  EXPECT_EQ(j->LoadInputs(r->id).status().code(), absl::StatusCode::kNotFound);
  auto got = j->Get(r->id);
  EXPECT_EQ(got->state, JobState::SUCCEEDED);
  EXPECT_EQ(got->started_unix_ms, 2);
  EXPECT_EQ(got->finished_unix_ms, 3);
}

TEST_F(JournalTest, FailedJobKeepsErrorAndHasNoResult) {
  auto j = Open();
  auto r = j->Insert(Spec(1), TestPlan(), 1);
  ASSERT_TRUE(j->Finish(r->id, JobState::FAILED, 9, "detect: no face in source", {.error_stage = "detect"}, 5).ok());
  auto got = j->Get(r->id);
  EXPECT_EQ(got->error_code, 9);
  EXPECT_EQ(got->error_message, "detect: no face in source");
  EXPECT_EQ(got->error_stage, "detect");
  EXPECT_EQ(j->GetResult(r->id).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(JournalTest, RecoverRequeuesRunningJobsAfterReopen) {
  std::string a, b, c;
  {
    auto j = Open();
    a = j->Insert(Spec(1), TestPlan(), 1)->id;
    b = j->Insert(Spec(2), TestPlan(), 2)->id;
    c = j->Insert(Spec(1), TestPlan(), 3)->id;
    ASSERT_TRUE(j->MarkRunning(b, 4).ok());
    ASSERT_TRUE(j->MarkRunning(c, 4).ok());
    ASSERT_TRUE(j->Finish(c, JobState::SUCCEEDED, 0, "", {"r", "i"}, 5).ok());
  }  // "crash": the process goes away with b RUNNING
  auto j = Open();
  auto queued = j->Recover();
  ASSERT_TRUE(queued.ok()) << queued.status();
  ASSERT_EQ(queued->size(), 2u);
  EXPECT_EQ((*queued)[0].id, a);  // submit order
  EXPECT_EQ((*queued)[1].id, b);
  EXPECT_EQ((*queued)[1].state, JobState::QUEUED);
  EXPECT_TRUE(j->LoadInputs(b).ok());
  EXPECT_EQ(j->GetResult(c)->image, "i");  // finished results survive
}

TEST_F(JournalTest, ListFiltersByOwnerAndStateNewestFirst) {
  auto j = Open();
  auto a = j->Insert(Spec(1), TestPlan(), 1)->id;
  auto b = j->Insert(Spec(2), TestPlan(), 2)->id;
  auto c = j->Insert(Spec(1), TestPlan(), 3)->id;
  ASSERT_TRUE(j->Finish(a, JobState::CANCELLED, 1, "cancelled", {}, 4).ok());
  auto mine = j->List(1u, {}, 0);
  ASSERT_EQ(mine->size(), 2u);
  EXPECT_EQ((*mine)[0].id, c);
  EXPECT_EQ((*mine)[1].id, a);
  EXPECT_EQ(j->List(std::nullopt, {JobState::QUEUED}, 0)->size(), 2u);
  EXPECT_EQ(j->List(std::nullopt, {}, 1)->size(), 1u);
  EXPECT_EQ(j->List(2u, {JobState::CANCELLED}, 0)->size(), 0u);
  (void)b;
}

TEST_F(JournalTest, FullStateDirIsResourceExhaustedAndLosesNothing) {
  auto j = Open({.max_bytes = 256 * 1024});
  std::vector<std::string> ok_ids;
  absl::Status last;
  for (int i = 0; i < 100; ++i) {
    auto r = j->Insert(Spec(1, 20000), TestPlan(), i);
    if (!r.ok()) {
      last = r.status();
      break;
    }
    ok_ids.push_back(r->id);
  }
  ASSERT_FALSE(last.ok()) << "256 KiB cannot hold 100 jobs of 40 KB";
  EXPECT_EQ(last.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(last.message().find("(the state directory " + dir_.path() + " is full)"), std::string::npos) << last;
  // Every job accepted before the refusal is intact.
  EXPECT_EQ(j->List(std::nullopt, {}, 0)->size(), ok_ids.size());
  for (const auto& id : ok_ids) EXPECT_EQ(j->LoadInputs(id)->source_image.size(), 20000u);
}

TEST_F(JournalTest, PruneRemovesExpiredThenOldestBeyondTheByteBudget) {
  auto j = Open({.retention = absl::Seconds(100), .retention_bytes = 2500});
  auto old = j->Insert(Spec(1), TestPlan(), 0)->id;
  ASSERT_TRUE(j->Finish(old, JobState::SUCCEEDED, 0, "", {"r", std::string(100, 'x')}, 1000).ok());
  std::vector<std::string> recent;
  for (int i = 0; i < 3; ++i) {
    recent.push_back(j->Insert(Spec(1), TestPlan(), 0)->id);
    ASSERT_TRUE(j->Finish(recent.back(), JobState::SUCCEEDED, 0, "",
                          {"r", std::string(1000, 'y')}, 200000 + i).ok());
  }
  auto queued = j->Insert(Spec(1), TestPlan(), 0)->id;
  auto removed = j->Prune(250000);  // cutoff 150000: `old` expired; 3000 bytes > 2500
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_EQ(*removed, 2);
  EXPECT_EQ(j->Get(old).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(j->Get(recent[0]).status().code(), absl::StatusCode::kNotFound);  // oldest result
  EXPECT_TRUE(j->GetResult(recent[1]).ok());
  EXPECT_TRUE(j->GetResult(recent[2]).ok());
  EXPECT_TRUE(j->Get(queued).ok());  // unfinished jobs are never pruned
}

// A result larger than the whole byte budget (a long video at the default 1 GiB) stays until a
// newer result finishes: it was deleted as it finished, before its own client could fetch it.
TEST_F(JournalTest, TheNewestResultIsKeptEvenWhenItAloneExceedsTheByteBudget) {
  auto j = Open({.retention = absl::Hours(1), .retention_bytes = 100});
  auto small = j->Insert(Spec(1), TestPlan(), 0)->id;
  ASSERT_TRUE(j->Finish(small, JobState::SUCCEEDED, 0, "", {"r", std::string(50, 's')}, 10).ok());
  auto big = j->Insert(Spec(1), TestPlan(), 0)->id;
  ASSERT_TRUE(j->Finish(big, JobState::SUCCEEDED, 0, "", {"r", std::string(1000, 'b')}, 20).ok());
  auto failed = j->Insert(Spec(1), TestPlan(), 0)->id;  // a newer job with no result bytes
  ASSERT_TRUE(j->Finish(failed, JobState::FAILED, 3, "no face", {}, 30).ok());
  auto removed = j->Prune(40);
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_EQ(*removed, 1);  // the older result: 1050 bytes > 100
  EXPECT_EQ(j->Get(small).status().code(), absl::StatusCode::kNotFound);
  auto kept = j->GetResult(big);
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_EQ(kept->image.size(), 1000u);
  EXPECT_TRUE(j->Get(failed).ok());
  // A newer result takes its place: the big one goes.
  auto next = j->Insert(Spec(1), TestPlan(), 0)->id;
  ASSERT_TRUE(j->Finish(next, JobState::SUCCEEDED, 0, "", {"r", std::string(60, 'n')}, 50).ok());
  ASSERT_EQ(*j->Prune(60), 1);
  EXPECT_EQ(j->Get(big).status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(j->GetResult(next).ok());
}

// The journal file shrinks when inputs are dropped and results pruned (a user's was 313 MB with
// 137 MB of free pages): 24 jobs with 2 x 1 MiB of inputs each, finished (inputs dropped), make
// 48 MiB of free pages; Prune gives them back.
TEST_F(JournalTest, DroppedInputsAndPrunedResultsGiveTheirSpaceBack) {
  auto j = Open({.retention = absl::Seconds(100)});
  std::vector<std::string> ids;
  for (int i = 0; i < 24; ++i) ids.push_back(j->Insert(Spec(1, 1 << 20), TestPlan(), 0)->id);
  const uint64_t full = std::filesystem::file_size(dir_.File("journal.sqlite3"));
  for (const std::string& id : ids) {
    ASSERT_TRUE(j->MarkRunning(id, 1).ok());
    ASSERT_TRUE(j->Finish(id, JobState::SUCCEEDED, 0, "", {"r", "png"}, 2).ok());
  }
  auto before = j->PageCounts();
  ASSERT_TRUE(before.ok()) << before.status();
  EXPECT_GE(before->second, 12000) << "free pages of the dropped inputs";
  ASSERT_TRUE(j->Prune(3).ok());  // nothing expires: only the free pages go
  auto after = j->PageCounts();
  ASSERT_TRUE(after.ok()) << after.status();
  const uint64_t now = std::filesystem::file_size(dir_.File("journal.sqlite3"));
  std::printf("journal: %llu bytes with the inputs, %lld of %lld pages free after they were dropped; "
              "%llu bytes, %lld of %lld pages free after Prune\n",
              static_cast<unsigned long long>(full), static_cast<long long>(before->second),
              static_cast<long long>(before->first), static_cast<unsigned long long>(now),
              static_cast<long long>(after->second), static_cast<long long>(after->first));
  EXPECT_LT(after->second, Journal::kReclaimPages);
  EXPECT_LT(now, 2u << 20);
  for (const std::string& id : ids) EXPECT_TRUE(j->GetResult(id).ok()) << id;  // nothing lost
  // A reopened journal is still incremental (no VACUUM needed) and reads the same.
  j.reset();
  auto again = Open();
  EXPECT_TRUE(again->GetResult(ids[0]).ok());
}

// Result images stay out of the journal (megabytes each would grow it by hundreds of MB): with
// results_dir the row names a file, written whole before the row points at it.
TEST_F(JournalTest, AnImageResultIsAFileTheRowNamesAndIsDeletedWithTheJob) {
  auto j = Open({.retention_bytes = 2500, .results_dir = dir_.File("results")});
  const std::string first = j->Insert(Spec(1), TestPlan(), 0)->id;
  ASSERT_TRUE(j->Finish(first, JobState::SUCCEEDED, 0, "", {"report", std::string(2000, 'r')}, 10).ok());
  const std::string path = dir_.File("results/" + first + ".image");
  struct stat st;
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 2000);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  auto got = j->GetResult(first);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->report, "report");
  EXPECT_TRUE(got->image.empty());
  EXPECT_EQ(got->file, path);
  EXPECT_EQ(got->file_bytes, 2000u);
  // A second result over the byte budget prunes the first, and its file.
  const std::string second = j->Insert(Spec(1), TestPlan(), 0)->id;
  ASSERT_TRUE(j->Finish(second, JobState::SUCCEEDED, 0, "", {"report", std::string(1000, 's')}, 20).ok());
  ASSERT_EQ(*j->Prune(30), 1);
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_TRUE(std::filesystem::exists(dir_.File("results/" + second + ".image")));
  // An end that is not recorded leaves no file behind.
  EXPECT_EQ(j->Finish(second, JobState::SUCCEEDED, 0, "", {"again", "x"}, 40).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir_.File("results")),
                          std::filesystem::directory_iterator()),
            1);
  // A crash between a file and its row leaves a file no row names (or a .tmp): the next Open
  // deletes those, and keeps the named one and other files (a video's).
  j.reset();
  for (const char* stray : {"results/j-dead.image", "results/j-dead2.image.tmp", "results/j-video.mp4"}) {
    std::ofstream(dir_.File(stray)) << "x";
  }
  j = Open({.retention_bytes = 2500, .results_dir = dir_.File("results")});
  EXPECT_FALSE(std::filesystem::exists(dir_.File("results/j-dead.image")));
  EXPECT_FALSE(std::filesystem::exists(dir_.File("results/j-dead2.image.tmp")));
  EXPECT_TRUE(std::filesystem::exists(dir_.File("results/j-video.mp4")));
  EXPECT_TRUE(j->GetResult(second).ok());
  EXPECT_TRUE(std::filesystem::exists(dir_.File("results/" + second + ".image")));
}

// The inputs as files too: on disk before the row exists, read back for the run, gone when the
// job ends; files no unfinished job names go at the next open.
TEST_F(JournalTest, InputsAreFilesUntilTheJobEnds) {
  auto j = Open({.inputs_dir = dir_.File("inputs")});
  const std::string id = j->Insert(Spec(1, 5000), TestPlan(), 0)->id;
  const std::string source = dir_.File("inputs/" + id + ".source");
  struct stat st;
  ASSERT_EQ(::stat(source.c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 5000);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  auto page_count = j->PageCounts();
  ASSERT_TRUE(page_count.ok());
  EXPECT_LT(page_count->first, 8);  // the 10 KB of images are not in the database's pages
  auto inputs = j->LoadInputs(id);
  ASSERT_TRUE(inputs.ok()) << inputs.status();
  EXPECT_EQ(inputs->source_image, std::string(5000, 's'));
  EXPECT_EQ(inputs->target_image, std::string(5000, 't'));
  // Survives a restart (recovered jobs read them again) ...
  j.reset();
  std::ofstream(dir_.File("inputs/j-gone.source")) << "x";  // no row names it
  j = Open({.inputs_dir = dir_.File("inputs")});
  EXPECT_FALSE(std::filesystem::exists(dir_.File("inputs/j-gone.source")));
  ASSERT_EQ(j->Recover()->size(), 1u);
  EXPECT_EQ(j->LoadInputs(id)->target_image.size(), 5000u);
  // ... and goes with the job's end.
  ASSERT_TRUE(j->Finish(id, JobState::FAILED, 9, "failed", {}, 10).ok());
  EXPECT_FALSE(std::filesystem::exists(source));
  EXPECT_FALSE(std::filesystem::exists(dir_.File("inputs/" + id + ".target")));
  EXPECT_EQ(j->LoadInputs(id).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(JournalTest, AResultFileIsKeptByPathCountedAndDeletedWhenPruned) {
  auto j = Open({.retention = absl::Hours(1), .retention_bytes = 5000});
  const std::string file = dir_.File("j.mp4");
  std::ofstream(file, std::ios::binary) << std::string(4000, 'v');
  auto video = j->Insert(Spec(1), TestPlan(), 1);
  ASSERT_TRUE(j->Finish(video->id, JobState::SUCCEEDED, 0, "", {"report", "", file, 4000}, 10).ok());
  auto res = j->GetResult(video->id);
  ASSERT_TRUE(res.ok()) << res.status();
  EXPECT_EQ(res->file, file);
  EXPECT_EQ(res->file_bytes, 4000u);
  EXPECT_TRUE(res->image.empty());
  // A newer 2000-byte image result: 6000 bytes > 5000, so the older video goes, with its file.
  auto image = j->Insert(Spec(1), TestPlan(), 2);
  ASSERT_TRUE(j->Finish(image->id, JobState::SUCCEEDED, 0, "", {"report", std::string(2000, 'p')}, 20).ok());
  EXPECT_EQ(access(file.c_str(), F_OK), 0);
  auto pruned = j->Prune(30);
  ASSERT_TRUE(pruned.ok()) << pruned.status();
  EXPECT_EQ(*pruned, 1);
  EXPECT_EQ(j->GetResult(video->id).status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(access(file.c_str(), F_OK), 0);  // the file went with its row
  EXPECT_TRUE(j->GetResult(image->id).ok());
}

}  // namespace
}  // namespace fusion::jobs
