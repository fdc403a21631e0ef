// JobManager's yielding: a running job gives its slot to higher-priority work at its yield
// points (job_manager.h, Priority).
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "jobs/job_manager.h"
#include "jobs/running_job.h"
#include "spdlog/spdlog.h"

namespace fusion::jobs {

// Yielding (the header's Priority). A job yields only where its runner holds no device lease,
// so the work it yields to is admitted as if it ran alone (ARCHITECTURE.md#invariants, 4); the
// residency manager may evict the yielded job's models meanwhile, and its next stage's lease
// loads them again.

JobManager::LiveClaim& JobManager::LiveClaim::operator=(LiveClaim&& other) noexcept {
  if (this != &other) {
    Release();
    manager_ = std::exchange(other.manager_, nullptr);
  }
  return *this;
}

void JobManager::LiveClaim::Release() {
  JobManager* m = std::exchange(manager_, nullptr);
  if (m == nullptr) return;
  MutexLock lock(&m->mu_);
  --m->live_claims_;
  m->changed_.SignalAll();  // yielded and queued jobs may go on
}

JobManager::LiveClaim JobManager::ClaimForLive() {
  MutexLock lock(&mu_);
  ++live_claims_;
  return LiveClaim(this);
}

void JobManager::GiveWayToLive(absl::Duration max_wait) {
  const absl::Time deadline = absl::Now() + max_wait;
  MutexLock lock(&mu_);
  // changed_ is signalled when a claim ends (LiveClaim::Release).
  while (live_claims_ > 0 && !shutdown_ && absl::Now() < deadline) changed_.WaitWithDeadline(&mu_, deadline);
}

const JobManager::Running* JobManager::BestYielded() const {
  const Running* best = nullptr;
  for (const auto& [id, r] : running_) {
    if (!r->yielded) continue;
    if (best == nullptr || r->priority > best->priority ||
        (r->priority == best->priority && r->yield_order < best->yield_order)) {
      best = r.get();
    }
  }
  return best;
}

bool JobManager::CanStart() const {
  if (live_claims_ > 0 || active_ >= options_.concurrency) return false;
  const std::optional<Priority> top = queue_.TopPriority();
  if (!top) return false;
  // A queued job starts before a yielded one only when it outranks it.
  const Running* yielded = BestYielded();
  return yielded == nullptr || *top > yielded->priority;
}

bool JobManager::MustYield(const Running& job) const {
  if (job.cancel || job.interrupt || shutdown_) return false;
  if (live_claims_ > 0) return true;
  if (active_ < options_.concurrency) return false;  // the waiting work has a slot already
  const std::optional<Priority> queued = queue_.TopPriority();
  const Running* yielded = BestYielded();
  return (queued && *queued > job.priority) || (yielded != nullptr && yielded->priority > job.priority);
}

bool JobManager::CanResume(const Running& job) const {
  if (job.cancel || job.interrupt) return true;  // ends at its next checkpoint
  if (live_claims_ > 0 || active_ >= options_.concurrency || BestYielded() != &job) return false;
  // While stopping nothing queued starts: yielded jobs go on in their turn until the deadline.
  const std::optional<Priority> queued = shutdown_ ? std::nullopt : queue_.TopPriority();
  return !queued || *queued <= job.priority;
}

void JobManager::Yield(Running& job) {
  const absl::Time since = absl::Now();
  std::string stage;
  {
    MutexLock lock(&mu_);
    if (!MustYield(job)) return;
    stage = job.stage;
    job.yielded = true;
    job.yield_order = next_yield_++;
    job.stage = absl::StrCat(stage, stage.empty() ? "" : " ", "(yielding to higher-priority work)");
    --active_;
    changed_.SignalAll();  // a worker may start the waiting job in this slot
    while (!CanResume(job)) changed_.WaitWithDeadline(&mu_, absl::InfiniteFuture());
    job.yielded = false;
    job.stage = stage;
    ++active_;
    job.alive_ms = NowMs();
  }
  spdlog::info("job {}: yielded {} ms to higher-priority work, after '{}'", job.record.id,
               absl::ToInt64Milliseconds(absl::Now() - since), stage);
}

void JobManager::Retire(const std::string& id) {
  running_.erase(id);
  --active_;
  changed_.SignalAll();
}

}  // namespace fusion::jobs
