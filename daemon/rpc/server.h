// DaemonServer: fusiond's gRPC server on its Unix socket.
//
// Owns the device, the residency manager (budgets from the configuration, re-evaluated by a
// BudgetWatcher every second), the memory-state source, the fusion.v1 service, gRPC's default
// grpc.health.v1 service (service names "" and "fusion.v1.Fusion" report SERVING while up) and
// the UdsListener that feeds accepted connections to gRPC, and the companion fd socket
// ("<socket>.fd", FdExchange) for zero-copy memfd images.
// Lifecycle: Create() (socket bound, serving) -> Shutdown() (stop accepting, NOT_SERVING, drain
// running jobs and in-flight calls up to a deadline, interrupt the rest, socket file removed).
// The destructor shuts down.
// Thread-safety: Shutdown() and Wait() may be called from different threads; Shutdown() once.
#pragma once

#include <sys/types.h>

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "config/config.h"

namespace grpc {
class Server;
}

namespace fusion {

namespace jobs {
class JobManager;
class QueueFutureReferences;
class JobRunner;
class Journal;
class DiskBudget;
}  // namespace jobs

namespace models {
class ModelCatalogue;
}

class BudgetWatcher;
class ModelLoader;
class Device;
class FusionService;
class MemoryStateSource;
class ResidencyManager;
class UdsListener;
class FdExchange;
class MemfdRegistry;
class ConnectionLimiter;
class Metrics;
class MetricsHttpServer;
class MemoryTimeline;

// How the LibTorch part (models, pipeline; built outside fusiond_core) attaches to the server.
struct ServerHooks {
  // The residency manager's loader (the model store); null = no models.
  ModelLoader* loader = nullptr;
  // The catalogue, for ListModels (stage, tileable); null = model RPCs answer UNIMPLEMENTED.
  const models::ModelCatalogue* catalogue = nullptr;
  // Called once the residency manager exists, before jobs run: registers the models and returns
  // the job runner built over the manager (null = none; the `runner` argument is used then).
  std::function<absl::StatusOr<jobs::JobRunner*>(ResidencyManager&)> on_residency;
  // Called with every new device budget (BudgetWatcher::Options::on_device_budget).
  std::function<void(uint64_t)> on_device_budget;
  // Called once at the end of Shutdown (no job runs and no call is served any more), before the
  // residency manager is destroyed: what was built over it returns the leases it still holds
  // (the source-face cache's host slabs).
  std::function<void()> on_stopped;
};

class DaemonServer {
 public:
  // Opens the device, binds the socket and starts serving. With a `runner` (the pipeline;
  // must outlive the server) it also opens the job journal in config.state_dir, requeues
  // unfinished jobs and serves the job methods; without one they answer UNIMPLEMENTED.
  // Errors: those of OpenDevice(), UdsListener::Create() (e.g. FAILED_PRECONDITION "another
  // fusiond is serving on ...") and Journal::Open().
  static absl::StatusOr<std::unique_ptr<DaemonServer>> Create(const DaemonConfig& config,
                                                             jobs::JobRunner* runner = nullptr,
                                                             ServerHooks hooks = {});
  ~DaemonServer();

  // "unix:///path/to.sock".
  std::string target() const;
  // The residency manager (the models and pipeline components attach to it).
  ResidencyManager* residency() const { return residency_.get(); }
  // gRPC connections (on the main socket) of `uid` open now.
  int open_connections(uid_t uid) const;
  // gRPC connections closed so far because their peer stopped reading (stalled_connection_timeout_ms).
  uint64_t stalled_connections_closed() const;
  // The health probe behind systemd's watchdog (rpc/service_notifier.h): the job loop
  // (JobManager::CheckProgress at watchdog_stall_ms), then a memory-state snapshot (the
  // device's query). OK: a one-line status ("1 job queued, 1 running; device cpu: 412 MiB
  // used of a 6 GiB budget"). Blocks while either is stuck. Thread-safe.
  absl::StatusOr<std::string> HealthStatus() const;
  // Stops accepting, marks health NOT_SERVING, starts no queued job, waits up to `drain` for
  // running jobs and in-flight calls, then interrupts the jobs still running (they stay
  // RUNNING in the journal and run again at the next start; JobManager::Shutdown) and cancels
  // the calls. Returns about one checkpoint interval (a face or tile) after the drain at most.
  // Idempotent.
  void Shutdown(absl::Duration drain);

 private:
  DaemonServer() = default;

  DaemonConfig config_;
  std::unique_ptr<Device> device_;
  // Before residency_: the manager asks it for next uses until the manager is gone.
  std::unique_ptr<jobs::QueueFutureReferences> future_refs_;
  std::unique_ptr<ResidencyManager> residency_;
  std::unique_ptr<BudgetWatcher> budget_watcher_;
  std::function<void()> on_stopped_;  // ServerHooks::on_stopped
  std::unique_ptr<MemoryStateSource> memory_;
  std::unique_ptr<Metrics> metrics_;  // before jobs_: its event hook counts into it
  // flock(2) on <state_dir>/lock for the daemon's life, so a second fusiond cannot run the same
  // journal's jobs (closed after journal_: declared before it).
  struct LockFd {
    int fd = -1;
    ~LockFd();
  } state_lock_;
  std::unique_ptr<jobs::Journal> journal_;
  std::unique_ptr<jobs::DiskBudget> disk_;  // the state directory's room (before jobs_: it uses it)
  std::unique_ptr<jobs::JobManager> jobs_;
  std::unique_ptr<FusionService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<ConnectionLimiter> connections_;  // consulted by listener_'s thread
  std::unique_ptr<UdsListener> listener_;
  std::unique_ptr<MemfdRegistry> memfds_;
  std::unique_ptr<FdExchange> fd_exchange_;
  std::unique_ptr<MemoryTimeline> timeline_;         // sampled while the metrics endpoint is on
  std::unique_ptr<MetricsHttpServer> metrics_http_;  // last: stopped first
  bool shut_down_ = false;
};

}  // namespace fusion
