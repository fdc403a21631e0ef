#include "jobs/job_manager.h"

#include <unistd.h>

#include <filesystem>

#include <algorithm>
#include <atomic>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "spdlog/spdlog.h"
#include "base/status_macros.h"
#include "common/thread_priority.h"
#include "fusion_status.h"
#include "jobs/running_job.h"

namespace fusion::jobs {
namespace {

constexpr size_t kPriorities = 3;  // low, normal, high (jobs/job.h)

absl::Status NotFound(const std::string& id) {
  // Finished jobs are pruned after result_retention / result_retention_bytes: say so, since
  // an expired id and a mistyped one look alike.
  return absl::NotFoundError(
      absl::StrCat("job '", id, "' not found (unknown, or its result was pruned by result_retention)"));
}

}  // namespace

class JobManager::RunContext final : public JobRunner::Context {
 public:
  RunContext(JobManager* manager, std::string id, std::shared_ptr<Running> running)
      : manager_(manager), id_(std::move(id)), running_(std::move(running)) {}
  bool Cancelled() const override {
    running_->alive_ms = NowMs();
    return running_->cancel || running_->interrupt;
  }
  bool Interrupted() const override { return running_->interrupt && !running_->cancel; }
  void YieldPoint() override {
    running_->alive_ms = NowMs();
    manager_->Yield(*running_);
  }
  void GiveWay() override {
    if (running_->cancel || running_->interrupt) return;
    manager_->GiveWayToLive(kGiveWayMax);
    running_->alive_ms = NowMs();
  }
  void StageStarted(const std::string& stage, float progress) override {
    running_->alive_ms = NowMs();
    {
      MutexLock lock(&manager_->mu_);
      running_->stage = stage;
      running_->progress = progress;
    }
    v1::JobEvent e;
    e.mutable_stage_started()->set_stage(stage);
    e.mutable_stage_started()->set_progress(progress);
    manager_->Emit(id_, std::move(e), false);
  }
  void StageFinished(const v1::StageReport& report, float progress) override {
    running_->alive_ms = NowMs();
    {
      MutexLock lock(&manager_->mu_);
      running_->progress = progress;
      // By the report's model, not one per event: a host stage (the blend) is no planned model
      // stage, and a skipped one (a cached source's encode) sends no event. Counting events put
      // the running jobs' remaining stages one off in the forecast the eviction policy reads.
      running_->stages_done = StagesDoneAfter(running_->record.plan, running_->stages_done, report.model());
    }
    if (manager_->options_.on_change) manager_->options_.on_change();
    v1::JobEvent e;
    *e.mutable_stage_finished()->mutable_report() = report;
    e.mutable_stage_finished()->set_progress(progress);
    manager_->Emit(id_, std::move(e), false);
  }
  void Degradation(const std::string& what) override {
    running_->alive_ms = NowMs();
    v1::JobEvent e;
    e.set_degradation(what);
    manager_->Emit(id_, std::move(e), false);
  }
  void FrameStage(const std::string& stage) override {
    running_->alive_ms = NowMs();
    MutexLock lock(&manager_->mu_);
    running_->stage = stage;
  }
  void FramesDone(uint64_t done, uint64_t total, double fps) override {
    float progress = total > 0 ? static_cast<float>(done) / static_cast<float>(total) : 0;
    {
      MutexLock lock(&manager_->mu_);
      // Never back: the source's stages showed a few percent before the first frame was done.
      progress = std::max(progress, running_->progress);
      running_->frames_done = done;
      running_->frames_total = total;
      running_->fps = fps;
      running_->progress = progress;
    }
    v1::JobEvent e;
    e.mutable_frames()->set_frames_done(done);
    e.mutable_frames()->set_frames_total(total);
    e.mutable_frames()->set_frames_per_second(fps);
    e.mutable_frames()->set_progress(progress);
    manager_->Emit(id_, std::move(e), false);
  }

