#include "notify_socket.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>

#include "absl/time/clock.h"

namespace fusion::testing {

NotifySocket::NotifySocket(std::string path) : path_(std::move(path)) {
  sockaddr_un addr;
  std::memset(&addr, 0, sizeof addr);
  addr.sun_family = AF_UNIX;
  if (path_.size() >= sizeof addr.sun_path) return;
  std::memcpy(addr.sun_path, path_.c_str(), path_.size() + 1);
  const int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return;
  unlink(path_.c_str());
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    return;
  }
  fd_ = fd;
}

NotifySocket::~NotifySocket() {
  if (fd_ >= 0) {
    close(fd_);
    unlink(path_.c_str());
  }
}

std::vector<std::string> NotifySocket::Receive(absl::Duration wait, const std::string& until) {
  std::vector<std::string> out;
  const absl::Time end = absl::Now() + wait;
  while (fd_ >= 0) {
    const int64_t left = absl::ToInt64Milliseconds(end - absl::Now());
    if (left <= 0) break;
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left)) <= 0) continue;
    char buf[4096];
    const ssize_t n = recv(fd_, buf, sizeof buf, 0);
    if (n <= 0) continue;
    out.emplace_back(buf, static_cast<size_t>(n));
    if (!until.empty() && out.back().find(until) != std::string::npos) break;
  }
  return out;
}

}  // namespace fusion::testing
