#include "systemd/socket_activation.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <systemd/sd-daemon.h>

#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "proto/fd_protocol.h"

namespace fusion {

std::string BoundUnixPath(int fd) {
  sockaddr_un addr;
  socklen_t len = sizeof addr;
  std::memset(&addr, 0, sizeof addr);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0 || addr.sun_family != AF_UNIX) return "";
  const size_t n = len > offsetof(sockaddr_un, sun_path) ? len - offsetof(sockaddr_un, sun_path) : 0;
  if (n == 0 || addr.sun_path[0] == '\0') return "";  // unnamed or abstract
  return std::string(addr.sun_path, strnlen(addr.sun_path, n));
}

absl::StatusOr<InheritedSockets> TakeInheritedSockets() {
  const int n = sd_listen_fds(/*unset_environment=*/1);
  if (n < 0) return absl::FailedPreconditionError(absl::StrCat("socket activation: sd_listen_fds: ", std::strerror(-n)));
  InheritedSockets out;
  std::string fd_path;
  for (int i = 0; i < n; ++i) {
    const int fd = SD_LISTEN_FDS_START + i;
    const std::string path = BoundUnixPath(fd);
    if (sd_is_socket_unix(fd, SOCK_STREAM, /*listening=*/1, nullptr, 0) <= 0 || path.empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "socket activation: inherited fd ", fd, " is not a listening AF_UNIX stream socket bound to a path "
          "(fusiond.socket must list ListenStream=PATH and ListenStream=PATH.fd)"));
    }
    const bool companion = absl::EndsWith(path, ".fd");
    int& slot = companion ? out.fd_fd : out.main_fd;
    if (slot >= 0) {
      return absl::FailedPreconditionError(absl::StrCat("socket activation: two ", companion ? "\".fd\"" : "main",
                                                        " sockets inherited (fd ", slot, " and fd ", fd, ", '", path, "')"));
    }
    slot = fd;
    (companion ? fd_path : out.main_path) = path;
  }
  if (out.fd_fd >= 0 && out.main_fd < 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("socket activation: only the \".fd\" socket '", fd_path, "' was inherited, not its main socket"));
  }
  if (out.fd_fd >= 0 && fd_path != fdproto::CompanionPath(out.main_path)) {
    return absl::FailedPreconditionError(absl::StrCat("socket activation: the \".fd\" socket '", fd_path,
                                                      "' is not next to the main socket '", out.main_path, "'"));
  }
  return out;
}

}  // namespace fusion