 private:
  JobManager* manager_;
  const std::string id_;
  std::shared_ptr<Running> running_;
};

JobManager::JobManager(Options options, Journal* journal, JobRunner* runner,
                       FairQueue::IsResident is_resident)
    : options_(options),
      journal_(journal),
      runner_(runner),
      is_resident_(std::move(is_resident)),
      queue_(options.queue) {}

absl::StatusOr<std::unique_ptr<JobManager>> JobManager::Create(Options options, Journal* journal,
                                                               JobRunner* runner,
                                                               FairQueue::IsResident is_resident) {
  if (options.concurrency == 0) return absl::InvalidArgumentError("concurrency must be >= 1");
  std::unique_ptr<JobManager> m(new JobManager(options, journal, runner, std::move(is_resident)));
  ASSIGN_OR_RETURN(auto recovered, journal->Recover());
  // Recovered jobs were accepted once: they bypass the per-uid limit rather than be lost.
  for (const JobRecord& r : recovered) {
    MutexLock lock(&m->mu_);
    absl::Status st = m->queue_.Push({r.id, r.owner_uid, r.priority, r.sequence, r.plan.stage_models},
                                     /*enforce_limit=*/false);
    if (!st.ok()) return st;
  }
  if (!recovered.empty()) spdlog::info("journal: {} unfinished jobs requeued", recovered.size());
  // `concurrency` slots, and a worker for each job of each priority that may have started at
  // once (the header's Priority): a yielded job keeps its worker's thread.
  for (size_t i = 0; i < options.concurrency * kPriorities; ++i) {
    m->workers_.emplace_back([raw = m.get()] { raw->WorkerLoop(); });
  }
  // Results past their retention go in the background, batch by batch: a restart with a smaller
  // retention serves at once (it took 17 s on a 436 MB journal, with a 333 MB WAL).
  m->pruner_ = std::thread([raw = m.get()] { raw->PruneBacklog(); });
  return m;
}

void JobManager::PruneBacklog() {
  const absl::Time start = absl::Now();
  absl::Time last_note = start;
  int total = 0;
  for (;;) {
    {
      MutexLock lock(&mu_);
      if (shutdown_) break;
    }
    auto removed = journal_->Prune(NowMs(), kPruneBatchBytes);
    if (!removed.ok()) {
      spdlog::warn("journal: pruning old results: {}", removed.status().ToString());
      return;
    }
    total += *removed;
    if (*removed == 0) break;
    if (absl::Now() - last_note > absl::Seconds(1)) {
      spdlog::info("journal: pruning finished jobs past their retention: {} removed so far", total);
      last_note = absl::Now();
    }
  }
  if (total > 0) {
    spdlog::info("journal: removed {} finished jobs past their retention in {} ms (in the background)", total,
                 absl::ToInt64Milliseconds(absl::Now() - start));
  }
}

JobManager::~JobManager() { Shutdown(); }

void JobManager::Shutdown(absl::Time deadline) {
  {
    MutexLock lock(&mu_);
    if (shutdown_ && workers_.empty()) return;
    shutdown_ = true;  // workers pick no queued job from now on
    changed_.SignalAll();
    while (!running_.empty()) {
      if (changed_.WaitWithDeadline(&mu_, deadline)) break;
    }
    if (!running_.empty()) {
      spdlog::info("stopping: interrupting {} running job(s); they run again at the next start",
                   running_.size());
    }
    for (auto& [id, running] : running_) running->interrupt = true;
    changed_.SignalAll();  // yielded jobs wake to end
  }
  for (std::thread& t : workers_) t.join();
  workers_.clear();
  if (pruner_.joinable()) pruner_.join();  // stops between two batches
}

absl::StatusOr<v1::Job> JobManager::Submit(JobSpec spec) {
  // The plan, from the options and the images' headers only: a bad option, a decompression
  // bomb, an unknown format or a cut image is refused here, before it is journaled, queued or
  // decoded.
  ASSIGN_OR_RETURN(auto plan, runner_->Plan(spec.options, spec.source_image, spec.target_image));
  {
    MutexLock lock(&mu_);
    if (shutdown_) return absl::UnavailableError("fusiond is shutting down");
  }
  // Check the per-uid limit before writing, so a refused job leaves nothing behind.
  if (queue_.QueuedPerUid()[spec.owner_uid] >= options_.queue.max_queued_per_uid) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "uid ", spec.owner_uid, " already has ", options_.queue.max_queued_per_uid,
        " queued jobs (limit ", options_.queue.max_queued_per_uid, ")"));
  }
  std::optional<uint64_t> ticket;
  if (options_.disk != nullptr) {
    ASSIGN_OR_RETURN(auto held, options_.disk->Reserve(
        DiskBudget::JobBytes(spec.source_image.size(), spec.target_image.size(), plan.result_bound_bytes)));
    ticket = held;
  }
  auto record = journal_->Insert(spec, plan, NowMs());
  if (!record.ok()) {
    if (ticket) options_.disk->Release(*ticket);
    return record.status();
  }
  {
    MutexLock lock(&mu_);
    if (ticket) disk_tickets_[record->id] = *ticket;
    // The journal already holds the job: never refuse it now.
    absl::Status st = queue_.Push({record->id, record->owner_uid, record->priority,
                                   record->sequence, record->plan.stage_models},
                                  /*enforce_limit=*/false);
    if (!st.ok()) return st;
    changed_.SignalAll();
  }
  if (options_.on_change) options_.on_change();
  return ToProto(*record);
}

