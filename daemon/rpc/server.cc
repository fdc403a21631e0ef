#include "rpc/server.h"

#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/resource_quota.h>
#include <grpcpp/server_posix.h>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "common/heap_release.h"
#include "fusion/size.h"
#include "jobs/job_manager.h"
#include "jobs/queue_future_references.h"
#include "jobs/journal.h"
#include "jobs/state_dir.h"
#include "device/device.h"
#include "device/cgroup_memory.h"
#include "rpc/fd_exchange.h"
#include "memory/budget_watcher.h"
#include "memory/residency_manager.h"
#include "rpc/fusion_service.h"
#include "rpc/memfd_registry.h"
#include "rpc/metrics.h"
#include "rpc/memory_timeline.h"
#include "rpc/metrics_http.h"
#include "rpc/memory_state.h"
#include "rpc/socket_activation.h"
#include "rpc/uds_listener.h"
#include "rpc/uid_limits.h"
#include "spdlog/spdlog.h"

namespace fusion {

inline constexpr char kServiceName[] = "fusion.v1.Fusion";

namespace {

// HTTP/2 policy against abusive connections (issue #11). Ping strikes are OFF on purpose: in
// gRPC 1.51, once a peer passes max_ping_strikes while a write to it is blocked (it does not
// read), every further PING appends a child error to the transport's delayed-close status
// (close_transport_locked -> grpc_error_add_child, an absl::Cord): ~3.5 KB per PING, measured
// 80-90 MB per flooding connection, freed only when the peer closes (heaptrack). Without
// strikes, PING ACKs pile up only until gRPC's 10000 pending induced frames, when it stops
// reading the connection; ConnectionLimiter then closes the stalled connection (and logs it).
// The minimum ping interval is still set (it is what gRPC counts as a strike, now only
// counted). The daemon pings idle connections every 60 s (dead peers go away after 20 s
// more). Streams per connection and metadata are bounded; gRPC's buffers come from one quota.
void ApplyTransportLimits(grpc::ServerBuilder& builder, const DaemonConfig& config) {
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 10 * 1000);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 0);  // see above: never 1.51's strike path
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, 60 * 1000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 20 * 1000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, 32);
  builder.AddChannelArgument(GRPC_ARG_MAX_METADATA_SIZE, 16 * 1024);
  grpc::ResourceQuota quota("fusiond");
  quota.Resize(static_cast<size_t>(config.grpc_memory_quota));
  builder.SetResourceQuota(quota);
}

}  // namespace

