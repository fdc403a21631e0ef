// JobManager: accepts jobs, journals them, schedules them fairly and runs them.
//
// Flow: Submit() has the runner make the job's plan (JobRunner::Plan: the options validated,
// the images checked from their headers — a decompression bomb is refused here), writes the job and
// its inputs to the Journal (the job is durable before Submit returns), and pushes it on the
// FairQueue; `concurrency` worker threads pop jobs, mark them RUNNING, run them through the
// JobRunner and record the final state and result in one journal transaction. Watchers get
// JobEvents.
// Crash safety: Create() requeues every QUEUED/RUNNING job found in the journal, in submit
// order. Shutdown(deadline) starts no more jobs, lets running ones finish until the deadline,
// then interrupts the rest through the cancellation path (the runner's checkpoints: the next
// face, tile, detection pass or stage) and leaves them RUNNING in the journal, so the next start
// runs them again: a job reaches a final state exactly once, and an interrupted job is never
// recorded CANCELLED (only its owner cancels).
// Priority: live work > high > normal > low. At its yield points (JobRunner::Context::
// YieldPoint: between stages and frames, no device lease held) a running job lends its slot to
// waiting higher-priority work — a queued or yielded job that outranks it, whoever's, or live
// work (ClaimForLive) — computing nothing differently (its result: an uninterrupted run's
// bytes). A yielded job goes on (highest priority, then first yielded) once nothing that
// outranks it waits, before queued jobs of its priority: each priority runs in the time the
// ones above leave idle. At most `concurrency` jobs of a priority have started, so there are
// `concurrency` x 3 workers, `concurrency` of them running stages at a time.
// Retention: results past the journal's retention period or beyond its retention bytes are
// removed (Journal::Prune) after every finished job, and at start by a background thread in
// batches of kPruneBatchBytes, logged, while the manager serves; their ids become NOT_FOUND.
// Ownership: a job belongs to the uid that submitted it; other uids get NOT_FOUND, except an
// operator (the service decides who: FusionService's admins), who lists and cancels any job.
// Thread-safety: every method may be called concurrently; watcher callbacks are invoked with
// no lock held, from worker threads (or from Watch() itself for the first event).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "common/mutex.h"
#include "absl/time/time.h"
#include "fusion/v1/fusion.pb.h"
#include "jobs/disk_budget.h"
#include "jobs/fair_queue.h"
#include "jobs/job_runner.h"
#include "jobs/journal.h"

namespace fusion::jobs {

class JobManager {
 public:
  struct Options {
    size_t concurrency = 2;        // jobs running at once
    // The workers' threads (and so the threads they create: OpenMP teams, FFmpeg's decoders) run
    // at this nice value: wherever live frames (the sessions' threads, nice 0) or other programs
    // want the cores, batch stages get what is left, inside a unit of work as well as between
    // units (GiveWay). 0: the daemon's own. Set once, as each worker starts.
    int worker_nice = 0;
    FairQueue::Options queue;      // per-uid limit, bypass bound
    // Called with no lock held whenever queued or running jobs (or their progress through
    // their stages) change, e.g. to refresh QueueFutureReferences.
    std::function<void()> on_change;
    // Called with no lock held on a worker thread after a job has ended (its inputs, result
    // and working buffers freed) when no other job is running, e.g. to hand the freed heap
    // back to the system (common/heap_release.h). Two workers ending together may both call it.
    std::function<void()> on_idle;
    // Called with no lock held with every job event (stage started/finished, degradation,
    // done), after the job's watchers: e.g. the metrics' stage histogram and job counts.
    std::function<void(const v1::JobEvent&)> on_event;
    // Admits a job only when the state directory has room for it (may be null: no check).
    // Must outlive the manager.
    DiskBudget* disk = nullptr;
  };
  using EventCallback = std::function<void(const v1::JobEvent&)>;
  struct ClientCounts {
    size_t queued = 0;
    size_t running = 0;
  };

  // Recovers unfinished jobs from `journal` and starts the workers. `journal` and `runner`
  // must outlive the manager. `is_resident` (may be null) lets the queue prefer jobs whose
  // first model is on the device.
  static absl::StatusOr<std::unique_ptr<JobManager>> Create(Options options, Journal* journal,
                                                           JobRunner* runner,
                                                           FairQueue::IsResident is_resident);
  ~JobManager();  // Shutdown()

  // INVALID_ARGUMENT (bad options, an image CheckImages refuses), RESOURCE_EXHAUSTED (uid's
  // queue full; the state directory has no room for the job's bytes, DiskBudget, or the disk
  // filled), UNAVAILABLE (shutting down). The job's disk bytes are held until it ends.
  absl::StatusOr<v1::Job> Submit(JobSpec spec);
  absl::StatusOr<v1::Job> Get(const std::string& id, uid_t caller);
  absl::StatusOr<std::vector<v1::Job>> List(uid_t caller, const std::vector<JobState>& states,
                                            size_t limit);
  // Every uid's jobs, newest first (an operator's view).
  absl::StatusOr<std::vector<v1::Job>> ListAll(const std::vector<JobState>& states, size_t limit);
  // A queued job is CANCELLED at once; a running one at its next checkpoint (face, tile,
  // detection pass or stage): the returned Job may still say RUNNING, with cancel_requested
  // set. FAILED_PRECONDITION if already final. `operator_override`: whoever owns the job.
  absl::StatusOr<v1::Job> Cancel(const std::string& id, uid_t caller, bool operator_override = false);
  // FAILED_PRECONDITION if the job has not SUCCEEDED (with the job's error, if it has one).
  absl::StatusOr<StoredResult> Result(const std::string& id, uid_t caller);

