// Who is calling: the kernel-verified credentials of the peer of a gRPC call.
//
// gRPC reports no credentials for Unix sockets, so fusiond accepts connections itself and hands
// each fd to gRPC (UdsListener); the call's peer() is then "fd:N" and SO_PEERCRED on N gives the
// uid/gid/pid the kernel recorded at connect(). Read it during the call (the call keeps the
// transport, and so fd N, alive). Thread-safe.
#pragma once

#include <sys/types.h>

#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace fusion {

struct PeerCred {
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;
};

// Parses "fd:N" and reads SO_PEERCRED. UNAUTHENTICATED when the peer is not a connection
// accepted by fusiond's own listener (no credentials to read).
absl::StatusOr<PeerCred> PeerCredFromGrpcPeer(absl::string_view peer);

// PERMISSION_DENIED naming the uid unless `uid` is the daemon's own uid or `allowed` is empty
// or contains it.
absl::Status CheckUidAllowed(uid_t uid, const std::vector<uid_t>& allowed);

}  // namespace fusion
