// Daemon (daemon.h): the parts in start order, stopped in reverse.
#include "daemon.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cstring>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "base/size.h"
#include "common/heap_release.h"
#include "device/cgroup_memory.h"
#include "device/device.h"
#include "device/host_memory.h"
#include "jobs/disk_budget.h"
#include "jobs/job_manager.h"
#include "jobs/journal.h"
#include "jobs/queue_future_references.h"
#include "jobs/state_dir.h"
#include "memory/budget_watcher.h"
#include "memory/residency_manager.h"
#include "observe/memory_timeline.h"
#include "rpc/live_sessions.h"
#include "observe/metrics.h"
#include "observe/metrics_http.h"
#include "rpc/memory_state.h"
#include "rpc/rpc_server.h"
#include "systemd/socket_activation.h"
#include "spdlog/spdlog.h"
#include "base/status_macros.h"

namespace fusion {

absl::StatusOr<std::unique_ptr<Daemon>> Daemon::Create(const DaemonConfig& config,
                                                       std::unique_ptr<jobs::Backend> backend) {
  std::unique_ptr<Daemon> self(new Daemon());
  self->config_ = config;
  self->backend_ = std::move(backend);
  // Socket activation: inherited sockets replace --socket (systemd/socket_activation.h).
  ASSIGN_OR_RETURN(auto inherited, TakeInheritedSockets());
  if (inherited.main_fd >= 0) {
    spdlog::info("socket activation: serving on the inherited {}{} (fd {}{})", inherited.main_path,
                 inherited.main_path == config.socket ? "" : absl::StrCat(", not ", config.socket), inherited.main_fd,
                 inherited.fd_fd >= 0 ? absl::StrCat(", and its .fd socket on fd ", inherited.fd_fd) : "");
    self->config_.socket = inherited.main_path;
  }
  RETURN_IF_ERROR(self->StartMemory());
  jobs::JobRunner* runner = nullptr;
  RETURN_IF_ERROR(self->StartBackend(&runner));
  // Bind first: a second daemon must fail here, before it builds anything else.
  ASSIGN_OR_RETURN(self->rpc_, RpcServer::Bind(self->config_, inherited.main_fd));
  if (runner != nullptr) {
    RETURN_IF_ERROR(self->OpenJobs(runner));
  }
  RETURN_IF_ERROR(self->Serve(inherited));
  RETURN_IF_ERROR(self->StartMetricsEndpoint());
  spdlog::info("fusiond serving on {} (device {}, device limit {} bytes, keep-alive {}, eviction policy {})",
               self->target(), self->device_->Kind(), config.device_memory_limit,
               config.keep_alive_ms == kDurationForever ? "forever"
                                                       : absl::FormatDuration(absl::Milliseconds(config.keep_alive_ms)),
               config.eviction_policy);
  return self;
}

// The host tier is always budgeted (docs/ARCHITECTURE.md#invariants): without a limit, half of
// MemTotal. Under a cgroup memory cap (systemd's MemoryMax=, a container) MemTotal is the cap.
absl::Status Daemon::StartMemory() {
  std::optional<CgroupMemoryLimit> cgroup;
  ASSIGN_OR_RETURN(auto host, ReadProcessHostMemory(&cgroup));
  if (cgroup) {
    spdlog::info("memory cap {} bytes ({}): host and cpu device figures are capped at it", cgroup->limit_bytes,
                 cgroup->where);
  }
  uint64_t& host_limit = config_.host_memory_limit;
  if (host_limit == 0) {
    host_limit = DefaultHostMemoryLimit(host);
    spdlog::info("host memory limit {} bytes (half of {}; --host-memory-limit sets it)", host_limit,
                 cgroup ? "the cgroup's memory cap" : "MemTotal");
  } else if (cgroup && host_limit > cgroup->limit_bytes) {
    spdlog::warn("--host-memory-limit {} bytes is above the cgroup's memory cap {} bytes ({}): the kernel kills "
                 "fusiond before the host tier refuses",
                 host_limit, cgroup->limit_bytes, cgroup->where);
  }
  ASSIGN_OR_RETURN(auto device, OpenDevice(config_.device));
  device_ = std::move(device);
  // The forecast's rotation has as many slots as jobs run at once.
  future_refs_ = std::make_unique<jobs::QueueFutureReferences>(config_.max_concurrent_jobs);
  jobs::Backend* backend = backend_.get();
  ASSIGN_OR_RETURN(auto residency, ResidencyManager::Create(
      {.host_budget_bytes = host_limit,
       .policy = config_.eviction_policy,  // checked by ValidateConfig
       .loader = backend != nullptr ? backend->loader() : nullptr,
       .future = future_refs_.get(),  // lookahead, planner and the keep-alive see the queued jobs' stages
       // One-shot models (detect, landmarks) go right after use under device pressure.
       .one_shot_pressure = config_.one_shot_pressure,
       .one_shot_min_free_bytes = config_.one_shot_min_free,
       .keep_alive = KeepAlive(config_),
       .keep_alive_thread = true,
       // The device is idle and empty: its allocator's cache goes back to the driver.
       .on_device_empty = [backend] {
         if (backend != nullptr) backend->OnDeviceEmpty();
       }}));
  residency_ = std::move(residency);
  auto watcher = BudgetWatcher::Create(device_.get(), residency_.get(),
                                       {.device_limit = config_.device_memory_limit,
                                        .device_reserve = config_.device_memory_reserve,
                                        .host_limit = host_limit,
                                        .on_device_budget = [backend](uint64_t bytes) {
                                          if (backend != nullptr) backend->OnDeviceBudget(bytes);
                                        }});
  if (!watcher.ok()) return watcher.status();
  budget_watcher_ = *std::move(watcher);
  return absl::OkStatus();
}

absl::Status Daemon::StartBackend(jobs::JobRunner** runner) {
  if (backend_ == nullptr) return absl::OkStatus();
  ASSIGN_OR_RETURN(auto started, backend_->Start(*residency_));
  *runner = started;
  return absl::OkStatus();
}

// 0700, fusiond's files in it 0600 and its own (jobs/state_dir.h); one fusiond per state
// directory: two on one journal would both requeue and run its jobs.
absl::Status Daemon::LockStateDir() {
  const std::string& dir = config_.state_dir;
  RETURN_IF_ERROR(jobs::PrepareStateDir(dir, ::geteuid()));
  const std::string lock_path = dir + "/lock";
  state_lock_.fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (state_lock_.fd < 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("state_dir '", dir, "': cannot open ", lock_path, ": ", std::strerror(errno)));
  }
  if (::flock(state_lock_.fd, LOCK_EX | LOCK_NB) != 0) {
    char pid[32] = {};
    const ssize_t n = ::pread(state_lock_.fd, pid, sizeof(pid) - 1, 0);
    return absl::FailedPreconditionError(absl::StrCat(
        "state_dir '", dir, "' is in use by another fusiond",
        n > 0 ? absl::StrCat(" (pid ", absl::StripAsciiWhitespace(absl::string_view(pid, n)), ")") : "",
        ": its journal holds that daemon's jobs; give this one its own --state-dir"));
  }
  const std::string own_pid = absl::StrCat(getpid(), "\n");
  if (::ftruncate(state_lock_.fd, 0) != 0 ||
      ::pwrite(state_lock_.fd, own_pid.data(), own_pid.size(), 0) != static_cast<ssize_t>(own_pid.size())) {
    spdlog::warn("state_dir lock {}: cannot write the pid: {}", lock_path, std::strerror(errno));
  }
  return absl::OkStatus();
}

