// Listening sockets passed by systemd (socket activation, sd_listen_fds(3)).
//
// fusiond.socket gives both of fusiond's sockets — the gRPC socket and its ".fd" companion
// (proto/fd_protocol.h) — under one name, so they are told apart by the path each is bound to
// (getsockname), not by LISTEN_FDNAMES: the one ending in ".fd" is the fd socket, the other the
// main socket. Inherited sockets override --socket and the default path, skip the live-daemon
// probe, and their files are never unlinked at stop (they belong to the socket unit).
//
// Errors: FAILED_PRECONDITION naming the fd when an inherited fd is not a listening AF_UNIX
// stream socket bound to a path, when two main or two ".fd" sockets are passed, or when only a
// ".fd" socket is passed. LISTEN_* are unset either way (children do not inherit them).
// Thread-safety: call once, at start-up, before other threads read the environment.
#pragma once

#include <string>

#include "absl/status/statusor.h"

namespace fusion {

struct InheritedSockets {
  int main_fd = -1;        // -1: none inherited (fusiond binds its own)
  std::string main_path;   // the path main_fd is bound to
  int fd_fd = -1;          // -1: not inherited (fusiond binds main_path + ".fd" itself)
};

absl::StatusOr<InheritedSockets> TakeInheritedSockets();

// The path a bound AF_UNIX socket listens on ("" when unbound, abstract or not AF_UNIX).
std::string BoundUnixPath(int fd);

}  // namespace fusion