absl::StatusOr<std::unique_ptr<DaemonServer>> DaemonServer::Create(const DaemonConfig& config,
                                                                 jobs::JobRunner* runner,
                                                                 ServerHooks hooks) {
  std::unique_ptr<DaemonServer> self(new DaemonServer());
  self->config_ = config;
  // Socket activation: inherited sockets replace --socket (socket_activation.h).
  auto inherited = TakeInheritedSockets();
  if (!inherited.ok()) return inherited.status();
  if (inherited->main_fd >= 0) {
    spdlog::info("socket activation: serving on the inherited {}{} (fd {}{})", inherited->main_path,
                 inherited->main_path == config.socket ? "" : absl::StrCat(", not ", config.socket), inherited->main_fd,
                 inherited->fd_fd >= 0 ? absl::StrCat(", and its .fd socket on fd ", inherited->fd_fd) : "");
    self->config_.socket = inherited->main_path;
  }
  const std::string& socket_path = self->config_.socket;
  // The host tier is always budgeted (DESIGN.md §3): without a limit, half of MemTotal.
  // Under a cgroup memory cap (systemd's MemoryMax=, a container) MemTotal is the cap.
  uint64_t host_limit = config.host_memory_limit;
  std::optional<CgroupMemoryLimit> cgroup;
  auto host = ReadProcessHostMemory(&cgroup);
  if (!host.ok()) return host.status();
  if (cgroup) {
    spdlog::info("memory cap {} bytes ({}): host and cpu device figures are capped at it", cgroup->limit_bytes,
                 cgroup->where);
  }
  if (host_limit == 0) {
    host_limit = DefaultHostMemoryLimit(*host);
    spdlog::info("host memory limit {} bytes (half of {}; --host-memory-limit sets it)", host_limit,
                 cgroup ? "the cgroup's memory cap" : "MemTotal");
  } else if (cgroup && host_limit > cgroup->limit_bytes) {
    spdlog::warn("--host-memory-limit {} bytes is above the cgroup's memory cap {} bytes ({}): the kernel kills "
                 "fusiond before the host tier refuses",
                 host_limit, cgroup->limit_bytes, cgroup->where);
  }
  self->config_.host_memory_limit = host_limit;
  auto device = OpenDevice(config.device);
  if (!device.ok()) return device.status();
  self->device_ = *std::move(device);
  // No model loader until the models catalogue attaches one (RegisterModel refuses before).
  self->future_refs_ = std::make_unique<jobs::QueueFutureReferences>();
  auto residency = ResidencyManager::Create(
      {.host_budget_bytes = host_limit,
       .loader = hooks.loader,
       .future = self->future_refs_.get(),  // lookahead sees the queued jobs' stages
       // One-shot models (detect, landmarks) go right after use under device pressure.
       .one_shot_pressure = config.one_shot_pressure,
       .one_shot_min_free_bytes = config.one_shot_min_free});
  if (!residency.ok()) return residency.status();
  self->residency_ = *std::move(residency);
  auto watcher = BudgetWatcher::Create(
      self->device_.get(), self->residency_.get(),
      {.device_limit = config.device_memory_limit,
       .device_reserve = config.device_memory_reserve,
       .host_limit = host_limit,
       .on_device_budget = hooks.on_device_budget});
  if (!watcher.ok()) return watcher.status();
  self->on_stopped_ = hooks.on_stopped;
  if (hooks.on_residency) {
    auto attached = hooks.on_residency(*self->residency_);
    if (!attached.ok()) return attached.status();
    if (*attached != nullptr) runner = *attached;
  }
  self->budget_watcher_ = *std::move(watcher);

  // Bind first: a second daemon must fail here, before it builds anything else.
  auto listener = UdsListener::Create(
      {.path = socket_path, .group = config.socket_group, .inherited_fd = inherited->main_fd});
  if (!listener.ok()) return listener.status();
  self->listener_ = *std::move(listener);
  self->memfds_ = std::make_unique<MemfdRegistry>(MemfdRegistry::Options{});
  if (runner != nullptr) {
    // 0700, fusiond's files in it 0600 and its own (jobs/state_dir.h).
    if (absl::Status st = jobs::PrepareStateDir(config.state_dir, ::geteuid()); !st.ok()) return st;
    // One fusiond per state directory: two on one journal would both requeue and run its jobs.
    const std::string lock_path = config.state_dir + "/lock";
    self->state_lock_.fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (self->state_lock_.fd < 0) {
      return absl::FailedPreconditionError(absl::StrCat("state_dir '", config.state_dir, "': cannot open ", lock_path,
                                                        ": ", std::strerror(errno)));
    }
    if (::flock(self->state_lock_.fd, LOCK_EX | LOCK_NB) != 0) {
      char pid[32] = {};
      const ssize_t n = ::pread(self->state_lock_.fd, pid, sizeof(pid) - 1, 0);
      return absl::FailedPreconditionError(absl::StrCat(
          "state_dir '", config.state_dir, "' is in use by another fusiond",
          n > 0 ? absl::StrCat(" (pid ", absl::StripAsciiWhitespace(absl::string_view(pid, n)), ")") : "",
          ": its journal holds that daemon's jobs; give this one its own --state-dir"));
    }
    const std::string own_pid = absl::StrCat(getpid(), "\n");
    if (::ftruncate(self->state_lock_.fd, 0) != 0 ||
        ::pwrite(self->state_lock_.fd, own_pid.data(), own_pid.size(), 0) != static_cast<ssize_t>(own_pid.size())) {
      spdlog::warn("state_dir lock {}: cannot write the pid: {}", lock_path, std::strerror(errno));
    }
    // Images are files, not journal rows: inputs under inputs/, results under results/ (with
    // the video results).
    auto journal = jobs::Journal::Open({.path = config.state_dir + "/journal.sqlite3",
                                        .retention = absl::Seconds(config.result_retention_s),
                                        .retention_bytes = config.result_retention_bytes,
                                        .results_dir = config.state_dir + "/results",
                                        .inputs_dir = config.state_dir + "/inputs"});
    if (!journal.ok()) return journal.status();
    self->journal_ = *std::move(journal);
    // Within fairness the queue prefers a job whose first model is already on the device.
    ResidencyManager* residency = self->residency_.get();
    auto is_resident = [residency](const std::string& model) {
      for (const ModelSnapshot& m : residency->Snapshot().models) {
        if (m.name == model) return m.state == ModelState::kDevice || m.state == ModelState::kInUse;
      }
      return false;
    };
    jobs::QueueFutureReferences* refs = self->future_refs_.get();
    self->metrics_ = std::make_unique<Metrics>();
    jobs::JobManager::Options job_options{.concurrency = config.max_concurrent_jobs,
                                          .on_change = [refs] { refs->Refresh(); },
                                          .on_idle = [] { ReleaseFreeHeap(); },
                                          .on_event = [m = self->metrics_.get()](const v1::JobEvent& e) {
                                            m->OnJobEvent(e);
                                          }};
    job_options.queue.max_queued_per_uid = config.max_queued_jobs_per_uid;
    self->disk_ = std::make_unique<jobs::DiskBudget>(config.state_dir, jobs::DiskBudget::StatvfsProbe(config.state_dir));
    job_options.disk = self->disk_.get();
    auto manager = jobs::JobManager::Create(std::move(job_options),
                                            self->journal_.get(), runner, is_resident);
    if (!manager.ok()) return manager.status();
    self->jobs_ = *std::move(manager);
    refs->SetSource([jobs = self->jobs_.get()] { return jobs->UpcomingStages(64); });
    refs->Refresh();
  }
  JobCountsFn job_counts;
  if (self->jobs_ != nullptr) {
    job_counts = [jobs = self->jobs_.get()] {
      std::map<uint32_t, UidJobCounts> out;
      for (const auto& [uid, c] : jobs->CountsByUid()) {
        out[uid] = {static_cast<uint32_t>(c.queued), static_cast<uint32_t>(c.running)};
      }
      return out;
    };
  }
  self->memory_ = std::make_unique<ResidencyMemoryStateSource>(
      self->device_.get(), self->residency_.get(),
      TierLimits{config.device_memory_limit, config.device_memory_reserve, host_limit},
      std::move(job_counts));
  auto admins = AdminPolicy::Create(config.admin_uids, config.admin_group);
  if (!admins.ok()) return admins.status();
  self->service_ = std::make_unique<FusionService>(
      FusionService::Options{.allowed_uids = config.allowed_uids,
                             .admins = *std::move(admins),
                             .max_watch_streams_per_uid = static_cast<int>(config.max_watch_streams_per_uid)},
      self->memory_.get(),
      self->jobs_.get(), self->memfds_.get(), hooks.catalogue != nullptr ? self->residency_.get() : nullptr,
      hooks.catalogue);
  auto fd_exchange = FdExchange::Create(
      socket_path, config.socket_group, config.allowed_uids, self->memfds_.get(),
      {.max_in_flight = static_cast<int>(config.fd_max_connections),
       .max_per_uid = static_cast<int>(config.fd_max_connections_per_uid),
       .inherited_fd = inherited->fd_fd});
  if (!fd_exchange.ok()) return fd_exchange.status();
  self->fd_exchange_ = *std::move(fd_exchange);

  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  builder.RegisterService(self->service_.get());
  builder.SetMaxReceiveMessageSize(static_cast<int>(config.max_message_bytes));
  builder.SetMaxSendMessageSize(static_cast<int>(config.max_message_bytes));
  // Idle clients do not keep connections (and their fds) forever.
  builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS, 10 * 60 * 1000);
  ApplyTransportLimits(builder, config);
  self->server_ = builder.BuildAndStart();
  if (self->server_ == nullptr) return absl::InternalError("gRPC server failed to start");
  self->server_->GetHealthCheckService()->SetServingStatus(kServiceName, true);

  grpc::Server* server = self->server_.get();
  self->connections_ = std::make_unique<ConnectionLimiter>(
      ConnectionLimiter::Options{.max_per_uid = static_cast<int>(config.max_connections_per_uid),
                                 .max_total = static_cast<int>(config.max_connections),
                                 .socket = socket_path,
                                 .stall_timeout = absl::Milliseconds(config.stalled_connection_timeout_ms)});
  ConnectionLimiter* connections = self->connections_.get();
  self->listener_->Start([server, connections](int fd) {
    if (!connections->Admit(fd).ok()) {
      close(fd);  // refused at accept (logged, throttled, by the limiter)
      return;
    }
    grpc::AddInsecureChannelFromFd(server, fd);
  });
  if (!config.metrics_listen.empty()) {
    if (self->metrics_ == nullptr) self->metrics_ = std::make_unique<Metrics>();  // no job queue: no job counts
    Metrics* metrics = self->metrics_.get();
    MemoryStateSource* memory = self->memory_.get();
    // The memory timeline: a sample every 250 ms, the last 15 minutes (memory_timeline.h).
    self->timeline_ = std::make_unique<MemoryTimeline>(3600);
    self->timeline_->Start(absl::Milliseconds(250), [memory] { return memory->Snapshot(); });
    MemoryTimeline* timeline = self->timeline_.get();
    auto http = MetricsHttpServer::Start(
        config.metrics_listen,
        [metrics, memory]() -> absl::StatusOr<std::string> {
          auto state = memory->Snapshot();
          if (!state.ok()) return state.status();
          return metrics->Exposition(*state);
        },
        [timeline](int64_t since) { return timeline->JsonLines(since); });
    if (!http.ok()) return http.status();
    self->metrics_http_ = *std::move(http);
    const std::string& host = self->metrics_http_->host();
    spdlog::info("metrics on http://{}:{}/metrics", host.find(':') == std::string::npos ? host : "[" + host + "]",
                 self->metrics_http_->port());
  }
  spdlog::info("fusiond serving on {} (device {}, device limit {} bytes)", self->target(),
               self->device_->Kind(), config.device_memory_limit);
  return self;
}