absl::Status Daemon::OpenJobs(jobs::JobRunner* runner) {
  RETURN_IF_ERROR(LockStateDir());
  const std::string& dir = config_.state_dir;
  // Images are files, not journal rows: inputs under inputs/, results under results/ (with
  // the video results).
  ASSIGN_OR_RETURN(auto journal, jobs::Journal::Open({.path = dir + "/journal.sqlite3",
                                      .retention = absl::Milliseconds(config_.result_retention_ms),
                                      .retention_bytes = config_.result_retention_bytes,
                                      .results_dir = dir + "/results",
                                      .inputs_dir = dir + "/inputs"}));
  journal_ = std::move(journal);
  // Within fairness the queue prefers a job whose first model is already on the device.
  ResidencyManager* residency = residency_.get();
  auto is_resident = [residency](const std::string& model) {
    for (const ModelSnapshot& m : residency->Snapshot().models) {
      if (m.name == model) return m.state == ModelState::kDevice || m.state == ModelState::kInUse;
    }
    return false;
  };
  jobs::QueueFutureReferences* refs = future_refs_.get();
  metrics_ = std::make_unique<Metrics>();
  jobs::JobManager::Options options{.concurrency = config_.max_concurrent_jobs,
                                    .worker_nice = static_cast<int>(config_.job_nice),
                                    .on_change =
                                        [refs, residency] {
                                          refs->Refresh();
                                          residency->PrepareEviction();
                                        },
                                    .on_idle = [] { ReleaseFreeHeap(); },
                                    .on_event = [m = metrics_.get()](const v1::JobEvent& e) { m->OnJobEvent(e); }};
  options.queue.max_queued_per_uid = config_.max_queued_jobs_per_uid;
  disk_ = std::make_unique<jobs::DiskBudget>(dir, jobs::DiskBudget::StatvfsProbe(dir));
  options.disk = disk_.get();
  ASSIGN_OR_RETURN(jobs_, jobs::JobManager::Create(std::move(options), journal_.get(), runner, is_resident));
  refs->SetSource([jobs = jobs_.get()] { return jobs->UpcomingStages(64); });
  refs->SetModelInfo([residency] {
    absl::flat_hash_map<std::string, jobs::QueueFutureReferences::ModelInfo> info;
    // The working set each model's last Acquire asked for: the planner's room at that stage is the
    // budget less it (without it the plan counted the whole budget for models at every stage).
    for (const ModelSnapshot& m : residency->Snapshot().models) {
      info[m.name] = {m.bytes, m.pinned, m.last_working_bytes};
    }
    return info;
  });
  refs->Refresh();
  return absl::OkStatus();
}

