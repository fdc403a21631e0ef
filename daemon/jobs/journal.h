// Journal: the crash-safe record of every accepted job, its inputs and its result (SQLite; a
// result image is a file the row names when Options::results_dir is set, as fusiond sets it).
//
// Invariants: a job is in the journal, with its encoded input images, before Insert() returns
// (so before SubmitJob answers); a job reaches a final state at most once, and its result is
// written in the same transaction as that state (no job ever has two results). After a crash,
// Recover() turns RUNNING jobs back into QUEUED ones. Inputs of finished jobs are dropped;
// results are kept for `retention` and within `retention_bytes`, oldest removed first.
// Storage: SQLite in WAL mode with synchronous=FULL (a committed submit survives power loss),
// auto_vacuum=INCREMENTAL: the space of dropped inputs and removed results goes back to the file
// system (Prune), the file does not keep growing (a user's journal was 313 MB, 137 MB free).
// A full disk ends jobs all the same: an end without a result (FAILED, CANCELLED) that the
// database cannot take is kept in the EndLedger (<path>-ends, preallocated: end_ledger.h) and
// in memory; reads see the job in that final state, and every later write and the next Open
// move such ends into the database first, so Recover() never requeues them (no job runs twice).
// Errors: RESOURCE_EXHAUSTED when the disk (or `max_bytes`) is full - nothing is half-written;
// NOT_FOUND for an unknown job id; INTERNAL for other SQLite failures (message has SQLite's).
// Thread-safety: all methods may be called concurrently (one mutex around the connection).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "common/mutex.h"
#include "absl/time/time.h"
#include "jobs/end_ledger.h"
#include "jobs/job.h"

struct sqlite3;

namespace fusion::jobs {

struct JobInputs {
  std::string source_image;
  std::string target_image;
};

struct StoredResult {
  std::string report;  // serialized fusion.v1.JobResult without the image
  std::string image;   // encoded result image (empty when `file` is set)
  std::string file;    // a result kept as a file (video jobs): its path; removed with the job
  uint64_t file_bytes = 0;  // its size, counted against retention_bytes
  // A FAILED or CANCELLED job: the stage it ended in ("decode", "detect", ...; "" before any).
  // Not held by the EndLedger: a failure recorded there while the disk is full has none.
  std::string error_stage;
};

class Journal {
 public:
  struct Options {
    std::string path;                       // database file, e.g. <state_dir>/journal.sqlite3
    uint64_t max_bytes = 0;                 // cap on the database size, bytes; 0 = the disk
    absl::Duration retention = absl::Hours(24);  // how long finished results are kept
    uint64_t retention_bytes = 1ull << 30;  // total bytes of kept result images
    // Where Finish puts an image result as a file (<results_dir>/<id>.image: written, fsynced
    // and renamed before the row points at it; removed with the job), so the database keeps
    // job records, not images. Empty: image results stay in their rows (tests, older callers).
    std::string results_dir;
    // Where Insert puts a job's source and target images as files (<inputs_dir>/<id>.source and
    // .target: written, fsynced and renamed before the job's row exists; removed when the job
    // ends). Empty: inputs stay in their rows.
    std::string inputs_dir;
  };

  // Opens or creates the database; the file is made 0600 (its -wal and -shm follow it).
  // INTERNAL (with SQLite's message) when it cannot.
  static absl::StatusOr<std::unique_ptr<Journal>> Open(const Options& options);
  ~Journal();
  Journal(const Journal&) = delete;
  Journal& operator=(const Journal&) = delete;

  // Persists a new QUEUED job with its inputs and returns its record (id and sequence set).
  absl::StatusOr<JobRecord> Insert(const JobSpec& spec, const JobPlan& plan, int64_t now_unix_ms);
  // QUEUED -> RUNNING. FAILED_PRECONDITION if the job is not QUEUED.
  absl::Status MarkRunning(const std::string& id, int64_t now_unix_ms);
  // Moves a QUEUED or RUNNING job to a final state, stores its result (SUCCEEDED; an image goes
  // to a file first when Options::results_dir is set) or error and drops its inputs, in one
  // transaction. FAILED_PRECONDITION if already final. With the
  // disk full: an end with a result is RESOURCE_EXHAUSTED (record the job FAILED instead); an
  // end without one goes to the EndLedger and Finish returns OK.
  absl::Status Finish(const std::string& id, JobState state, int32_t error_code,
                      const std::string& error_message, const StoredResult& result,
                      int64_t now_unix_ms);

