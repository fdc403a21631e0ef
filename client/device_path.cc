#include "device_path.h"

#include <sys/stat.h>

#include <cerrno>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace fusion::ctl {

absl::StatusOr<PathKind> PathKindOf(const std::string& path, const std::string& role) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT && absl::StartsWith(path, "/dev/")) {
      return absl::NotFoundError(absl::StrCat(role, " ", path, ": no such device (",
                                              role == "output" ? "is v4l2loopback loaded?" : "is the camera connected?",
                                              ")"));
    }
    return PathKind::kFile;
  }
  return S_ISCHR(st.st_mode) ? PathKind::kDevice : PathKind::kFile;
}

}  // namespace fusion::ctl