absl::Status Daemon::Serve(const InheritedSockets& inherited) {
  // Live frames are counted in the metrics (made here when there is no job queue).
  if (metrics_ == nullptr) metrics_ = std::make_unique<Metrics>();
  live_sessions_ = std::make_unique<LiveSessionRegistry>(
      [m = metrics_.get()](LiveSessionRegistry::FrameEvent event, double total_ms) {
        switch (event) {
          case LiveSessionRegistry::FrameEvent::kReceived: return m->OnLiveFrameReceived();
          case LiveSessionRegistry::FrameEvent::kDropped: return m->OnLiveFrameDropped();
          case LiveSessionRegistry::FrameEvent::kReturned: return m->OnLiveFrameReturned(total_ms);
        }
      });
  JobCountsFn job_counts;
  if (jobs_ != nullptr) {
    job_counts = [jobs = jobs_.get()] {
      std::map<uint32_t, UidJobCounts> out;
      for (const auto& [uid, c] : jobs->CountsByUid()) {
        out[uid] = {static_cast<uint32_t>(c.queued), static_cast<uint32_t>(c.running)};
      }
      return out;
    };
  }
  memory_ = std::make_unique<ResidencyMemoryStateSource>(
      device_.get(), residency_.get(),
      TierLimits{config_.device_memory_limit, config_.device_memory_reserve, config_.host_memory_limit},
      std::move(job_counts), live_sessions_.get());
  auto admins = AdminPolicy::Create(config_.admin_uids, config_.admin_group);
  if (!admins.ok()) return admins.status();
  return rpc_->Serve(
      config_,
      {.options = {.allowed_uids = config_.allowed_uids,
                   .admins = *std::move(admins),
                   .max_watch_streams_per_uid = static_cast<int>(config_.max_watch_streams_per_uid),
                   .max_live_sessions_per_uid = static_cast<int>(config_.max_live_sessions_per_uid),
                   .max_message_bytes = config_.max_message_bytes},
       .memory = memory_.get(),
       .jobs = jobs_.get(),
       .residency = residency_.get(),
       .catalogue = backend_ != nullptr ? backend_->catalogue() : nullptr,
       .live = jobs_ != nullptr ? backend_->live_runner() : nullptr,
       .live_sessions = live_sessions_.get(),
       .inherited_fd_socket = inherited.fd_fd});
}

