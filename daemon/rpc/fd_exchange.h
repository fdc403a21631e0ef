// FdExchange: the companion socket ("<socket>.fd", see proto/fd_protocol.h) through which
// clients hand sealed memfds to the daemon and take result memfds back (SCM_RIGHTS).
//
// Each connection carries one request, handled on the accept thread with a 2 s send/receive
// timeout so a stalled client cannot hold it longer. The caller's uid (SO_PEERCRED) must be
// allowed (as on the gRPC socket) and owns the tokens it creates.
// Thread-safety: Create/Stop from the controlling thread.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
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
  // Stops accepting and removes the socket file. Idempotent.
  void Stop() { listener_->Stop(); }
  const std::string& path() const { return listener_->path(); }

 private:
  FdExchange(std::unique_ptr<UdsListener> listener, std::vector<uid_t> allowed,
             MemfdRegistry* registry)
      : listener_(std::move(listener)), allowed_(std::move(allowed)), registry_(registry) {}
  void Serve(int conn) const;

  std::unique_ptr<UdsListener> listener_;
  const std::vector<uid_t> allowed_;
  MemfdRegistry* registry_;
};

}  // namespace fusion
