#include "jobs/state_dir.h"

#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "spdlog/spdlog.h"
#include "base/status_macros.h"

namespace fusion::jobs {
namespace {

std::string UserName(uid_t uid) {
  const passwd* pw = getpwuid(uid);
  return pw != nullptr ? absl::StrCat(pw->pw_name, " (uid ", uid, ")") : absl::StrCat("uid ", uid);
}

// What the state holds that fusiond may change: entries of `owner` only.
struct Tightened {
  std::vector<std::string> changed;  // "path 0644 -> 0600"
};

absl::Status NotOwned(const std::string& path, const std::string& dir, uid_t found, uid_t owner) {
  const passwd* pw = getpwuid(owner);
  const std::string who = pw != nullptr ? pw->pw_name : std::to_string(owner);
  // The directory alone, or every file of fusiond's in it (never models/, which is root's).
  const std::string fix = path == dir ? absl::StrFormat("sudo chown %s: %s", who, dir)
                                      : absl::StrFormat("sudo chown -R %s: %s/lock %s/journal.sqlite3* %s/results %s/inputs",
                                                        who, dir, dir, dir, dir);
  return absl::FailedPreconditionError(
      absl::StrFormat("state_dir: %s belongs to %s, not to fusiond's %s (left by fusiond run as another user?); "
                      "fix it with: %s",
                      path, UserName(found), UserName(owner), fix));
}

// Checks that `path` (if it exists) is `owner`'s and takes group/other bits off it.
absl::Status Tighten(const std::string& path, const std::string& dir, uid_t owner, Tightened& out) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return absl::OkStatus();
    return absl::FailedPreconditionError(absl::StrCat("state_dir: ", path, ": ", std::strerror(errno)));
  }
  if (S_ISLNK(st.st_mode)) return absl::OkStatus();  // fusiond makes none; never follow one
  if (st.st_uid != owner) return NotOwned(path, dir, st.st_uid, owner);
  const mode_t mode = st.st_mode & 07777;
  if ((mode & 077) == 0) return absl::OkStatus();
  const mode_t wanted = S_ISDIR(st.st_mode) ? 0700 : 0600;
  if (::chmod(path.c_str(), wanted) != 0) {
    return absl::FailedPreconditionError(absl::StrCat("state_dir: chmod ", path, ": ", std::strerror(errno)));
  }
  out.changed.push_back(absl::StrFormat("%s %04o -> %04o", path, mode, wanted));
  return absl::OkStatus();
}

absl::Status TightenTree(const std::string& root, const std::string& dir, uid_t owner, Tightened& out) {
  RETURN_IF_ERROR(Tighten(root, dir, owner, out));
  std::error_code ec;
  if (!std::filesystem::is_directory(std::filesystem::symlink_status(root, ec))) return absl::OkStatus();
  for (auto it = std::filesystem::recursive_directory_iterator(root, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    RETURN_IF_ERROR(Tighten(it->path().string(), dir, owner, out));
  }
  if (ec) return absl::FailedPreconditionError(absl::StrCat("state_dir: reading ", root, ": ", ec.message()));
  return absl::OkStatus();
}

}  // namespace

const std::vector<std::string>& StateFileNames() {
  static const auto* names = new std::vector<std::string>{
      "lock", "journal.sqlite3", "journal.sqlite3-wal", "journal.sqlite3-shm", "journal.sqlite3-journal", "journal.sqlite3-ends"};
  return *names;
}

absl::Status PrepareStateDir(const std::string& dir, uid_t owner) {
  const std::filesystem::path path(dir);
  std::error_code ec;
  if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path(), ec);
  if (ec) return absl::FailedPreconditionError(absl::StrCat("state_dir '", dir, "': ", ec.message()));
  if (::mkdir(dir.c_str(), 0700) == 0) {
    // mkdir's mode passes through the umask, which can only take bits away: 0700 or less.
    if (::chmod(dir.c_str(), 0700) != 0) {
      return absl::FailedPreconditionError(absl::StrCat("state_dir '", dir, "': chmod: ", std::strerror(errno)));
    }
    return absl::OkStatus();
  }
  if (errno != EEXIST) {
    return absl::FailedPreconditionError(absl::StrCat("state_dir '", dir, "': mkdir: ", std::strerror(errno)));
  }
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat("state_dir '", dir, "' is not a directory"));
  }
  Tightened tightened;
  RETURN_IF_ERROR(Tighten(dir, dir, owner, tightened));
  for (const std::string& name : StateFileNames()) {
    RETURN_IF_ERROR(Tighten(dir + "/" + name, dir, owner, tightened));
  }
  for (const char* tree : {"/results", "/inputs"}) {
    RETURN_IF_ERROR(TightenTree(dir + tree, dir, owner, tightened));
  }
  if (!tightened.changed.empty()) {
    spdlog::warn("state_dir {}: job images and results are private to fusiond's uid; made {} entr{} private: {}", dir,
                 tightened.changed.size(), tightened.changed.size() == 1 ? "y" : "ies",
                 absl::StrJoin(tightened.changed, ", "));
  }
  return absl::OkStatus();
}

}  // namespace fusion::jobs