absl::StatusOr<JobRecord> JobManager::Owned(const std::string& id, uid_t caller) {
  auto record = journal_->Get(id);
  if (!record.ok() || record->owner_uid != caller) return NotFound(id);
  return record;
}

v1::Job JobManager::ToProto(const JobRecord& r) {
  v1::Job job;
  job.set_job_id(r.id);
  job.set_owner_uid(r.owner_uid);
  job.set_state(r.state);
  job.set_created_unix_ms(r.created_unix_ms);
  job.set_started_unix_ms(r.started_unix_ms);
  job.set_finished_unix_ms(r.finished_unix_ms);
  *job.mutable_options() = r.plan.options;
  job.set_error_code(r.error_code);
  job.set_error_message(r.error_message);
  job.set_error_stage(r.error_stage);
  if (r.state == JobState::QUEUED) {
    if (auto pos = queue_.Position(r.id)) job.set_queue_position(static_cast<uint32_t>(*pos));
  }
  if (r.state == JobState::SUCCEEDED) job.set_progress(1);
  if (r.state != JobState::QUEUED && r.state != JobState::RUNNING) return job;  // ended: no live figures
  MutexLock lock(&mu_);
  if (auto it = running_.find(r.id); it != running_.end()) {
    job.set_stage(it->second->stage);
    job.set_progress(it->second->progress);
    job.set_cancel_requested(it->second->cancel);
    job.set_frames_done(it->second->frames_done);
    job.set_frames_total(it->second->frames_total);
    job.set_frames_per_second(it->second->fps);
  }
  return job;
}

absl::StatusOr<v1::Job> JobManager::Get(const std::string& id, uid_t caller) {
  ASSIGN_OR_RETURN(auto record, Owned(id, caller));
  return ToProto(record);
}

absl::StatusOr<std::vector<v1::Job>> JobManager::List(uid_t caller,
                                                      const std::vector<JobState>& states,
                                                      size_t limit) {
  ASSIGN_OR_RETURN(auto records, journal_->List(caller, states, limit));
  std::vector<v1::Job> jobs;
  for (const JobRecord& r : records) jobs.push_back(ToProto(r));
  return jobs;
}

