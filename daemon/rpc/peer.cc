#include "rpc/peer.h"

#include <grp.h>
#include <pwd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "base/status_macros.h"

namespace fusion {

namespace {

absl::StatusOr<int> FdOfGrpcPeer(absl::string_view peer) {
  int fd = -1;
  absl::string_view number = peer;
  if (!absl::ConsumePrefix(&number, "fd:") || !absl::SimpleAtoi(number, &fd) || fd < 0) {
    return absl::UnauthenticatedError(
        absl::StrCat("peer '", peer, "' has no credentials (not a fusiond-accepted socket)"));
  }
  return fd;
}

// getgrouplist() of the user named by `uid` (its groups in the user database now).
std::vector<gid_t> UserDatabaseGroups(uid_t uid, gid_t gid) {
  std::vector<char> buf(16384);
  passwd pw{};
  passwd* found = nullptr;
  if (getpwuid_r(uid, &pw, buf.data(), buf.size(), &found) != 0 || found == nullptr) return {};
  std::vector<gid_t> groups(64);
  for (int attempt = 0; attempt < 4; ++attempt) {
    int n = static_cast<int>(groups.size());
    if (getgrouplist(pw.pw_name, gid, groups.data(), &n) >= 0) {
      groups.resize(static_cast<size_t>(n));
      return groups;
    }
    groups.resize(static_cast<size_t>(n) > groups.size() ? static_cast<size_t>(n) : groups.size() * 2);
  }
  return {};
}

}  // namespace

absl::StatusOr<std::vector<gid_t>> PeerGroups(int fd, uid_t uid, gid_t gid) {
#ifdef SO_PEERGROUPS
  std::vector<gid_t> groups(32);
  for (int attempt = 0; attempt < 4; ++attempt) {
    socklen_t len = static_cast<socklen_t>(groups.size() * sizeof(gid_t));
    if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups.data(), &len) == 0) {
      groups.resize(len / sizeof(gid_t));
      return groups;
    }
    if (errno == ERANGE) {  // len now holds the size needed
      groups.resize(len / sizeof(gid_t) + 1);
      continue;
    }
    if (errno != ENOPROTOOPT) {
      return absl::UnauthenticatedError(absl::StrCat("SO_PEERGROUPS on fd ", fd, ": ", std::strerror(errno)));
    }
    break;  // kernel older than 4.13
  }
#endif
  return UserDatabaseGroups(uid, gid);
}

absl::StatusOr<std::vector<gid_t>> PeerGroupsFromGrpcPeer(absl::string_view peer, uid_t uid, gid_t gid) {
  ASSIGN_OR_RETURN(auto fd, FdOfGrpcPeer(peer));
  return PeerGroups(fd, uid, gid);
}

absl::StatusOr<AdminPolicy> AdminPolicy::Create(std::vector<uid_t> uids, const std::string& group) {
  AdminPolicy policy;
  policy.uids_ = std::move(uids);
  policy.group_ = group;
  if (!group.empty()) {
    std::vector<char> buf(16384);
    struct group gr{};
    struct group* found = nullptr;
    if (getgrnam_r(group.c_str(), &gr, buf.data(), buf.size(), &found) != 0 || found == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("admin_group '", group, "' does not exist"));
    }
    policy.has_gid_ = true;
    policy.gid_ = gr.gr_gid;
  }
  return policy;
}

bool AdminPolicy::AdminByUid(uid_t uid) const {
  return uid == 0 || uid == geteuid() || std::find(uids_.begin(), uids_.end(), uid) != uids_.end();
}

bool AdminPolicy::AdminByGroup(gid_t gid, const std::vector<gid_t>& groups) const {
  return has_gid_ && (gid == gid_ || std::find(groups.begin(), groups.end(), gid_) != groups.end());
}

absl::Status AdminPolicy::Denied(const char* method, uid_t uid) const {
  std::string who = absl::StrCat("root, the daemon's uid ", geteuid());
  if (!uids_.empty()) absl::StrAppend(&who, ", admin_uids");
  if (has_gid_) absl::StrAppend(&who, ", members of admin_group '", group_, "'");
  return absl::PermissionDeniedError(
      absl::StrCat(method, ": uid ", uid, " may not change model residency (allowed: ", who, ")"));
}

absl::StatusOr<PeerCred> PeerCredFromGrpcPeer(absl::string_view peer) {
  ASSIGN_OR_RETURN(auto parsed, FdOfGrpcPeer(peer));
  const int fd = parsed;
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
