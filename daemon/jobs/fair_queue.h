// FairQueue: the order in which queued jobs start.
//
// Policy: one queue per client uid; uids are served round-robin (the served uid goes to the
// back of the rotation); within a uid, the highest priority first, then submit order. Within
// that fairness, a job whose first stage's model is already resident may overtake the due
// uid's job (fewer uploads), but a due uid is bypassed at most `max_bypass` times in a row, so
// no job starves. Each uid may hold at most `max_queued_per_uid` queued jobs. Priority across
// uids is the job manager's: a running job yields to a queued one that outranks it.
// Thread-safety: all methods may be called concurrently (one mutex).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "common/mutex.h"
#include "jobs/job.h"

namespace fusion::jobs {

class FairQueue {
 public:
  struct Options {
    size_t max_queued_per_uid = 64;  // RESOURCE_EXHAUSTED beyond
    size_t max_bypass = 4;           // times a due uid may be overtaken in a row
  };
  struct Entry {
    std::string id;
    uid_t uid = 0;
    Priority priority = Priority::kNormal;
    int64_t sequence = 0;                   // submit order
    std::vector<std::string> stage_models;  // models of the stages, in run order
  };
  using IsResident = std::function<bool(const std::string& model)>;

  explicit FairQueue(Options options) : options_(options) {}

  // RESOURCE_EXHAUSTED naming the uid and the limit when the uid's queue is full (unless
  // `enforce_limit` is false: for jobs already accepted, e.g. recovered from the journal).
  absl::Status Push(Entry entry, bool enforce_limit = true);
  // Removes a queued job (cancel). False if it is not queued.
  bool Remove(const std::string& id);
  // The next job to start, or nullopt when empty. `is_resident` may be null (no preference).
  // With `above`, only jobs of a higher priority are candidates (the slot a yielding job lent,
  // JobManager), in the same fair order among them; nullopt when there is none.
  std::optional<Entry> Pop(const IsResident& is_resident, std::optional<Priority> above = std::nullopt);
  // The highest priority queued, or nullopt when empty.
  std::optional<Priority> TopPriority() const;

  // 0 = would start next (ignoring the resident-model preference); nullopt if not queued.
  std::optional<size_t> Position(const std::string& id) const;
  // Stage models of queued jobs in the order they would start (at most `max_jobs`).
  std::vector<std::vector<std::string>> UpcomingStages(size_t max_jobs) const;
  std::map<uid_t, size_t> QueuedPerUid() const;
  size_t size() const;

 private:
  // Jobs in the order the uids would be served, without the resident preference.
  std::vector<const Entry*> FairOrder() const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // Index of the best job of a uid's queue (priority, then sequence).
  static size_t BestIndex(const std::vector<Entry>& jobs);
  Entry TakeFrom(uid_t uid) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Options options_;
  mutable Mutex mu_;
  absl::flat_hash_map<uid_t, std::vector<Entry>> by_uid_ ABSL_GUARDED_BY(mu_);
  std::deque<uid_t> rotation_ ABSL_GUARDED_BY(mu_);  // uids with queued jobs, next first
  size_t bypassed_ ABSL_GUARDED_BY(mu_) = 0;         // times rotation_.front() was overtaken
  size_t size_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace fusion::jobs