absl::StatusOr<std::vector<v1::Job>> JobManager::ListAll(const std::vector<JobState>& states, size_t limit) {
  ASSIGN_OR_RETURN(auto records, journal_->List(std::nullopt, states, limit));
  std::vector<v1::Job> jobs;
  for (const JobRecord& r : records) jobs.push_back(ToProto(r));
  return jobs;
}

absl::StatusOr<v1::Job> JobManager::Cancel(const std::string& id, uid_t caller, bool operator_override) {
  auto record = operator_override ? journal_->Get(id) : Owned(id, caller);
  if (!record.ok()) return operator_override ? NotFound(id) : record.status();
  caller = record->owner_uid;  // the owner's view from here on
  if (IsFinal(record->state)) {
    return absl::FailedPreconditionError(
        absl::StrCat("job '", id, "' is already ", v1::JobState_Name(record->state)));
  }
  bool was_queued = false;
  {
    MutexLock lock(&mu_);
    if (auto it = running_.find(id); it != running_.end()) {
      it->second->cancel = true;
      changed_.SignalAll();  // a yielded job wakes to end
    } else {
      was_queued = queue_.Remove(id);
    }
  }
  if (was_queued) {
    // Out of the queue now: its end must be recorded (a full disk's goes to the journal's
    // EndLedger), or the job would wait, QUEUED, for nothing.
    absl::Status st = journal_->Finish(id, JobState::CANCELLED,
                                       static_cast<int32_t>(absl::StatusCode::kCancelled),
                                       "cancelled while queued", {}, NowMs());
    ReleaseDisk(id);
    if (!st.ok()) {
      spdlog::error("job {}: cancelled, but its end cannot be recorded: {}", id, st.ToString());
      return st;
    }
    ASSIGN_OR_RETURN(auto final_record, journal_->Get(id));
    v1::JobEvent e;
    *e.mutable_done()->mutable_job() = ToProto(final_record);
    Emit(id, e, true);
    if (options_.on_change) options_.on_change();
    return ToProto(final_record);
  }
  return Get(id, caller);
}

absl::StatusOr<StoredResult> JobManager::Result(const std::string& id, uid_t caller) {
  ASSIGN_OR_RETURN(auto record, Owned(id, caller));
  if (record.state != JobState::SUCCEEDED) {
    // A failed or cancelled job's own error says why there is no result.
    return absl::FailedPreconditionError(absl::StrCat("job '", id, "' is ", v1::JobState_Name(record.state), ", not SUCCEEDED",
                                                      record.error_message.empty() ? "" : ": ",
                                                      record.error_message));
  }
  return journal_->GetResult(id);
}

absl::StatusOr<uint64_t> JobManager::Watch(const std::string& id, uid_t caller,
                                           EventCallback callback) {
  auto record = Owned(id, caller);
  if (!record.ok()) return record.status();
  v1::JobEvent first;
  first.set_job_id(id);
  first.set_unix_ms(NowMs());
  uint64_t handle = 0;
  {
    // Under mu_, a final transition (journal write + watcher removal) cannot interleave.
    MutexLock lock(&mu_);
    ASSIGN_OR_RETURN(auto now, journal_->Get(id));
    if (!IsFinal(now.state)) {
      handle = next_watch_++;
      watchers_[handle] = Watcher{id, callback};
      if (auto it = running_.find(id); it != running_.end()) {
        first.mutable_stage_started()->set_stage(it->second->stage);
        first.mutable_stage_started()->set_progress(it->second->progress);
      } else {
        first.mutable_queued()->set_position(queue_.Position(id).value_or(0));
      }
    }
    if (IsFinal(now.state)) record = now;
  }
  if (handle == 0) {
    *first.mutable_done()->mutable_job() = ToProto(*record);
  }
  callback(first);
  return handle;
}

void JobManager::Unwatch(uint64_t handle) {
  MutexLock lock(&mu_);
  watchers_.erase(handle);
}

void JobManager::ReleaseDisk(const std::string& id) {
  MutexLock lock(&mu_);
  auto it = disk_tickets_.find(id);
  if (it == disk_tickets_.end()) return;
  options_.disk->Release(it->second);
  disk_tickets_.erase(it);
}

