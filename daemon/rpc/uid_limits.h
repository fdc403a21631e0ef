// Per-uid limits on what a caller may hold open in the daemon, so that one uid cannot take
// every slot (docs/ARCHITECTURE.md#invariants, 8: the uid is the unit of quota and fairness).
//
//  - UidSlots: counted slots per uid (fusiond: open WatchJob + WatchMemory streams). A Slot is
//    an RAII handle; its destructor gives the slot back.
//  - ConnectionLimiter: connections open on the gRPC socket, per uid and in all, decided at
//    accept(). gRPC owns an accepted fd and closes it without telling anyone, so each admitted
//    connection is remembered by (fd, socket inode) and counted as gone once that fd no longer
//    refers to that inode (closed, or reused for another socket). Nothing is held on the fd.
//    It also closes connections whose peer stopped reading: gRPC queues replies (PING ACKs,
//    responses) for a peer that never reads them, so a connection with at least
//    `stall_bytes` unread by the peer (SIOCOUTQ) at every check for `stall_timeout` is shut
//    down (shutdown(2) on a dup of the fd, whose inode is checked first; gRPC then closes it)
//    and logged at most once a minute per uid. Checks run on a thread of its own every
//    stall_timeout / 8 (at least 50 ms).
//
// Refusals name the uid and the limit (RESOURCE_EXHAUSTED). Thread-safety: all methods may be
// called concurrently (one mutex per object); a Slot may be released on any thread.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/log_throttle.h"
#include "common/mutex.h"
#include "rpc/peer.h"

namespace fusion {

class UidSlots {
 public:
  // `what` names the slots in refusals ("watch streams"); `max_per_uid` >= 1.
  UidSlots(std::string what, int max_per_uid) : what_(std::move(what)), max_per_uid_(max_per_uid) {}

  class Slot {
   public:
    Slot(const Slot&) = delete;
    Slot& operator=(const Slot&) = delete;
    ~Slot() { owner_->Release(uid_); }

   private:
    friend class UidSlots;
    Slot(UidSlots* owner, uid_t uid) : owner_(owner), uid_(uid) {}
    UidSlots* owner_;
    uid_t uid_;
  };

  // A slot of `uid`, or RESOURCE_EXHAUSTED "<method>: uid U has N <what> open, at most N per
  // uid". The UidSlots must outlive the slot.
  absl::StatusOr<std::unique_ptr<Slot>> Acquire(uid_t uid, const char* method);
  int open(uid_t uid) const;

 private:
  void Release(uid_t uid);

  const std::string what_;
  const int max_per_uid_;
  mutable Mutex mu_;
  absl::flat_hash_map<uid_t, int> per_uid_ ABSL_GUARDED_BY(mu_);
};

class ConnectionLimiter {
 public:
  struct Options {
    int max_per_uid = 64;
    int max_total = 512;
    std::string socket;  // named in the log line
    // A peer that leaves this many bytes unread for this long loses its connection;
    // zero duration = never.
    absl::Duration stall_timeout = absl::Seconds(15);
    int stall_bytes = 32 * 1024;
  };
  explicit ConnectionLimiter(Options options);
  ~ConnectionLimiter();  // stops the stall checks
  ConnectionLimiter(const ConnectionLimiter&) = delete;
  ConnectionLimiter& operator=(const ConnectionLimiter&) = delete;

  // Decides for a freshly accepted connection `fd`: OK (it is counted until closed), or the
  // refusal (RESOURCE_EXHAUSTED naming the uid and the limit; logged at most once a minute per
  // uid, with the count held back). UNAUTHENTICATED when its credentials cannot be read. The
  // caller closes a refused fd.
  absl::Status Admit(int fd);
  // Connections of `uid` / of all uids still open now; for tests and logs.
  int open(uid_t uid) const;
  int open_total() const;
  // Connections shut down so far because their peer stopped reading.
  uint64_t stalled_closed() const;

 private:
  struct Conn {
    int fd;
    ino_t ino;
    uid_t uid;
    pid_t pid;
    absl::Time backlogged_since = absl::InfiniteFuture();  // first check that saw stall_bytes unread
  };
  void PruneLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void StallLoop();
  void CheckStalls(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Options options_;
  mutable Mutex mu_;
  mutable std::vector<Conn> conns_ ABSL_GUARDED_BY(mu_);
  uint64_t stalled_closed_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  CondVar wake_;
  LogThrottle refusal_log_{absl::Minutes(1)};  // per uid
  LogThrottle stall_log_{absl::Minutes(1)};    // per uid
  std::thread stall_thread_;
};

}  // namespace fusion
