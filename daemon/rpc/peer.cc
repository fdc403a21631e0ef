#include "rpc/peer.h"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace fusion {

absl::StatusOr<PeerCred> PeerCredFromGrpcPeer(absl::string_view peer) {
  int fd = -1;
  if (!absl::ConsumePrefix(&peer, "fd:") || !absl::SimpleAtoi(peer, &fd) || fd < 0) {
    return absl::UnauthenticatedError(
        absl::StrCat("peer '", peer, "' has no credentials (not a fusiond-accepted socket)"));
  }
  ucred cred{};
  socklen_t len = sizeof cred;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
    return absl::UnauthenticatedError(
        absl::StrCat("SO_PEERCRED on fd ", fd, ": ", std::strerror(errno)));
  }
  return PeerCred{cred.pid, cred.uid, cred.gid};
}

absl::Status CheckUidAllowed(uid_t uid, const std::vector<uid_t>& allowed) {
  if (allowed.empty() || uid == geteuid() ||
      std::find(allowed.begin(), allowed.end(), uid) != allowed.end()) {
    return absl::OkStatus();
  }
  return absl::PermissionDeniedError(absl::StrCat("uid ", uid, " is not allowed to use fusiond"));
}

}  // namespace fusion
