// RpcServer (rpc_server.h).
#include "rpc/rpc_server.h"

#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/resource_quota.h>
#include <grpcpp/server_posix.h>
#include <unistd.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "rpc/fd_exchange.h"
#include "rpc/memfd_registry.h"
#include "rpc/uds_listener.h"
#include "rpc/uid_limits.h"
#include "base/status_macros.h"

namespace fusion {

inline constexpr char kServiceName[] = "fusion.v1.Fusion";

namespace {

// HTTP/2 policy against abusive connections. Ping strikes are OFF on purpose: in gRPC 1.51,
// once a peer passes max_ping_strikes while a write to it is blocked (it does not read), every
// further PING appends a child error to the transport's delayed-close status
// (close_transport_locked -> grpc_error_add_child, an absl::Cord), ~3.5 KB per PING, freed only
// when the peer closes. Without strikes, PING ACKs pile up only until gRPC's 10000 pending
// induced frames, when it stops reading the connection; ConnectionLimiter then closes the
// stalled connection (and logs it). The minimum ping interval is still set (it is what gRPC
// counts as a strike, now only counted). The daemon pings idle connections every 60 s (dead
// peers go away after 20 s more). Streams per connection and metadata are bounded; gRPC's
// buffers come from one quota.
void ApplyTransportLimits(grpc::ServerBuilder& builder, const DaemonConfig& config) {
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 10 * 1000);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 0);  // see above: never 1.51's strike path
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, 60 * 1000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 20 * 1000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, 32);
  builder.AddChannelArgument(GRPC_ARG_MAX_METADATA_SIZE, 16 * 1024);
  // Idle clients do not keep connections (and their fds) forever.
  builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS, 10 * 60 * 1000);
  builder.SetMaxReceiveMessageSize(static_cast<int>(config.max_message_bytes));
  builder.SetMaxSendMessageSize(static_cast<int>(config.max_message_bytes));
  grpc::ResourceQuota quota("fusiond");
  quota.Resize(static_cast<size_t>(config.grpc_memory_quota));
  builder.SetResourceQuota(quota);
}

}  // namespace

absl::StatusOr<std::unique_ptr<RpcServer>> RpcServer::Bind(const DaemonConfig& config, int inherited_fd) {
  std::unique_ptr<RpcServer> self(new RpcServer());
  self->socket_ = config.socket;
  ASSIGN_OR_RETURN(self->listener_, UdsListener::Create({.path = config.socket, .group = config.socket_group, .inherited_fd = inherited_fd}));
  self->memfds_ = std::make_unique<MemfdRegistry>(MemfdRegistry::Options{});
  return self;
}

absl::Status RpcServer::Serve(const DaemonConfig& config, Parts parts) {
  service_ = std::make_unique<FusionService>(std::move(parts.options), parts.memory, parts.jobs, memfds_.get(),
                                             parts.catalogue != nullptr ? parts.residency : nullptr, parts.catalogue,
                                             parts.live, parts.live_sessions);
  ASSIGN_OR_RETURN(auto fd_exchange, FdExchange::Create(socket_, config.socket_group, config.allowed_uids, memfds_.get(),
                                        {.max_in_flight = static_cast<int>(config.fd_max_connections),
                                         .max_per_uid = static_cast<int>(config.fd_max_connections_per_uid),
                                         .inherited_fd = parts.inherited_fd_socket}));
  fd_exchange_ = std::move(fd_exchange);

  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  builder.RegisterService(service_.get());
  ApplyTransportLimits(builder, config);
  server_ = builder.BuildAndStart();
  if (server_ == nullptr) return absl::InternalError("gRPC server failed to start");
  server_->GetHealthCheckService()->SetServingStatus(kServiceName, true);

  connections_ = std::make_unique<ConnectionLimiter>(
      ConnectionLimiter::Options{.max_per_uid = static_cast<int>(config.max_connections_per_uid),
                                 .max_total = static_cast<int>(config.max_connections),
                                 .socket = socket_,
                                 .stall_timeout = absl::Milliseconds(config.stalled_connection_timeout_ms)});
  grpc::Server* server = server_.get();
  ConnectionLimiter* connections = connections_.get();
  listener_->Start([server, connections](int fd) {
    if (!connections->Admit(fd).ok()) {
      close(fd);  // refused at accept (logged, throttled, by the limiter)
      return;
    }
    grpc::AddInsecureChannelFromFd(server, fd);
  });
  return absl::OkStatus();
}

RpcServer::~RpcServer() {
  StopAccepting();
  Finish(absl::Now());
}

void RpcServer::StopAccepting() {
  if (accepting_stopped_) return;
  accepting_stopped_ = true;
  if (listener_) listener_->Stop();  // no new connections; socket file removed
  if (fd_exchange_) fd_exchange_->Stop();
  if (service_) service_->BeginShutdown();
  if (server_) server_->GetHealthCheckService()->Shutdown();  // every service NOT_SERVING
}

void RpcServer::Finish(absl::Time deadline) {
  if (finished_) return;
  finished_ = true;
  if (server_) {
    server_->Shutdown(absl::ToChronoTime(std::max(deadline, absl::Now())));
    server_->Wait();
  }
}

std::string RpcServer::target() const { return absl::StrCat("unix://", socket_); }

int RpcServer::open_connections(uid_t uid) const { return connections_ != nullptr ? connections_->open(uid) : 0; }

uint64_t RpcServer::stalled_connections_closed() const {
  return connections_ != nullptr ? connections_->stalled_closed() : 0;
}

}  // namespace fusion