DaemonServer::~DaemonServer() { Shutdown(absl::ZeroDuration()); }

DaemonServer::LockFd::~LockFd() {
  if (fd >= 0) ::close(fd);  // releases the flock
}

int DaemonServer::open_connections(uid_t uid) const {
  return connections_ != nullptr ? connections_->open(uid) : 0;
}

uint64_t DaemonServer::stalled_connections_closed() const {
  return connections_ != nullptr ? connections_->stalled_closed() : 0;
}

absl::StatusOr<std::string> DaemonServer::HealthStatus() const {
  if (jobs_ != nullptr) {
    if (absl::Status st = jobs_->CheckProgress(absl::Milliseconds(config_.watchdog_stall_ms)); !st.ok()) return st;
  }
  auto state = memory_->Snapshot();
  if (!state.ok()) return absl::Status(state.status().code(), absl::StrCat("memory state: ", state.status().message()));
  uint32_t queued = 0, running = 0;
  for (const v1::ClientUsage& c : state->clients()) queued += c.jobs_queued(), running += c.jobs_running();
  const v1::TierState& d = state->device();
  return absl::StrCat(queued, queued == 1 ? " job" : " jobs", " queued, ", running, " running; device ", d.kind(), ": ",
                      FormatBytes(d.used_bytes() + d.reserved_bytes()), " used of a ", FormatBytes(d.budget_bytes()),
                      " budget");
}

