// Daemon: fusiond's composition root. It builds the daemon's parts in start order and stops
// them in reverse (docs/ARCHITECTURE.md#start-and-stop):
//   1. memory:  the device, the residency manager (host budget from the configuration or half
//               of MemTotal/the cgroup cap) and the BudgetWatcher that re-evaluates budgets;
//   2. backend: its models registered and its job runner built over the residency manager;
//   3. rpc:     the socket bound (a second daemon fails here, before anything else is built);
//   4. jobs:    the state directory locked, the journal, the disk budget and the JobManager
//               (unfinished jobs requeued) — only with a job runner;
//   5. serving: the memory-state source, the gRPC service, the fd socket, accepting;
//   6. observe: the metrics endpoint and its memory timeline, when metrics_listen is set.
// Shutdown() stops accepting, lets running jobs and calls drain until a deadline, interrupts
// the rest (they stay RUNNING in the journal and run again at the next start), stops the budget
// watcher and the backend; the destructor then frees the parts bottom up.
// Thread-safety: Create, Shutdown and the destructor from one controlling thread; the others
// from any thread.
// Errors: OpenDevice()'s, the backend's Start, RpcServer::Bind's (FAILED_PRECONDITION "another
// fusiond is serving on ..."), the state directory's (in use by another fusiond, not ownable)
// and Journal::Open()'s.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "config/config.h"
#include "jobs/backend.h"

namespace fusion {

namespace jobs {
class DiskBudget;
class JobManager;
class JobRunner;
class Journal;
class QueueFutureReferences;
}  // namespace jobs

class BudgetWatcher;
class Device;
class LiveSessionRegistry;
class MemoryStateSource;
class MemoryTimeline;
class Metrics;
class MetricsHttpServer;
class ResidencyManager;
class RpcServer;
struct InheritedSockets;

class Daemon {
 public:
  // Builds and starts every part; `backend` may be null (no jobs, no models).
  static absl::StatusOr<std::unique_ptr<Daemon>> Create(const DaemonConfig& config,
                                                        std::unique_ptr<jobs::Backend> backend);
  ~Daemon();  // Shutdown(zero drain)

  // "unix:///path/to.sock".
  std::string target() const;
  // The residency manager.
  ResidencyManager* residency() const { return residency_.get(); }
  // gRPC connections (on the main socket) of `uid` open now.
  int open_connections(uid_t uid) const;
  // gRPC connections closed so far because their peer stopped reading.
  uint64_t stalled_connections_closed() const;
  // The health probe behind systemd's watchdog (systemd/service_notifier.h): the job loop
  // (JobManager::CheckProgress at watchdog_stall_ms), then a memory-state snapshot (the
  // device's query). OK: a one-line status ("1 job queued, 1 running; device cpu: 412 MiB
  // used of a 6 GiB budget"). Blocks while either is stuck.
  absl::StatusOr<std::string> HealthStatus() const;
  // Stops accepting, marks health NOT_SERVING, starts no queued job, waits up to `drain` for
  // running jobs and in-flight calls, then interrupts the jobs still running and cancels the
  // calls. Returns about one checkpoint interval (a face or tile) after the drain at most.
  // Idempotent.
  void Shutdown(absl::Duration drain);

 private:
  Daemon() = default;
  absl::Status StartMemory();
  absl::Status StartBackend(jobs::JobRunner** runner);
  absl::Status LockStateDir();
  absl::Status OpenJobs(jobs::JobRunner* runner);
  absl::Status Serve(const InheritedSockets& inherited);
  absl::Status StartMetricsEndpoint();

  DaemonConfig config_;
  std::unique_ptr<jobs::Backend> backend_;  // outlives every part that calls it
  std::unique_ptr<Device> device_;
  // Before residency_: the manager asks it for next uses until the manager is gone.
  std::unique_ptr<jobs::QueueFutureReferences> future_refs_;
  std::unique_ptr<ResidencyManager> residency_;
  std::unique_ptr<BudgetWatcher> budget_watcher_;
  // The open live sessions (before memory_ and rpc_: both read it until they are gone). Its
  // frame hook counts into metrics_; only rpc_'s sessions call it.
  std::unique_ptr<LiveSessionRegistry> live_sessions_;
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
  std::unique_ptr<RpcServer> rpc_;
  std::unique_ptr<MemoryTimeline> timeline_;         // sampled while the metrics endpoint is on
  std::unique_ptr<MetricsHttpServer> metrics_http_;  // last: stopped first
  bool shut_down_ = false;
};

}  // namespace fusion