void JobManager::Emit(const std::string& id, v1::JobEvent event, bool final) {
  event.set_job_id(id);
  event.set_unix_ms(NowMs());
  std::vector<EventCallback> callbacks;
  {
    MutexLock lock(&mu_);
    for (auto it = watchers_.begin(); it != watchers_.end();) {
      if (it->second.job_id != id) {
        ++it;
        continue;
      }
      callbacks.push_back(it->second.callback);
      if (final) {
        watchers_.erase(it++);
      } else {
        ++it;
      }
    }
  }
  for (const EventCallback& cb : callbacks) cb(event);
  if (options_.on_event) options_.on_event(event);
}

std::map<uid_t, JobManager::ClientCounts> JobManager::CountsByUid() {
  std::map<uid_t, ClientCounts> out;
  for (const auto& [uid, n] : queue_.QueuedPerUid()) out[uid].queued = n;
  MutexLock lock(&mu_);
  for (const auto& [id, running] : running_) ++out[running->record.owner_uid].running;
  return out;
}

std::vector<std::vector<std::string>> JobManager::UpcomingStages(size_t max_jobs) {
  std::vector<std::vector<std::string>> out;
  {
    MutexLock lock(&mu_);
    for (const auto& [id, r] : running_) {
      if (out.size() >= max_jobs) break;
      out.push_back(RemainingStageModels(r->record.plan, r->stages_done));
    }
  }
  if (out.size() < max_jobs) {
    for (auto& stages : queue_.UpcomingStages(max_jobs - out.size())) out.push_back(std::move(stages));
  }
  return out;
}

absl::Status JobManager::CheckProgress(absl::Duration stall) {
  const int64_t now = NowMs(), limit = absl::ToInt64Milliseconds(stall);
  MutexLock lock(&mu_);
  for (const auto& [id, running] : running_) {
    if (running->yielded) continue;  // the work it yielded to is looked at instead
    const int64_t quiet = now - running->alive_ms;
    if (quiet > limit) {
      return absl::DeadlineExceededError(absl::StrCat("job ", id, " made no progress for ", absl::FormatDuration(absl::Milliseconds(quiet)),
                                                      running->stage.empty() ? "" : absl::StrCat(" in stage '", running->stage, "'"),
                                                      " (limit ", absl::FormatDuration(stall), ")"));
    }
  }
  return absl::OkStatus();
}

void JobManager::WorkerLoop() {
  if (options_.worker_nice > 0) {
    if (const int err = SetThisThreadsNice(options_.worker_nice); err != 0) {
      spdlog::warn("job worker: cannot lower its priority to nice {} (errno {}): batch work competes with live frames",
                   options_.worker_nice, err);
    }
  }
  for (;;) {
    std::optional<FairQueue::Entry> entry;
    {
      MutexLock lock(&mu_);
      while (!shutdown_ && !CanStart()) changed_.WaitWithDeadline(&mu_, absl::InfiniteFuture());
      if (shutdown_) return;
      const Running* yielded = BestYielded();
      entry = queue_.Pop(is_resident_, yielded != nullptr ? std::optional(yielded->priority) : std::nullopt);
      if (!entry) continue;
      auto running = std::make_shared<Running>();
      running->record.id = entry->id;
      running->record.owner_uid = entry->uid;
      running->record.plan.stage_models = entry->stage_models;
      running->priority = entry->priority;
      running_[entry->id] = running;
      ++active_;
    }
    if (options_.on_change) options_.on_change();
    RunOne(*entry);  // the job's buffers are freed when it returns
    if (options_.on_change) options_.on_change();
    if (options_.on_idle) {
      bool idle = false;
      {
        MutexLock lock(&mu_);
        idle = running_.empty();
      }
      if (idle) options_.on_idle();
    }
  }
}

