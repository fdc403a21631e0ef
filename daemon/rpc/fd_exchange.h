// FdExchange: the companion socket ("<socket>.fd", see proto/fd_protocol.h) through which
// clients hand sealed memfds to the daemon and take result memfds back (SCM_RIGHTS).
//
// Each connection carries one request, served on its own short-lived thread, so a slow client
// delays nobody else. Fair limits, decided at accept() from the caller's uid (SO_PEERCRED):
//  - a uid that is not allowed (as on the gRPC socket) is refused at once;
//  - at most `max_per_uid` connections of one uid and `max_in_flight` of all uids together are
//    served at once, so one client holding idle connections cannot take every slot;
//  - the whole request line must arrive within `request_timeout_ms` of accept(), so an idle
//    connection holds its slot for that long at most.
// A refused connection gets "ERR <code> <message>" (PERMISSION_DENIED, or RESOURCE_EXHAUSTED
// naming the uid and the limit) before it is closed, and the daemon logs a warning per uid at
// most once a minute (LogThrottle). Its request is never read. The caller's uid owns the
// tokens it creates.
// Thread-safety: Create/Stop from the controlling thread; Stop() waits (<= 2 x
// request_timeout_ms) for requests in flight; in_flight() from any thread.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "common/mutex.h"
#include "absl/time/time.h"
#include "common/log_throttle.h"
#include "rpc/memfd_registry.h"
#include "rpc/peer.h"
#include "rpc/uds_listener.h"

namespace fusion {

struct FdExchangeOptions {
  int max_in_flight = 64;          // connections served at once, all uids together
  int max_per_uid = 8;             // connections served at once for one uid
  int request_timeout_ms = 2000;   // from accept() until the request line is complete
  int inherited_fd = -1;           // the ".fd" socket from socket activation (UdsListener::Options)
};

// Reads one request line from the connected socket `conn` (until `deadline`) and answers it for
// `uid` as described in fd_protocol.h; an fd that came with the request is registered (PUT) or
// closed. Does not close `conn`. FdExchange's connection threads run it; so does the fuzz target
// (tests/fuzz/fd_protocol_fuzzer.cc) over a socketpair.
void ServeFdRequest(int conn, uid_t uid, MemfdRegistry* registry, absl::Time deadline,
                    int request_timeout_ms);

class FdExchange {
 public:
  // Binds "<socket_path>.fd" (mode 0660, `group`) and starts serving. Errors as
  // UdsListener::Create. `registry` must outlive this object.
  static absl::StatusOr<std::unique_ptr<FdExchange>> Create(const std::string& socket_path,
                                                           const std::string& group,
                                                           std::vector<uid_t> allowed_uids,
                                                           MemfdRegistry* registry,
                                                           FdExchangeOptions options = {});

  ~FdExchange() { Stop(); }
  // Stops accepting, removes the socket file and waits for requests in flight. Idempotent.
  void Stop();
  const std::string& path() const { return listener_->path(); }
  // Connections being served now (all uids); for tests.
  int in_flight() const;

 private:
  FdExchange(std::unique_ptr<UdsListener> listener, std::vector<uid_t> allowed,
             MemfdRegistry* registry, FdExchangeOptions options)
      : listener_(std::move(listener)), allowed_(std::move(allowed)), registry_(registry),
        options_(options) {}
  void Dispatch(int conn);
  // Takes a slot for `uid`, or says why not (RESOURCE_EXHAUSTED with the numbers).
  absl::Status Admit(uid_t uid);
  void Release(uid_t uid);
  // Replies "ERR ..." with `why` on the fresh connection, logs (throttled) and closes it.
  void Refuse(int conn, const PeerCred& cred, const absl::Status& why);
  void Serve(int conn, const PeerCred& cred, absl::Time deadline) const;

  std::unique_ptr<UdsListener> listener_;
  mutable Mutex mu_;
  CondVar idle_;  // signalled under mu_ when in_flight_ drops to 0 (Stop waits for it)
  int in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_map<uid_t, int> per_uid_ ABSL_GUARDED_BY(mu_);
  const std::vector<uid_t> allowed_;
  MemfdRegistry* registry_;
  const FdExchangeOptions options_;
  LogThrottle refusal_log_{absl::Minutes(1)};  // per uid
};

}  // namespace fusion
