#include "jobs/journal.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <cstdint>
#include <filesystem>
#include <sstream>
#include <fstream>

#include <spdlog/spdlog.h>

#include "absl/random/random.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/status_macros.h"

namespace fusion::jobs {
namespace {

constexpr char kSchema[] = R"sql(
CREATE TABLE IF NOT EXISTS jobs (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  id TEXT NOT NULL UNIQUE,
  uid INTEGER NOT NULL,
  state INTEGER NOT NULL,
  priority INTEGER NOT NULL,
  options BLOB NOT NULL,
  stage_models TEXT NOT NULL,
  source BLOB,
  target BLOB,
  created_ms INTEGER NOT NULL,
  started_ms INTEGER NOT NULL DEFAULT 0,
  finished_ms INTEGER NOT NULL DEFAULT 0,
  error_code INTEGER NOT NULL DEFAULT 0,
  error_message TEXT NOT NULL DEFAULT '',
  result_report BLOB,
  result_image BLOB,
  result_bytes INTEGER NOT NULL DEFAULT 0,
  result_file TEXT
);
CREATE INDEX IF NOT EXISTS jobs_by_state ON jobs(state);
)sql";
// Journals made before result files existed get the column (the error of a second ALTER on a
// journal that has it is ignored).
constexpr char kAddResultFile[] = "ALTER TABLE jobs ADD COLUMN result_file TEXT";
// 1 while the job's inputs are files in Options::inputs_dir (its source and target blobs empty).
constexpr char kAddInputsInFiles[] = "ALTER TABLE jobs ADD COLUMN inputs_in_files INTEGER NOT NULL DEFAULT 0";
// The plan's target kind (fusion.v1.JobKind); 0 in rows journalled before plans were.
constexpr char kAddTargetKind[] = "ALTER TABLE jobs ADD COLUMN target_kind INTEGER NOT NULL DEFAULT 0";
// StoredResult::error_stage; '' in rows journalled before it was.
constexpr char kAddErrorStage[] = "ALTER TABLE jobs ADD COLUMN error_stage TEXT NOT NULL DEFAULT ''";

absl::StatusOr<std::string> ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  if (!in) return absl::InternalError(absl::StrCat("journal: cannot read ", path));
  return bytes.str();
}

constexpr char kColumns[] =
    "id, uid, state, priority, options, stage_models, created_ms, started_ms, finished_ms, "
    "error_code, error_message, seq, target_kind, error_stage";

// RESOURCE_EXHAUSTED naming the state directory for a full disk (SQLITE_FULL), INTERNAL
// otherwise; `message` is SQLite's.
absl::Status SqliteError(sqlite3* db, int rc, absl::string_view what, absl::string_view message) {
  const std::string msg = absl::StrCat("journal: ", what, ": ", message);
  if (rc != SQLITE_FULL) return absl::InternalError(msg);
  const char* file = sqlite3_db_filename(db, "main");
  const std::string dir = file != nullptr ? std::filesystem::path(file).parent_path().string() : "";
  return absl::ResourceExhaustedError(absl::StrCat(msg, " (the state directory ", dir, " is full)"));
}

// `bytes` into `path` (under `state_dir`, which a full-disk error names): a 0600 temporary file, written, fsynced, renamed, and the directory
// fsynced, so `path` is either absent or whole after a crash. RESOURCE_EXHAUSTED naming the
// directory when it is full; INTERNAL otherwise.
absl::Status WriteFileDurably(const std::string& path, const std::string& bytes, const std::string& state_dir) {
  const std::string tmp = path + ".tmp";
  const std::string dir = std::filesystem::path(path).parent_path().string();
  auto fail = [&](const char* what) {
    const int err = errno;
    ::unlink(tmp.c_str());
    const std::string msg = absl::StrCat("journal: ", what, " ", tmp, ": ", std::strerror(err));
    return err == ENOSPC || err == EDQUOT
               ? absl::ResourceExhaustedError(absl::StrCat(msg, " (the state directory ", state_dir, " is full)"))
               : absl::InternalError(msg);
  };
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return fail("cannot create");
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      ::close(fd);
      return fail("cannot write");
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) {
    ::close(fd);
    return fail("cannot fsync");
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) return fail("cannot rename");
  if (const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return absl::OkStatus();
}