std::string DaemonServer::target() const { return absl::StrCat("unix://", config_.socket); }

void DaemonServer::Shutdown(absl::Duration drain) {
  if (shut_down_) return;
  shut_down_ = true;
  const absl::Time deadline = absl::Now() + drain;
  if (listener_) listener_->Stop();  // no new connections; socket file removed
  if (fd_exchange_) fd_exchange_->Stop();
  if (metrics_http_) metrics_http_->Stop();
  if (timeline_) timeline_->Stop();
  if (service_) service_->BeginShutdown();  // WatchMemory streams end at their next interval
  if (server_) server_->GetHealthCheckService()->Shutdown();  // every service NOT_SERVING
  // No queued job starts; running ones may finish until the deadline (calls are still served,
  // so their watchers see them end), then are interrupted at their next checkpoint and stay
  // RUNNING in the journal: they run again at the next start.
  if (jobs_) jobs_->Shutdown(deadline);
  if (server_) {
    // Calls still in flight get what is left of the drain (WatchJob streams of interrupted jobs
    // are cancelled then).
    server_->Shutdown(absl::ToChronoTime(std::max(deadline, absl::Now())));
    server_->Wait();
  }
  if (budget_watcher_) budget_watcher_->Stop();
  if (on_stopped_) on_stopped_();
}

}  // namespace fusion
