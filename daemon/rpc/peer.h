// Who is calling: the kernel-verified credentials of the peer of a gRPC call, and who among
// the callers may change daemon-wide state (AdminPolicy).
//
// gRPC reports no credentials for Unix sockets, so fusiond accepts connections itself and hands
// each fd to gRPC (UdsListener); the call's peer() is then "fd:N" and SO_PEERCRED on N gives the
// uid/gid/pid the kernel recorded at connect(). Read it during the call (the call keeps the
// transport, and so fd N, alive). Thread-safe.
#pragma once

#include <sys/types.h>

#include <string>
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

// The peer's supplementary groups as the kernel recorded them at connect() (SO_PEERGROUPS,
// Linux >= 4.13); where the kernel lacks it, getgrouplist() of the uid's user name (the groups
// the user database gives it now). `fd` is a connected Unix socket. UNAUTHENTICATED when
// neither can be read (no user of that uid: an empty list, not an error).
absl::StatusOr<std::vector<gid_t>> PeerGroups(int fd, uid_t uid, gid_t gid);
// Same, for a gRPC peer "fd:N" (see PeerCredFromGrpcPeer).
absl::StatusOr<std::vector<gid_t>> PeerGroupsFromGrpcPeer(absl::string_view peer, uid_t uid, gid_t gid);

// Who may change residency and other daemon-wide state (LoadModel, UnloadModel, PinModel,
// UnpinModel): root, the daemon's own uid, `uids`, and members of the group `gid` (primary or
// supplementary). With neither uids nor a group configured that is root and the daemon only.
// Immutable after Create(); thread-safe.
class AdminPolicy {
 public:
  // Resolves `group` (getgrnam) once, at start; empty = no admin group. INVALID_ARGUMENT
  // naming admin_group when the group does not exist.
  static absl::StatusOr<AdminPolicy> Create(std::vector<uid_t> uids, const std::string& group);
  AdminPolicy() = default;

  // True for root, the daemon's euid and the listed uids; those need no group lookup.
  bool AdminByUid(uid_t uid) const;
  // True when the admin group is configured and `gid` or one of `groups` is it.
  bool AdminByGroup(gid_t gid, const std::vector<gid_t>& groups) const;
  bool has_group() const { return has_gid_; }
  // PERMISSION_DENIED for `method`, naming the uid and who may call it.
  absl::Status Denied(const char* method, uid_t uid) const;

 private:
  std::vector<uid_t> uids_;
  bool has_gid_ = false;
  gid_t gid_ = 0;
  std::string group_;
};

// PERMISSION_DENIED naming the uid unless `uid` is the daemon's own uid or `allowed` is empty
// or contains it.
absl::Status CheckUidAllowed(uid_t uid, const std::vector<uid_t>& allowed);

}  // namespace fusion
