#include "rpc/uid_limits.h"

#include <fcntl.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "spdlog/spdlog.h"

namespace fusion {

absl::StatusOr<std::unique_ptr<UidSlots::Slot>> UidSlots::Acquire(uid_t uid, const char* method) {
  MutexLock lock(&mu_);
  int& mine = per_uid_[uid];
  if (mine >= max_per_uid_) {
    return absl::ResourceExhaustedError(absl::StrCat(method, ": uid ", uid, " has ", mine, " ", what_,
                                                     " open, at most ", max_per_uid_, " per uid"));
  }
  ++mine;
  return std::unique_ptr<Slot>(new Slot(this, uid));
}

void UidSlots::Release(uid_t uid) {
  MutexLock lock(&mu_);
  auto it = per_uid_.find(uid);
  if (it != per_uid_.end() && --it->second <= 0) per_uid_.erase(it);
}

int UidSlots::open(uid_t uid) const {
  MutexLock lock(&mu_);
  auto it = per_uid_.find(uid);
  return it == per_uid_.end() ? 0 : it->second;
}

ConnectionLimiter::ConnectionLimiter(Options options) : options_(std::move(options)) {
  if (options_.stall_timeout > absl::ZeroDuration()) stall_thread_ = std::thread([this] { StallLoop(); });
}

ConnectionLimiter::~ConnectionLimiter() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
  }
  wake_.SignalAll();
  if (stall_thread_.joinable()) stall_thread_.join();
}

void ConnectionLimiter::StallLoop() {
  const absl::Duration period = std::max(options_.stall_timeout / 8, absl::Milliseconds(50));
  MutexLock lock(&mu_);
  while (!stopping_) {
    wake_.WaitWithDeadline(&mu_, absl::Now() + period);
    if (!stopping_) CheckStalls(absl::Now());
  }
}

void ConnectionLimiter::CheckStalls(absl::Time now) {
  for (auto it = conns_.begin(); it != conns_.end();) {
    // A dup pins what the fd refers to now: if its inode is ours, the shutdown below cannot
    // reach a newer connection that reused the fd number.
    const int dup = fcntl(it->fd, F_DUPFD_CLOEXEC, 0);
    struct stat st;
    if (dup < 0 || fstat(dup, &st) != 0 || st.st_ino != it->ino) {
      if (dup >= 0) close(dup);
      it = conns_.erase(it);  // closed by gRPC
      continue;
    }
    int unread = 0;
    if (ioctl(dup, SIOCOUTQ, &unread) != 0 || unread < options_.stall_bytes) {
      it->backlogged_since = absl::InfiniteFuture();
    } else if (it->backlogged_since == absl::InfiniteFuture()) {
      it->backlogged_since = now;
    } else if (now - it->backlogged_since >= options_.stall_timeout) {
      shutdown(dup, SHUT_RDWR);  // gRPC sees the end of the connection and frees it
      ++stalled_closed_;
      uint64_t held_back = 0;
      if (stall_log_.Admit(it->uid, now, &held_back)) {
        spdlog::warn("{}: closed a connection of uid {} pid {}: it left {} bytes of replies unread for {} "
                     "(a client that does not read, e.g. an HTTP/2 PING flood){}",
                     options_.socket, it->uid, it->pid, unread, absl::FormatDuration(now - it->backlogged_since),
                     LogThrottle::HeldBackNote(held_back));
      }
      close(dup);
      it = conns_.erase(it);
      continue;
    }
    close(dup);
    ++it;
  }
}

uint64_t ConnectionLimiter::stalled_closed() const {
  MutexLock lock(&mu_);
  return stalled_closed_;
}

void ConnectionLimiter::PruneLocked() const {
  // A connection is gone once its fd no longer names its socket (fstat fails or the inode
  // differs: closed, maybe reused by a newer connection).
  conns_.erase(std::remove_if(conns_.begin(), conns_.end(),
                              [](const Conn& c) {
                                struct stat st;
                                return fstat(c.fd, &st) != 0 || st.st_ino != c.ino;
                              }),
               conns_.end());
}

absl::Status ConnectionLimiter::Admit(int fd) {
  ucred cred{};
  socklen_t len = sizeof cred;
  struct stat st;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 || fstat(fd, &st) != 0) {
    return absl::UnauthenticatedError(absl::StrCat("accepted fd ", fd, ": ", std::strerror(errno)));
  }
  absl::Status refusal;
  {
    MutexLock lock(&mu_);
    PruneLocked();
    const int mine = static_cast<int>(
        std::count_if(conns_.begin(), conns_.end(), [&](const Conn& c) { return c.uid == cred.uid; }));
    if (mine >= options_.max_per_uid) {
      refusal = absl::ResourceExhaustedError(
          absl::StrCat("too many gRPC connections from uid ", cred.uid, ": ", mine,
                       " open, at most ", options_.max_per_uid, " per uid (max_connections_per_uid)"));
    } else if (static_cast<int>(conns_.size()) >= options_.max_total) {
      refusal = absl::ResourceExhaustedError(
          absl::StrCat("too many gRPC connections: ", conns_.size(), " open from all uids, at most ",
                       options_.max_total, " (max_connections; refused uid ", cred.uid, ")"));
    } else {
      // A stale entry cannot share the fd: PruneLocked() dropped it (its inode differs).
      conns_.push_back({fd, st.st_ino, cred.uid, cred.pid});
      return absl::OkStatus();
    }
  }
  uint64_t held_back = 0;
  if (refusal_log_.Admit(cred.uid, absl::Now(), &held_back)) {
    spdlog::warn("{}: closed a connection of uid {} pid {}: {}{}", options_.socket, cred.uid, cred.pid,
                 std::string(refusal.message()), LogThrottle::HeldBackNote(held_back));
  }
  return refusal;
}

int ConnectionLimiter::open(uid_t uid) const {
  MutexLock lock(&mu_);
  PruneLocked();
  return static_cast<int>(std::count_if(conns_.begin(), conns_.end(), [&](const Conn& c) { return c.uid == uid; }));
}

int ConnectionLimiter::open_total() const {
  MutexLock lock(&mu_);
  PruneLocked();
  return static_cast<int>(conns_.size());
}

}  // namespace fusion
