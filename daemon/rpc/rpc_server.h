// RpcServer: fusiond's gRPC front — the fusion.v1 service and gRPC's grpc.health.v1 service on
// the Unix socket (UdsListener, connections admitted by ConnectionLimiter), and the companion
// fd socket ("<socket>.fd", FdExchange) that registers memfd images in the MemfdRegistry.
//
// Lifecycle (the Daemon drives it, docs/ARCHITECTURE.md#start-and-stop): Bind() binds the
// socket, so a second daemon fails before anything else is built; Serve() builds the service
// over the daemon's parts and starts accepting; StopAccepting() closes the sockets and marks
// every service NOT_SERVING while calls in flight go on; Finish() waits for those calls until a
// deadline, then cancels them.
// Invariant: after Finish() returns no RPC runs and no callback into the daemon's parts is made.
// Thread-safety: the lifecycle methods from one controlling thread; the counters from any.
// Errors: Bind: UdsListener::Create's (FAILED_PRECONDITION "another fusiond is serving on ...");
// Serve: FdExchange::Create's, INTERNAL when gRPC cannot start.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "config/config.h"
#include "rpc/fusion_service.h"

namespace grpc {
class Server;
}

namespace fusion {

class ConnectionLimiter;
class FdExchange;
class MemfdRegistry;
class UdsListener;

class RpcServer {
 public:
  // Binds `config.socket` (or adopts `inherited_fd` from socket activation, when >= 0).
  static absl::StatusOr<std::unique_ptr<RpcServer>> Bind(const DaemonConfig& config, int inherited_fd);
  ~RpcServer();  // StopAccepting() and Finish(now)

  // Where memfd images are registered (the job methods read them).
  MemfdRegistry* memfds() const { return memfds_.get(); }

  // What the service is built over; every pointer must outlive this object. `jobs` null: the
  // job methods answer UNIMPLEMENTED; `catalogue` null: the model methods do.
  struct Parts {
    FusionService::Options options;
    const MemoryStateSource* memory = nullptr;
    jobs::JobManager* jobs = nullptr;
    ResidencyManager* residency = nullptr;
    const models::ModelCatalogue* catalogue = nullptr;
    jobs::LiveRunner* live = nullptr;  // null: Live answers UNIMPLEMENTED
    LiveSessionRegistry* live_sessions = nullptr;  // where sessions are listed; null: the service's own
    int inherited_fd_socket = -1;  // the ".fd" socket from socket activation, or -1
  };
  // Builds the service, the fd socket and the gRPC server, and starts accepting.
  absl::Status Serve(const DaemonConfig& config, Parts parts);

  // No new connections (the socket files go), health NOT_SERVING, WatchMemory streams end at
  // their next interval. Calls in flight go on. Idempotent.
  void StopAccepting();
  // Waits for calls in flight until `deadline`, then cancels them. Idempotent.
  void Finish(absl::Time deadline);

  std::string target() const;
  // gRPC connections of `uid` open now.
  int open_connections(uid_t uid) const;
  // Connections closed so far because their peer stopped reading (stalled_connection_timeout_ms).
  uint64_t stalled_connections_closed() const;

 private:
  RpcServer() = default;

  std::string socket_;
  // Destroyed bottom up: the listener's thread uses the limiter and the server; the fd
  // exchange registers into the memfd registry.
  std::unique_ptr<FusionService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<ConnectionLimiter> connections_;
  std::unique_ptr<UdsListener> listener_;
  std::unique_ptr<MemfdRegistry> memfds_;
  std::unique_ptr<FdExchange> fd_exchange_;
  bool accepting_stopped_ = false;
  bool finished_ = false;
};

}  // namespace fusion