absl::Status Daemon::StartMetricsEndpoint() {
  if (config_.metrics_listen.empty()) return absl::OkStatus();
  if (metrics_ == nullptr) metrics_ = std::make_unique<Metrics>();  // no job queue: no job counts
  Metrics* metrics = metrics_.get();
  MemoryStateSource* memory = memory_.get();
  // The memory timeline: a sample every 250 ms, the last 15 minutes (observe/memory_timeline.h).
  timeline_ = std::make_unique<MemoryTimeline>(3600);
  timeline_->Start(absl::Milliseconds(250), [memory] { return memory->Snapshot(); });
  MemoryTimeline* timeline = timeline_.get();
  auto http = MetricsHttpServer::Start(
      config_.metrics_listen,
      [metrics, memory]() -> absl::StatusOr<std::string> {
        ASSIGN_OR_RETURN(auto state, memory->Snapshot());
        return metrics->Exposition(state);
      },
      [timeline](int64_t since) { return timeline->JsonLines(since); });
  if (!http.ok()) return http.status();
  metrics_http_ = *std::move(http);
  const std::string& host = metrics_http_->host();
  spdlog::info("metrics on http://{}:{}/metrics", host.find(':') == std::string::npos ? host : "[" + host + "]",
               metrics_http_->port());
  return absl::OkStatus();
}

Daemon::~Daemon() { Shutdown(absl::ZeroDuration()); }

Daemon::LockFd::~LockFd() {
  if (fd >= 0) ::close(fd);  // releases the flock
}

std::string Daemon::target() const { return absl::StrCat("unix://", config_.socket); }

int Daemon::open_connections(uid_t uid) const { return rpc_ != nullptr ? rpc_->open_connections(uid) : 0; }

uint64_t Daemon::stalled_connections_closed() const {
  return rpc_ != nullptr ? rpc_->stalled_connections_closed() : 0;
}

absl::StatusOr<std::string> Daemon::HealthStatus() const {
  if (jobs_ != nullptr) {
    RETURN_IF_ERROR(jobs_->CheckProgress(absl::Milliseconds(config_.watchdog_stall_ms)));
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

void Daemon::Shutdown(absl::Duration drain) {
  if (shut_down_) return;
  shut_down_ = true;
  const absl::Time deadline = absl::Now() + drain;
  if (rpc_) rpc_->StopAccepting();
  if (metrics_http_) metrics_http_->Stop();
  if (timeline_) timeline_->Stop();
  // No queued job starts; running ones may finish until the deadline (calls are still served,
  // so their watchers see them end), then are interrupted at their next checkpoint and stay
  // RUNNING in the journal: they run again at the next start.
  if (jobs_) jobs_->Shutdown(deadline);
  // Calls still in flight get what is left of the drain (WatchJob streams of interrupted jobs
  // are cancelled then).
  if (rpc_) rpc_->Finish(deadline);
  if (budget_watcher_) budget_watcher_->Stop();
  if (backend_) backend_->Stop();
}

}  // namespace fusion