  // Calls `callback` now with the job's current state (Queued/Done event) and then with every
  // event until Done. Returns a handle for Unwatch().
  absl::StatusOr<uint64_t> Watch(const std::string& id, uid_t caller, EventCallback callback);
  void Unwatch(uint64_t handle);

  // Result bytes pruned per journal transaction (Journal::Prune's batch).
  static constexpr uint64_t kPruneBatchBytes = 4ull << 20;

  // Live work's hold on batch jobs (a session's frame; it takes no slot): while a claim is
  // alive every running job yields at its next yield point (a stage in progress ends first)
  // and no queued or yielded job starts. Hold one per frame, arrival to result, never per
  // session: batch jobs run between frames. Movable; Release() or the destructor ends it.
  class LiveClaim {
   public:
    LiveClaim() = default;
    LiveClaim(LiveClaim&& other) noexcept : manager_(std::exchange(other.manager_, nullptr)) {}
    LiveClaim& operator=(LiveClaim&& other) noexcept;
    ~LiveClaim() { Release(); }
    void Release();
   private:
    friend class JobManager;
    explicit LiveClaim(JobManager* manager) : manager_(manager) {}
    JobManager* manager_ = nullptr;
  };
  LiveClaim ClaimForLive();
  // Blocks while a LiveClaim is alive, for at most `max_wait` (JobRunner::Context::GiveWay:
  // batch stages, and a live session's keyframe scans, pause between their units while live
  // frames run). Any thread; never with a lock of the caller's held.
  void GiveWayToLive(absl::Duration max_wait);
  // The bound of one GiveWay: a frame's work is 30-80 ms on 2 cores (PERFORMANCE.md#live-sessions).
  static constexpr absl::Duration kGiveWayMax = absl::Milliseconds(250);

  std::map<uid_t, ClientCounts> CountsByUid();
  // The job loop's health for the service watchdog: DEADLINE_EXCEEDED naming the job and its
  // stage when a running job gave no sign of life (a stage event or a checkpoint: every face,
  // tile and detection pass) for longer than `stall`. Blocks while the manager's lock is held
  // (a deadlocked manager is unhealthy too: the caller's ping stops).
  absl::Status CheckProgress(absl::Duration stall);
  // Models of the stages not yet run: running jobs first, then queued jobs in start order.
  std::vector<std::vector<std::string>> UpcomingStages(size_t max_jobs);
  // Refuses new jobs and starts no queued one; running jobs may finish until `deadline`, then
  // are interrupted (JobRunner::Context::Cancelled() turns true) and stay RUNNING in the
  // journal. Returns once every worker has stopped: the deadline plus one checkpoint interval
  // of the slowest running job. The default deadline interrupts at once. Idempotent.
  void Shutdown(absl::Time deadline = absl::InfinitePast());

 private:
  struct Running;
  class RunContext;
  JobManager(Options options, Journal* journal, JobRunner* runner,
             FairQueue::IsResident is_resident);
  void WorkerLoop();
  void RunOne(const FairQueue::Entry& entry);
  absl::StatusOr<JobRecord> Owned(const std::string& id, uid_t caller);
  v1::Job ToProto(const JobRecord& record);
  void Emit(const std::string& id, v1::JobEvent event, bool final);
  void ReleaseDisk(const std::string& id);
  // The start's pruning: Journal::Prune in batches until nothing is left or Shutdown.
  void PruneBacklog();
  // Yielding (see the header's Priority): the yield point of a running job; whether a worker
  // may start the queued job that outranks every yielded one; whether a yielded job may go on.
  void Yield(Running& job);
  bool CanStart() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool MustYield(const Running& job) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool CanResume(const Running& job) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The best yielded job (highest priority, then first yielded); null when none.
  const Running* BestYielded() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A job leaves running_ (ended, or interrupted and left RUNNING): its slot is free.
  void Retire(const std::string& id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Options options_;
  Journal* const journal_;
  JobRunner* const runner_;
  const FairQueue::IsResident is_resident_;
  FairQueue queue_;

  Mutex mu_;
  // Signalled under mu_ when shutdown_ is set, a job is queued, yields, ends or is cancelled or
  // interrupted, or a LiveClaim ends: workers wait for a job they may start (or shutdown),
  // yielded jobs for their turn, Shutdown() for running_ to empty.
  CondVar changed_;
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
  absl::flat_hash_map<std::string, std::shared_ptr<Running>> running_ ABSL_GUARDED_BY(mu_);
  // Jobs of running_ that hold a slot (not yielded): <= concurrency, but for a yielded job
  // woken by its cancel, which ends at its next checkpoint.
  size_t active_ ABSL_GUARDED_BY(mu_) = 0;
  size_t live_claims_ ABSL_GUARDED_BY(mu_) = 0;  // LiveClaims alive
  uint64_t next_yield_ ABSL_GUARDED_BY(mu_) = 1;  // orders yielded jobs of one priority
  struct Watcher {
    std::string job_id;
    EventCallback callback;
  };
  absl::flat_hash_map<uint64_t, Watcher> watchers_ ABSL_GUARDED_BY(mu_);
  // Job id -> its DiskBudget ticket, from Submit until the job ends.
  absl::flat_hash_map<std::string, uint64_t> disk_tickets_ ABSL_GUARDED_BY(mu_);
  uint64_t next_watch_ ABSL_GUARDED_BY(mu_) = 1;
  std::vector<std::thread> workers_;
  std::thread pruner_;  // PruneBacklog, joined by Shutdown
};

}  // namespace fusion::jobs