  absl::StatusOr<JobRecord> Get(const std::string& id);
  absl::StatusOr<JobInputs> LoadInputs(const std::string& id);
  // NOT_FOUND if the job has no stored result (not SUCCEEDED, or pruned).
  absl::StatusOr<StoredResult> GetResult(const std::string& id);
  // Jobs of `owner` (all owners when nullopt), newest first; `states` empty = all; limit 0 = all.
  absl::StatusOr<std::vector<JobRecord>> List(std::optional<uid_t> owner,
                                              const std::vector<JobState>& states, size_t limit);
  // Crash recovery: RUNNING -> QUEUED; returns every QUEUED job in submit order.
  absl::StatusOr<std::vector<JobRecord>> Recover();
  // Removes finished jobs past the retention period, then the oldest results until the kept
  // result images fit `retention_bytes` (the newest result is kept whatever its size, so a
  // result larger than the budget can still be fetched); result files of removed jobs are
  // deleted. Returns how
  // many jobs were removed. Then, once kReclaimPages or more pages are free (dropped inputs,
  // removed results), gives them back to the file system (Reclaim).
  // `batch_bytes` (0 = no limit) bounds one call: each of its two deletions takes the oldest
  // rows whose result bytes, summed, start below it (at least one row), so a backlog is pruned
  // in small transactions by calling again until it returns 0 (JobManager does, in the
  // background at start).
  absl::StatusOr<int> Prune(int64_t now_unix_ms, uint64_t batch_bytes = 0);
  // Free pages at which Prune shrinks the file: 2048 pages of 4 KiB = 8 MiB.
  static constexpr int64_t kReclaimPages = 2048;
  // What the WAL file keeps after a checkpoint (PRAGMA journal_size_limit): SQLite checkpoints
  // it at 1000 pages (4 MiB) and then truncates it to this, so a large transaction's WAL does not
  // stay on disk.
  static constexpr uint64_t kWalLimitBytes = 4ull << 20;
  // Pages the database file holds and how many of them are free (PRAGMA page_count and
  // freelist_count): for tests and the log.
  absl::StatusOr<std::pair<int64_t, int64_t>> PageCounts();
  // Job ends held in the EndLedger, not yet in the database (the disk was full).
  size_t UnrecordedEnds();

 private:
  Journal(Options options, sqlite3* db) : options_(std::move(options)), db_(db) {}
  // The UPDATE of Finish; returns SQLite's code (SQLITE_DONE when it ran).
  int UpdateEnd(const std::string& id, JobState state, int32_t error_code, const std::string& error_message,
                const StoredResult& result, int64_t now_unix_ms, bool* changed) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // At Open: result image files (and their .tmp) in results_dir that no row names, left by a
  // crash between the file and its row, are deleted.
  void RemoveStrayImages() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Input files of jobs that have none any more (ended, or never inserted), at Open.
  void RemoveStrayInputs() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::string InputPath(const std::string& id, const char* which) const;
  void RemoveInputFiles(const std::string& id) const;
  // Moves the EndLedger's entries into the database while it takes them.
  void ApplyLedger() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  const EndLedger::Entry* LedgerEnd(const std::string& id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A record as reads see it: its EndLedger end, if any, over the database's row.
  void Overlay(JobRecord& record) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status Exec(const char* sql) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<int64_t> PragmaInt(const char* pragma) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The database is auto_vacuum=INCREMENTAL (Open converts an older one with one VACUUM):
  // incremental_vacuum moves the free pages to the end and truncates them, and a TRUNCATE
  // checkpoint writes that to the main file and empties the WAL, so the file shrinks now.
  absl::Status Reclaim() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Options options_;
  Mutex mu_;
  sqlite3* db_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<EndLedger> ledger_ ABSL_GUARDED_BY(mu_);
};

}  // namespace fusion::jobs
