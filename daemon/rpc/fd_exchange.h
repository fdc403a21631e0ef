// FdExchange: the companion socket ("<socket>.fd", see proto/fd_protocol.h) through which
// clients hand sealed memfds to the daemon and take result memfds back (SCM_RIGHTS).
//
// Each connection carries one request, served on its own short-lived thread with a 2 s limit
// for the whole request, so a slow client delays nobody else; at most `kMaxInFlight`
// connections are served at once (more are closed at once). The caller's uid (SO_PEERCRED)
// must be allowed (as on the gRPC socket) and owns the tokens it creates.
// Thread-safety: Create/Stop from the controlling thread; Stop() waits (<= 2 s) for requests
// in flight.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "rpc/memfd_registry.h"
#include "rpc/uds_listener.h"

namespace fusion {

class FdExchange {
 public:
  // Binds "<socket_path>.fd" (mode 0660, `group`) and starts serving. Errors as
  // UdsListener::Create. `registry` must outlive this object.
  static absl::StatusOr<std::unique_ptr<FdExchange>> Create(const std::string& socket_path,
                                                           const std::string& group,
                                                           std::vector<uid_t> allowed_uids,
                                                           MemfdRegistry* registry);
  static constexpr int kMaxInFlight = 32;
  static constexpr int kRequestTimeoutMs = 2000;

  ~FdExchange() { Stop(); }
  // Stops accepting, removes the socket file and waits for requests in flight. Idempotent.
  void Stop();
  const std::string& path() const { return listener_->path(); }

 private:
  FdExchange(std::unique_ptr<UdsListener> listener, std::vector<uid_t> allowed,
             MemfdRegistry* registry)
      : listener_(std::move(listener)), allowed_(std::move(allowed)), registry_(registry) {}
  void Serve(int conn) const;
  void Dispatch(int conn);

  std::unique_ptr<UdsListener> listener_;
  absl::Mutex mu_;
  int in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  const std::vector<uid_t> allowed_;
  MemfdRegistry* registry_;
};

}  // namespace fusion