// A prepared statement, finalized on destruction. Columns/parameters are 0/1-based as SQLite's.
class Statement {
 public:
  Statement(sqlite3* db, const char* sql) : db_(db) {
    rc_ = sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr);
  }
  ~Statement() { sqlite3_finalize(stmt_); }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  Statement& Bind(int i, int64_t v) { Check(sqlite3_bind_int64(stmt_, i, v)); return *this; }
  Statement& Bind(int i, const std::string& v) {
    Check(sqlite3_bind_blob64(stmt_, i, v.data(), v.size(), SQLITE_TRANSIENT));
    return *this;
  }
  Statement& BindText(int i, const std::string& v) {
    Check(sqlite3_bind_text64(stmt_, i, v.data(), v.size(), SQLITE_TRANSIENT, SQLITE_UTF8));
    return *this;
  }
  // SQLITE_ROW, SQLITE_DONE or an error code.
  int Step() { return rc_ == SQLITE_OK ? sqlite3_step(stmt_) : rc_; }
  int64_t Int(int col) { return sqlite3_column_int64(stmt_, col); }
  std::string Blob(int col) {
    const void* p = sqlite3_column_blob(stmt_, col);
    return p == nullptr ? std::string() : std::string(static_cast<const char*>(p),
                                                      sqlite3_column_bytes(stmt_, col));
  }
  absl::Status Error(int rc, absl::string_view what) const { return SqliteError(db_, rc, what, sqlite3_errmsg(db_)); }
  int prepare_rc() const { return rc_; }

 private:
  void Check(int rc) { if (rc_ == SQLITE_OK && rc != SQLITE_OK) rc_ = rc; }
  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
  int rc_;
};

JobRecord ReadRecord(Statement& s) {
  JobRecord r;
  r.id = s.Blob(0);
  r.owner_uid = static_cast<uid_t>(s.Int(1));
  r.state = static_cast<JobState>(s.Int(2));
  r.priority = static_cast<Priority>(s.Int(3));
  // The journal's own bytes, written by Insert from a parsed JobOptions.
  (void)r.plan.options.ParseFromString(s.Blob(4));
  const std::string stages = s.Blob(5);
  if (!stages.empty()) r.plan.stage_models = absl::StrSplit(stages, '\n');
  r.created_unix_ms = s.Int(6);
  r.started_unix_ms = s.Int(7);
  r.finished_unix_ms = s.Int(8);
  r.error_code = static_cast<int32_t>(s.Int(9));
  r.error_message = s.Blob(10);
  r.sequence = s.Int(11);
  const int64_t kind = s.Int(12);
  r.plan.target = v1::JobKind_IsValid(static_cast<int>(kind)) ? static_cast<v1::JobKind>(kind) : v1::JOB_KIND_UNSPECIFIED;
  r.error_stage = s.Blob(13);
  return r;
}

std::string NewJobId() {
  static absl::BitGen* gen = new absl::BitGen();
  static Mutex* gen_mu = new Mutex();  // never destroyed, as `gen`
  MutexLock lock(gen_mu);
  return absl::StrFormat("j-%016x", absl::Uniform<uint64_t>(*gen));
}

}  // namespace

bool IsFinal(JobState state) {
  return state == JobState::SUCCEEDED || state == JobState::FAILED ||
         state == JobState::CANCELLED;
}

