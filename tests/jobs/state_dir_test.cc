#include "jobs/state_dir.h"

#include <fcntl.h>
#include <grp.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "jobs/journal.h"
#include "temp_dir.h"

namespace fusion::jobs {
namespace {

constexpr uid_t kNobody = 65534;

mode_t ModeOf(const std::string& path) {
  struct stat st{};
  EXPECT_EQ(::lstat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

void WriteFile(const std::string& path, mode_t mode) {
  std::ofstream(path) << "bytes";
  ASSERT_EQ(::chmod(path.c_str(), mode), 0);
}

// The errno of open(path, O_RDONLY) in a child that dropped to uid and gid 65534 (0 when the
// open succeeded); -1 when the child could not drop its privileges.
int OpenErrnoAsNobody(const std::string& path) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (::setgroups(0, nullptr) != 0 || ::setgid(kNobody) != 0 || ::setuid(kNobody) != 0) ::_exit(255);
    const int fd = ::open(path.c_str(), O_RDONLY);
    ::_exit(fd >= 0 ? 0 : errno);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) != 255 ? WEXITSTATUS(status) : -1;
}

class UmaskGuard {
 public:
  explicit UmaskGuard(mode_t mask) : old_(::umask(mask)) {}
  ~UmaskGuard() { ::umask(old_); }

 private:
  mode_t old_;
};

// The issue-30 trial: started under umask 022 the state directory was 0755 and the journal
// 0644, and any local user copied another uid's result out of it with sqlite3.
TEST(StateDirTest, ANewStateDirAndJournalArePrivateUnderUmask022) {
  testing::TempDir tmp;
  UmaskGuard umask022(022);
  const std::string dir = tmp.File("var/lib/fusiond");
  ASSERT_TRUE(PrepareStateDir(dir, ::geteuid()).ok());
  EXPECT_EQ(ModeOf(dir), 0700u);
  auto journal = Journal::Open({.path = dir + "/journal.sqlite3"});
  ASSERT_TRUE(journal.ok()) << journal.status();
  JobSpec spec;
  spec.owner_uid = 1000;
  spec.source_image = "source photo";
  spec.target_image = "target photo";
  ASSERT_TRUE((*journal)->Insert(spec, JobPlan{}, 1).ok());
  EXPECT_EQ(ModeOf(dir + "/journal.sqlite3"), 0600u);
  EXPECT_EQ(ModeOf(dir + "/journal.sqlite3-wal"), 0600u);
  EXPECT_EQ(ModeOf(dir + "/journal.sqlite3-shm"), 0600u);
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to try the read as another uid";
  // The parent of the state directory is reachable by everyone (0755): only the state's modes
  // stop the second uid.
  EXPECT_EQ(OpenErrnoAsNobody(dir + "/journal.sqlite3"), EACCES);
  ASSERT_EQ(::chmod(dir.c_str(), 0755), 0);  // the file's own 0600 holds as well
  EXPECT_EQ(OpenErrnoAsNobody(dir + "/journal.sqlite3"), EACCES);
  ASSERT_EQ(::chmod((dir + "/journal.sqlite3").c_str(), 0644), 0);  // and the test can fail
  EXPECT_EQ(OpenErrnoAsNobody(dir + "/journal.sqlite3"), 0);
}

TEST(StateDirTest, AnExistingStateIsTightenedAndTheModelsFolderIsLeftAlone) {
  testing::TempDir tmp;
  const std::string dir = tmp.File("state");
  ASSERT_EQ(::mkdir(dir.c_str(), 0755), 0);
  ASSERT_EQ(::chmod(dir.c_str(), 0755), 0);
  WriteFile(dir + "/journal.sqlite3", 0644);
  WriteFile(dir + "/lock", 0640);
  std::filesystem::create_directories(dir + "/results/j-1.parts");
  ASSERT_EQ(::chmod((dir + "/results/j-1.parts").c_str(), 0755), 0);
  WriteFile(dir + "/results/j-1.parts/0.mp4", 0644);
  WriteFile(dir + "/results/j-0.mp4", 0664);
  std::filesystem::create_directories(dir + "/models");
  ASSERT_EQ(::chmod((dir + "/models").c_str(), 0755), 0);
  WriteFile(dir + "/models/w.bin", 0644);

  ASSERT_TRUE(PrepareStateDir(dir, ::geteuid()).ok());
  EXPECT_EQ(ModeOf(dir), 0700u);
  EXPECT_EQ(ModeOf(dir + "/journal.sqlite3"), 0600u);
  EXPECT_EQ(ModeOf(dir + "/lock"), 0600u);
  EXPECT_EQ(ModeOf(dir + "/results/j-1.parts"), 0700u);
  EXPECT_EQ(ModeOf(dir + "/results/j-1.parts/0.mp4"), 0600u);
  EXPECT_EQ(ModeOf(dir + "/results/j-0.mp4"), 0600u);
  EXPECT_EQ(ModeOf(dir + "/models"), 0755u);
  EXPECT_EQ(ModeOf(dir + "/models/w.bin"), 0644u);
}

// A leftover of `sudo fusiond` in the service's directory: the service's fusiond could not
// open it ("Permission denied"). Now the start fails naming the file, its owner and the fix.
TEST(StateDirTest, AStateFileOfAnotherUidFailsNamingItsOwnerAndTheFix) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to make a file of another uid";
  testing::TempDir tmp;
  const std::string dir = tmp.File("state");
  ASSERT_TRUE(PrepareStateDir(dir, ::geteuid()).ok());
  WriteFile(dir + "/lock", 0644);
  ASSERT_EQ(::chown((dir + "/lock").c_str(), kNobody, kNobody), 0);
  // The daemon's uid is nobody's here; the lock is root's.
  ASSERT_EQ(::chown(dir.c_str(), kNobody, kNobody), 0);
  ASSERT_EQ(::chown((dir + "/lock").c_str(), 0, 0), 0);
  absl::Status st = PrepareStateDir(dir, kNobody);
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
  const std::string msg(st.message());
  EXPECT_NE(msg.find(dir + "/lock belongs to root (uid 0), not to fusiond's nobody (uid 65534)"), std::string::npos)
      << msg;
  EXPECT_NE(msg.find("sudo chown -R nobody: " + dir + "/lock " + dir + "/journal.sqlite3* " + dir + "/results " + dir +
                     "/inputs"),
            std::string::npos)
      << msg;
  EXPECT_EQ(ModeOf(dir + "/lock"), 0644u);  // another uid's file is not changed
  // A directory of another uid: the fix is the directory's chown.
  st = PrepareStateDir(dir, 4242);
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(st.message().find("fix it with: sudo chown 4242: " + dir), absl::string_view::npos) << st.message();
}

TEST(StateDirTest, APathThatIsAFileIsRefused) {
  testing::TempDir tmp;
  WriteFile(tmp.File("state"), 0600);
  absl::Status st = PrepareStateDir(tmp.File("state"), ::geteuid());
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(st.message().find("is not a directory"), absl::string_view::npos) << st.message();
}

}  // namespace
}  // namespace fusion::jobs
