#include "video/fsync_path.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

namespace fusion::video {

int FsyncPath(const std::string& path, bool directory, const char** call) {
  const int fd = ::open(path.c_str(), (directory ? O_RDONLY | O_DIRECTORY : O_RDONLY) | O_CLOEXEC);
  if (fd < 0) {
    if (call != nullptr) *call = "open";
    return errno;
  }
  const int rc = ::fsync(fd);
  const int err = rc == 0 ? 0 : errno;
  ::close(fd);
  if (err != 0 && call != nullptr) *call = "fsync";
  return err;
}

}  // namespace fusion::video