absl::StatusOr<std::unique_ptr<Journal>> Journal::Open(const Options& options) {
  // Created 0600 whatever the umask: SQLite gives its -wal and -shm files the database's mode.
  if (const int fd = ::open(options.path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600); fd >= 0) {
    ::fchmod(fd, 0600);
    ::close(fd);
  }
  sqlite3* db = nullptr;
  const int rc = sqlite3_open_v2(options.path.c_str(), &db,
                                 SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                                 nullptr);
  if (rc != SQLITE_OK) {
    std::string msg = absl::StrCat("journal: cannot open ", options.path, ": ",
                                   db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
    sqlite3_close(db);
    return absl::InternalError(msg);
  }
  if (!options.results_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(options.results_dir, ec);
    if (ec) {
      sqlite3_close(db);
      return absl::InternalError(absl::StrCat("journal: cannot create ", options.results_dir, ": ", ec.message()));
    }
  }
  std::unique_ptr<Journal> journal(new Journal(options, db));
  MutexLock lock(&journal->mu_);
  // auto_vacuum before the first table (a new file); an older file made without it converts
  // with one VACUUM (rewrites the file once: seconds for hundreds of MB).
  if (auto st = journal->Exec("PRAGMA auto_vacuum=INCREMENTAL;"); !st.ok()) return st;
  const std::string wal_limit = absl::StrCat("PRAGMA journal_size_limit=", kWalLimitBytes, ";");
  for (const char* sql : {"PRAGMA journal_mode=WAL;", "PRAGMA synchronous=FULL;", "PRAGMA busy_timeout=5000;",
                          wal_limit.c_str(), kSchema}) {
    if (auto st = journal->Exec(sql); !st.ok()) return st;
  }
  if (auto mode = journal->PragmaInt("PRAGMA auto_vacuum;"); !mode.ok()) {
    return mode.status();
  } else if (*mode != 2) {
    spdlog::info("journal: converting {} to incremental auto-vacuum (one VACUUM)", options.path);
    if (auto st = journal->Exec("VACUUM;"); !st.ok()) return st;
  }
  (void)journal->Exec(kAddResultFile);  // "duplicate column" once it exists
  (void)journal->Exec(kAddInputsInFiles);
  (void)journal->Exec(kAddTargetKind);
  (void)journal->Exec(kAddErrorStage);
  if (!options.inputs_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(options.inputs_dir, ec);
    if (ec) return absl::InternalError(absl::StrCat("journal: cannot create ", options.inputs_dir, ": ", ec.message()));
  }
  ASSIGN_OR_RETURN(journal->ledger_, EndLedger::Open(options.path + "-ends"));
  journal->RemoveStrayImages();
  journal->RemoveStrayInputs();
  if (const size_t held = journal->ledger_->entries().size(); held > 0) {
    journal->ApplyLedger();
    spdlog::warn("journal: {} job end(s) recorded while the disk was full; {} moved into the journal, {} still "
                 "held in {}-ends (those jobs stay ended and are not run again)",
                 held, held - journal->ledger_->entries().size(), journal->ledger_->entries().size(), options.path);
  }
  if (options.max_bytes > 0) {
    const int64_t pages = static_cast<int64_t>(options.max_bytes / 4096);
    if (auto st = journal->Exec("PRAGMA page_size=4096;"); !st.ok()) return st;
    if (auto st = journal->Exec(absl::StrCat("PRAGMA max_page_count=", pages, ";").c_str());
        !st.ok()) {
      return st;
    }
  }
  return journal;
}

Journal::~Journal() {
  MutexLock lock(&mu_);
  sqlite3_close(db_);
}

absl::Status Journal::Exec(const char* sql) {
  char* err = nullptr;
  const int rc = sqlite3_exec(db_, sql, nullptr, nullptr, &err);
  if (rc == SQLITE_OK) return absl::OkStatus();
  const std::string message = err ? err : sqlite3_errstr(rc);
  sqlite3_free(err);
  return SqliteError(db_, rc, sql, message);
}

absl::StatusOr<JobRecord> Journal::Insert(const JobSpec& spec, const JobPlan& plan, int64_t now_unix_ms) {
  JobRecord r;
  r.id = NewJobId();
  r.owner_uid = spec.owner_uid;
  r.priority = spec.priority;
  r.plan = plan;
  r.created_unix_ms = now_unix_ms;
  const bool files = !options_.inputs_dir.empty();
  if (files) {
    // Whole on disk before the row exists: a committed job always has its inputs. The files
    // are the new job's own: written (and fsynced) before the connection's lock is taken.
    const std::string state_dir = std::filesystem::path(options_.path).parent_path().string();
    absl::Status st = WriteFileDurably(InputPath(r.id, "source"), spec.source_image, state_dir);
    if (st.ok()) st = WriteFileDurably(InputPath(r.id, "target"), spec.target_image, state_dir);
    if (!st.ok()) {
      RemoveInputFiles(r.id);
      return st;
    }
  }
  MutexLock lock(&mu_);
  ApplyLedger();
  Statement s(db_,
              "INSERT INTO jobs(id, uid, state, priority, options, stage_models, source, target, "
              "created_ms, inputs_in_files, target_kind) VALUES(?,?,?,?,?,?,?,?,?,?,?)");
  s.BindText(1, r.id).Bind(2, static_cast<int64_t>(r.owner_uid))
      .Bind(3, static_cast<int64_t>(JobState::QUEUED)).Bind(4, static_cast<int64_t>(r.priority))
      .Bind(5, plan.options.SerializeAsString()).BindText(6, absl::StrJoin(plan.stage_models, "\n"))
      .Bind(7, files ? std::string() : spec.source_image).Bind(8, files ? std::string() : spec.target_image)
      .Bind(9, now_unix_ms).Bind(10, files ? 1 : 0).Bind(11, static_cast<int64_t>(plan.target));
  if (int rc = s.Step(); rc != SQLITE_DONE) {
    if (files) RemoveInputFiles(r.id);
    return s.Error(rc, "insert job");
  }
  r.sequence = sqlite3_last_insert_rowid(db_);
  return r;
}

absl::Status Journal::MarkRunning(const std::string& id, int64_t now_unix_ms) {
  MutexLock lock(&mu_);
  ApplyLedger();
  if (LedgerEnd(id) != nullptr) return absl::FailedPreconditionError(absl::StrCat("job ", id, " is not QUEUED"));
  Statement s(db_, "UPDATE jobs SET state=?, started_ms=? WHERE id=? AND state=?");
  s.Bind(1, static_cast<int64_t>(JobState::RUNNING)).Bind(2, now_unix_ms).BindText(3, id)
      .Bind(4, static_cast<int64_t>(JobState::QUEUED));
  if (int rc = s.Step(); rc != SQLITE_DONE) return s.Error(rc, "mark running");
  if (sqlite3_changes(db_) != 1) {
    return absl::FailedPreconditionError(absl::StrCat("job ", id, " is not QUEUED"));
  }
  return absl::OkStatus();
}

int Journal::UpdateEnd(const std::string& id, JobState state, int32_t error_code, const std::string& error_message,
                       const StoredResult& result, int64_t now_unix_ms, bool* changed) {
  Statement s(db_,
              "UPDATE jobs SET state=?, finished_ms=?, error_code=?, error_message=?, "
              "result_report=?, result_image=?, result_bytes=?, source=NULL, target=NULL, "
              "inputs_in_files=0, result_file=?, error_stage=? WHERE id=? AND state IN (?, ?)");
  s.Bind(1, static_cast<int64_t>(state)).Bind(2, now_unix_ms).Bind(3, error_code)
      .BindText(4, error_message).Bind(5, result.report).Bind(6, result.image)
      .Bind(7, static_cast<int64_t>(result.image.size() + result.file_bytes)).BindText(8, result.file)
      .BindText(9, result.error_stage)
      .BindText(10, id)
      .Bind(11, static_cast<int64_t>(JobState::QUEUED))
      .Bind(12, static_cast<int64_t>(JobState::RUNNING));
  const int rc = s.Step();
  *changed = rc == SQLITE_DONE && sqlite3_changes(db_) == 1;
  if (*changed && !options_.inputs_dir.empty()) RemoveInputFiles(id);  // the row no longer names them
  return rc;
}

std::string Journal::InputPath(const std::string& id, const char* which) const {
  return absl::StrCat(options_.inputs_dir, "/", id, ".", which);
}

void Journal::RemoveInputFiles(const std::string& id) const {
  for (const char* which : {"source", "target"}) ::unlink(InputPath(id, which).c_str());
}

void Journal::RemoveStrayInputs() {
  if (options_.inputs_dir.empty()) return;
  std::error_code ec;
  int removed = 0;
  for (const auto& entry : std::filesystem::directory_iterator(options_.inputs_dir, ec)) {
    const std::string name = entry.path().filename().string();
    const std::string id = name.substr(0, name.find('.'));
    Statement owned(db_, "SELECT 1 FROM jobs WHERE id=? AND inputs_in_files=1");
    owned.BindText(1, id);
    if (!absl::EndsWith(name, ".tmp") && owned.Step() == SQLITE_ROW) continue;
    if (::unlink(entry.path().c_str()) == 0) ++removed;
  }
  if (removed > 0) spdlog::info("journal: removed {} input file(s) no unfinished job names", removed);
}

absl::Status Journal::Finish(const std::string& id, JobState state, int32_t error_code,
                             const std::string& error_message, const StoredResult& stored,
                             int64_t now_unix_ms) {
  MutexLock lock(&mu_);
  ApplyLedger();
  if (LedgerEnd(id) != nullptr) {
    return absl::FailedPreconditionError(absl::StrCat("job ", id, " is already final or unknown"));
  }
  StoredResult result = stored;
  if (!result.image.empty() && !options_.results_dir.empty()) {
    // Only for a job that can still end: the file's name is the job's, and a final job's file
    // is its result.
    Statement row(db_, "SELECT state FROM jobs WHERE id=?");
    row.BindText(1, id);
    if (row.Step() != SQLITE_ROW || IsFinal(static_cast<JobState>(row.Int(0)))) {
      return absl::FailedPreconditionError(absl::StrCat("job ", id, " is already final or unknown"));
    }
    // The image as a file the row will name: complete on disk before the row points at it.
    const std::string path = absl::StrCat(options_.results_dir, "/", id, ".image");
    const std::string state_dir = std::filesystem::path(options_.path).parent_path().string();
    RETURN_IF_ERROR(WriteFileDurably(path, result.image, state_dir));
    result.file = path;
    result.file_bytes = result.image.size();
    result.image.clear();
  }
  bool changed = false;
  const int rc = UpdateEnd(id, state, error_code, error_message, result, now_unix_ms, &changed);
  if ((rc != SQLITE_DONE || !changed) && result.file != stored.file) ::unlink(result.file.c_str());  // no row names it
  const std::string sqlite_message = sqlite3_errmsg(db_);
  const bool no_result = result.report.empty() && result.image.empty() && result.file.empty();
  if (rc == SQLITE_FULL && no_result) {
    Statement row(db_, "SELECT state FROM jobs WHERE id=?");
    row.BindText(1, id);
    if (row.Step() == SQLITE_ROW && !IsFinal(static_cast<JobState>(row.Int(0)))) {
      absl::Status held = ledger_->Add({id, state, error_code, now_unix_ms, error_message});
      if (held.ok()) {
        spdlog::warn("job {}: the journal is full; its end ({}) is held in {}-ends until there is room", id,
                     v1::JobState_Name(state), options_.path);
        return absl::OkStatus();
      }
      spdlog::error("job {}: {}", id, held.ToString());
    }
  }
  if (rc != SQLITE_DONE) {
    return SqliteError(db_, rc, "finish job", sqlite_message);
  }
  if (!changed) {
    return absl::FailedPreconditionError(absl::StrCat("job ", id, " is already final or unknown"));
  }
  return absl::OkStatus();
}

void Journal::RemoveStrayImages() {
  if (options_.results_dir.empty()) return;
  std::error_code ec;
  int removed = 0;
  for (const auto& entry : std::filesystem::directory_iterator(options_.results_dir, ec)) {
    const std::string name = entry.path().filename().string();
    const bool tmp = absl::EndsWith(name, ".image.tmp");
    if (!tmp && !absl::EndsWith(name, ".image")) continue;  // video results and parts: not ours
    if (!tmp) {
      Statement named(db_, "SELECT 1 FROM jobs WHERE result_file=?");
      named.BindText(1, entry.path().string());
      if (named.Step() == SQLITE_ROW) continue;
    }
    if (::unlink(entry.path().c_str()) == 0) ++removed;
  }
  if (removed > 0) spdlog::info("journal: removed {} result image file(s) no job names (a crash's leftovers)", removed);
}

void Journal::ApplyLedger() {
  while (!ledger_->entries().empty()) {
    const EndLedger::Entry e = ledger_->entries().front();
    bool changed = false;
    const int rc = UpdateEnd(e.id, e.state, e.error_code, e.error_message, {}, e.finished_unix_ms, &changed);
    if (rc != SQLITE_DONE) return;  // still full: kept for the next write
    // Applied, or the row is final or gone already: either way the database has the last word.
    if (absl::Status st = ledger_->Clear(e.id); !st.ok()) {
      spdlog::error("{}", st.ToString());
      return;
    }
  }
}

const EndLedger::Entry* Journal::LedgerEnd(const std::string& id) {
  for (const EndLedger::Entry& e : ledger_->entries()) {
    if (e.id == id) return &e;
  }
  return nullptr;
}

void Journal::Overlay(JobRecord& record) {
  if (const EndLedger::Entry* e = LedgerEnd(record.id)) {
    record.state = e->state;
    record.finished_unix_ms = e->finished_unix_ms;
    record.error_code = e->error_code;
    record.error_message = e->error_message;
  }
}

size_t Journal::UnrecordedEnds() {
  MutexLock lock(&mu_);
  return ledger_->entries().size();
}

absl::StatusOr<JobRecord> Journal::Get(const std::string& id) {
  MutexLock lock(&mu_);
  Statement s(db_, absl::StrCat("SELECT ", kColumns, " FROM jobs WHERE id=?").c_str());
  s.BindText(1, id);
  const int rc = s.Step();
  if (rc == SQLITE_ROW) {
    JobRecord r = ReadRecord(s);
    Overlay(r);
    return r;
  }
  if (rc == SQLITE_DONE) return absl::NotFoundError(absl::StrCat("job ", id, " not found"));
  return s.Error(rc, "get job");
}

absl::StatusOr<JobInputs> Journal::LoadInputs(const std::string& id) {
  MutexLock lock(&mu_);
  if (LedgerEnd(id) != nullptr) return absl::NotFoundError(absl::StrCat("job ", id, " has no inputs"));
  Statement s(db_, "SELECT source, target, inputs_in_files FROM jobs WHERE id=? AND source IS NOT NULL");
  s.BindText(1, id);
  const int rc = s.Step();
  if (rc == SQLITE_ROW && s.Int(2) == 1) {
    ASSIGN_OR_RETURN(auto source, ReadWholeFile(InputPath(id, "source")));
    ASSIGN_OR_RETURN(auto target, ReadWholeFile(InputPath(id, "target")));
    return JobInputs{std::move(source), std::move(target)};
  }
  if (rc == SQLITE_ROW) return JobInputs{s.Blob(0), s.Blob(1)};
  if (rc == SQLITE_DONE) return absl::NotFoundError(absl::StrCat("job ", id, " has no inputs"));
  return s.Error(rc, "load inputs");
}

absl::StatusOr<StoredResult> Journal::GetResult(const std::string& id) {
  MutexLock lock(&mu_);
  if (LedgerEnd(id) != nullptr) return absl::NotFoundError(absl::StrCat("job ", id, " has no result"));
  Statement s(db_, "SELECT result_report, result_image, result_file, result_bytes FROM jobs WHERE id=? "
                   "AND state=? AND result_report IS NOT NULL");
  s.BindText(1, id).Bind(2, static_cast<int64_t>(JobState::SUCCEEDED));
  const int rc = s.Step();
  if (rc == SQLITE_ROW) {
    StoredResult r{s.Blob(0), s.Blob(1), s.Blob(2), 0};
    if (!r.file.empty()) r.file_bytes = static_cast<uint64_t>(s.Int(3));
    return r;
  }
  if (rc == SQLITE_DONE) return absl::NotFoundError(absl::StrCat("job ", id, " has no result"));
  return s.Error(rc, "get result");
}

absl::StatusOr<std::vector<JobRecord>> Journal::List(std::optional<uid_t> owner,
                                                     const std::vector<JobState>& states,
                                                     size_t limit) {
  MutexLock lock(&mu_);
  // Ledger ends change states: then filter and limit after the overlay, not in SQL.
  const bool overlaid = !ledger_->entries().empty();
  std::string sql = absl::StrCat("SELECT ", kColumns, " FROM jobs WHERE 1");
  if (owner) absl::StrAppend(&sql, " AND uid=", *owner);
  if (!states.empty() && !overlaid) {
    absl::StrAppend(&sql, " AND state IN (",
                    absl::StrJoin(states, ",", [](std::string* out, JobState st) {
                      absl::StrAppend(out, static_cast<int>(st));
                    }),
                    ")");
  }
  absl::StrAppend(&sql, " ORDER BY seq DESC");
  if (limit > 0 && !overlaid) absl::StrAppend(&sql, " LIMIT ", limit);
  Statement s(db_, sql.c_str());
  std::vector<JobRecord> out;
  int rc;
  while ((rc = s.Step()) == SQLITE_ROW) {
    JobRecord r = ReadRecord(s);
    Overlay(r);
    if (!states.empty() && std::find(states.begin(), states.end(), r.state) == states.end()) continue;
    if (limit > 0 && out.size() == limit) break;
    out.push_back(std::move(r));
  }
  if (rc != SQLITE_DONE && rc != SQLITE_ROW) return s.Error(rc, "list jobs");
  return out;
}

absl::StatusOr<std::vector<JobRecord>> Journal::Recover() {
  {
    MutexLock lock(&mu_);
    ApplyLedger();
    Statement s(db_, "UPDATE jobs SET state=?, started_ms=0 WHERE state=?");
    s.Bind(1, static_cast<int64_t>(JobState::QUEUED))
        .Bind(2, static_cast<int64_t>(JobState::RUNNING));
    if (int rc = s.Step(); rc != SQLITE_DONE) return s.Error(rc, "recover running jobs");
  }
  ASSIGN_OR_RETURN(auto queued, List(std::nullopt, {JobState::QUEUED}, 0));
  std::reverse(queued.begin(), queued.end());  // submit order
  return queued;
}

absl::StatusOr<int> Journal::Prune(int64_t now_unix_ms, uint64_t batch_bytes) {
  MutexLock lock(&mu_);
  ApplyLedger();
  const int64_t cutoff = now_unix_ms - absl::ToInt64Milliseconds(options_.retention);
  const int64_t batch = batch_bytes == 0 ? INT64_MAX : static_cast<int64_t>(batch_bytes);
  // RETURNING hands back the result files of the removed rows, deleted once the rows are gone
  // (a crash in between leaves a file no row names: harmless, and never a row without its file).
  // Each DELETE takes the oldest rows whose result bytes, summed, start below `batch` (at least
  // one row): a batch is one small transaction.
  std::vector<std::string> files;
  int removed = 0;
  Statement expired(db_,
                    "DELETE FROM jobs WHERE seq IN (SELECT seq FROM (SELECT seq, result_bytes, SUM(result_bytes) "
                    "OVER (ORDER BY seq) AS run FROM jobs WHERE state IN (3,4,5) AND finished_ms < ?) "
                    "WHERE run - result_bytes < ?) RETURNING result_file");
  expired.Bind(1, cutoff).Bind(2, batch);
  int rc;
  while ((rc = expired.Step()) == SQLITE_ROW) {
    ++removed;
    if (std::string f = expired.Blob(0); !f.empty()) files.push_back(std::move(f));
  }
  if (rc != SQLITE_DONE) return expired.Error(rc, "prune expired");
  // Then the oldest results until the rest fit the byte budget: keep the newest rows whose
  // running total of result bytes stays within retention_bytes - and the newest result whatever
  // its size (total == its own bytes: no result after it), so a result larger than the whole
  // budget (a long video) is there for its client to fetch; it goes when a newer one finishes.
  Statement over(db_,
                 "DELETE FROM jobs WHERE seq IN (SELECT seq FROM (SELECT seq, result_bytes, SUM(result_bytes) "
                 "OVER (ORDER BY seq) AS run FROM (SELECT seq, result_bytes FROM (SELECT seq, result_bytes, "
                 "SUM(result_bytes) OVER (ORDER BY finished_ms DESC, seq DESC) AS total FROM jobs "
                 "WHERE state IN (3,4,5)) WHERE total > ? AND total > result_bytes)) WHERE run - result_bytes < ?) "
                 "RETURNING result_file");
  over.Bind(1, static_cast<int64_t>(options_.retention_bytes)).Bind(2, batch);
  while ((rc = over.Step()) == SQLITE_ROW) {
    ++removed;
    if (std::string f = over.Blob(0); !f.empty()) files.push_back(std::move(f));
  }
  if (rc != SQLITE_DONE) return over.Error(rc, "prune by size");
  for (const std::string& f : files) ::unlink(f.c_str());
  ASSIGN_OR_RETURN(auto free_pages, PragmaInt("PRAGMA freelist_count;"));
  if (free_pages >= kReclaimPages) {
    RETURN_IF_ERROR(Reclaim());
  }
  return removed;
}

absl::Status Journal::Reclaim() {
  RETURN_IF_ERROR(Exec("PRAGMA incremental_vacuum;"));
  return Exec("PRAGMA wal_checkpoint(TRUNCATE);");
}

absl::StatusOr<int64_t> Journal::PragmaInt(const char* pragma) {
  Statement s(db_, pragma);
  const int rc = s.Step();
  if (rc != SQLITE_ROW) return s.Error(rc, pragma);
  return s.Int(0);
}

absl::StatusOr<std::pair<int64_t, int64_t>> Journal::PageCounts() {
  MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(auto pages, PragmaInt("PRAGMA page_count;"));
  ASSIGN_OR_RETURN(auto free_pages, PragmaInt("PRAGMA freelist_count;"));
  return std::pair{pages, free_pages};
}

}  // namespace fusion::jobs
