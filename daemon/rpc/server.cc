#include "rpc/server.h"

#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/server_posix.h>

#include <algorithm>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "jobs/job_manager.h"
#include "jobs/queue_future_references.h"
#include "jobs/journal.h"
#include "device/device.h"
#include "device/host_memory.h"
#include "rpc/fd_exchange.h"
#include "memory/budget_watcher.h"
#include "memory/residency_manager.h"
#include "rpc/fusion_service.h"
#include "rpc/memfd_registry.h"
#include "rpc/memory_state.h"
#include "rpc/uds_listener.h"
#include "spdlog/spdlog.h"

namespace fusion {

inline constexpr char kServiceName[] = "fusion.v1.Fusion";

absl::StatusOr<std::unique_ptr<DaemonServer>> DaemonServer::Create(const DaemonConfig& config,
                                                                 jobs::JobRunner* runner,
                                                                 ServerHooks hooks) {
  std::unique_ptr<DaemonServer> self(new DaemonServer());
  self->config_ = config;
  // The host tier is always budgeted (DESIGN.md §3): without a limit, half of MemTotal.
  uint64_t host_limit = config.host_memory_limit;
  if (host_limit == 0) {
    auto host = ReadHostMemory();
    if (!host.ok()) return host.status();
    host_limit = DefaultHostMemoryLimit(*host);
    spdlog::info("host memory limit {} bytes (half of MemTotal; --host-memory-limit sets it)", host_limit);
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
  if (hooks.on_residency) {
    auto attached = hooks.on_residency(*self->residency_);
    if (!attached.ok()) return attached.status();
    if (*attached != nullptr) runner = *attached;
  }
  self->budget_watcher_ = *std::move(watcher);

  // Bind first: a second daemon must fail here, before it builds anything else.
  auto listener = UdsListener::Create({.path = config.socket, .group = config.socket_group});
  if (!listener.ok()) return listener.status();
  self->listener_ = *std::move(listener);
  self->memfds_ = std::make_unique<MemfdRegistry>(MemfdRegistry::Options{});
  if (runner != nullptr) {
    std::error_code ec;
    std::filesystem::create_directories(config.state_dir, ec);
    if (ec) {
      return absl::FailedPreconditionError(
          absl::StrCat("state_dir '", config.state_dir, "': ", ec.message()));
    }
    auto journal = jobs::Journal::Open({.path = config.state_dir + "/journal.sqlite3",
                                        .retention = absl::Seconds(config.result_retention_s),
                                        .retention_bytes = config.result_retention_bytes});
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
    auto manager = jobs::JobManager::Create({.concurrency = config.max_concurrent_jobs,
                                             .on_change = [refs] { refs->Refresh(); }},
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
  self->service_ = std::make_unique<FusionService>(
      FusionService::Options{.allowed_uids = config.allowed_uids}, self->memory_.get(),
      self->jobs_.get(), self->memfds_.get(), hooks.catalogue != nullptr ? self->residency_.get() : nullptr,
      hooks.catalogue);
  auto fd_exchange = FdExchange::Create(config.socket, config.socket_group, config.allowed_uids,
                                        self->memfds_.get());
  if (!fd_exchange.ok()) return fd_exchange.status();
  self->fd_exchange_ = *std::move(fd_exchange);

  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  builder.RegisterService(self->service_.get());
  builder.SetMaxReceiveMessageSize(static_cast<int>(config.max_message_bytes));
  builder.SetMaxSendMessageSize(static_cast<int>(config.max_message_bytes));
  // Idle clients do not keep connections (and their fds) forever.
  builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS, 10 * 60 * 1000);
  self->server_ = builder.BuildAndStart();
  if (self->server_ == nullptr) return absl::InternalError("gRPC server failed to start");
  self->server_->GetHealthCheckService()->SetServingStatus(kServiceName, true);

  grpc::Server* server = self->server_.get();
  self->listener_->Start([server](int fd) { grpc::AddInsecureChannelFromFd(server, fd); });
  spdlog::info("fusiond serving on {} (device {}, device limit {} bytes)", self->target(),
               self->device_->Kind(), config.device_memory_limit);
  return self;
}

DaemonServer::~DaemonServer() { Shutdown(absl::ZeroDuration()); }

std::string DaemonServer::target() const { return absl::StrCat("unix://", config_.socket); }

void DaemonServer::Shutdown(absl::Duration drain) {
  if (shut_down_) return;
  shut_down_ = true;
  const absl::Time deadline = absl::Now() + drain;
  if (listener_) listener_->Stop();  // no new connections; socket file removed
  if (fd_exchange_) fd_exchange_->Stop();
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
}

}  // namespace fusion