void JobManager::RunOne(const FairQueue::Entry& entry) {
  std::shared_ptr<Running> running;
  {
    MutexLock lock(&mu_);
    running = running_.at(entry.id);
  }
  absl::StatusOr<JobRunner::Output> output = absl::InternalError("job inputs unavailable");
  auto record = journal_->Get(entry.id);
  absl::Status marked = record.ok() ? journal_->MarkRunning(entry.id, NowMs()) : record.status();
  auto inputs = marked.ok() ? journal_->LoadInputs(entry.id) : absl::StatusOr<JobInputs>(marked);
  if (inputs.ok()) {
    record->state = JobState::RUNNING;
    {
      MutexLock lock(&mu_);
      running->record = *record;
    }
    RunContext context(this, entry.id, running);
    output = runner_->Run(*record, inputs->source_image, inputs->target_image, context);
  } else {
    output = inputs.status();
  }
  if (running->interrupt && !running->cancel && !output.ok()) {
    // The daemon is stopping: the job stays RUNNING in the journal and runs again at start.
    MutexLock lock(&mu_);
    Retire(entry.id);
    return;
  }
  JobState state = JobState::SUCCEEDED;
  StoredResult stored;
  absl::Status status = output.status();
  if (output.ok()) {
    output->report.set_job_id(entry.id);
    output->report.set_state(v1::SUCCEEDED);
    stored.report = output->report.SerializeAsString();
    stored.image = std::move(output->image);
    stored.file = std::move(output->result_file);
    if (!stored.file.empty()) {
      std::error_code ec;
      stored.file_bytes = std::filesystem::file_size(stored.file, ec);
    }
  } else {
    state = (running->cancel && absl::IsCancelled(status)) ? JobState::CANCELLED : JobState::FAILED;
    stored.error_stage = StageOf(status);  // the runner's own word first (a decode error found late)
    if (stored.error_stage.empty()) {
      MutexLock lock(&mu_);
      stored.error_stage = running->stage.substr(0, running->stage.find(" ("));  // "detect (pass 2 of 5)"
    }
  }
  v1::JobEvent done;
  // The end is journalled (and fsynced) with no lock of the manager held: Get, Watch and the
  // other workers go on meanwhile. The job leaves running_ once its end is durable.
  absl::Status st = journal_->Finish(entry.id, state, static_cast<int32_t>(status.code()),
                                     std::string(status.message()), stored, NowMs());
  if (!st.ok()) {
    // Its result did not fit (a full state directory): the job ends FAILED with that error,
    // which needs no room (jobs/journal.h: the EndLedger).
    spdlog::error("job {}: cannot record its {} end, recording it FAILED: {}", entry.id, v1::JobState_Name(state),
                  st.ToString());
    absl::Status failed = journal_->Finish(entry.id, JobState::FAILED, static_cast<int32_t>(st.code()),
                                           std::string(st.message()), {}, NowMs());
    if (!failed.ok()) spdlog::error("job {}: cannot record its end at all: {}", entry.id, failed.ToString());
    if (!stored.file.empty()) ::unlink(stored.file.c_str());  // no row names it
  }
  {
    MutexLock lock(&mu_);
    Retire(entry.id);
  }
  ReleaseDisk(entry.id);
  auto final_record = journal_->Get(entry.id);
  if (final_record.ok()) *done.mutable_done()->mutable_job() = ToProto(*final_record);
  Emit(entry.id, std::move(done), true);
  // Old results go as new ones arrive (retention period and bytes, Journal::Options), one small
  // batch per finished job (a backlog is PruneBacklog's).
  if (auto pruned = journal_->Prune(NowMs(), kPruneBatchBytes); !pruned.ok()) {
    spdlog::warn("journal: pruning old results: {}", pruned.status().ToString());
  } else if (*pruned > 0) {
    spdlog::info("journal: removed {} finished jobs past their retention", *pruned);
  }
}

}  // namespace fusion::jobs
