#include "bench/trace_replay.h"

#include <algorithm>
#include <deque>
#include <sstream>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "memory/residency_manager.h"
#include "nlohmann/json.hpp"

namespace fusion::bench {
namespace {

// Counts nothing itself: the manager's counters are the figures. Returns the trace's bytes.
class TraceLoader final : public ModelLoader {
 public:
  explicit TraceLoader(const Trace& trace) {
    for (const TraceModel& m : trace.models) bytes_[m.name] = m.bytes;
  }
  absl::StatusOr<uint64_t> LoadToHost(const std::string& model) override { return bytes_.at(model); }
  absl::StatusOr<uint64_t> Upload(const std::string& model) override { return bytes_.at(model); }
  void ReleaseDevice(const std::string&) override {}
  void ReleaseHost(const std::string&) override {}

 private:
  absl::flat_hash_map<std::string, uint64_t> bytes_;
};

struct Active {
  size_t job;
  size_t next_stage;
};

// The rotation of the replay rules (trace_replay.h); depends on the trace alone.
class Scheduler {
 public:
  Scheduler(const Trace& trace, int concurrency) : trace_(trace), slots_(concurrency) {
    if (!trace.jobs.empty()) clock_ = trace.jobs.front().t;
  }
  // Admits arrivals and fills slots; false when every job is done.
  bool PrepareTurn() {
    while (true) {
      while (next_ < trace_.jobs.size() && trace_.jobs[next_].t <= clock_) queue_.push_back(next_++);
      while (rotation_.size() < static_cast<size_t>(slots_) && !queue_.empty()) {
        rotation_.push_back({queue_.front(), 0});
        queue_.pop_front();
      }
      if (!rotation_.empty()) return true;
      if (next_ >= trace_.jobs.size()) return false;
      clock_ = trace_.jobs[next_].t;
    }
  }
  const TraceStage& Current() const {
    return trace_.jobs[rotation_.front().job].stages[rotation_.front().next_stage];
  }
  void FinishTurn() {
    Active a = rotation_.front();
    rotation_.pop_front();
    ++clock_;
    if (++a.next_stage < trace_.jobs[a.job].stages.size()) rotation_.push_back(a);
  }
  size_t arrived() const { return next_; }
  // Stages in turn order as far as the known work goes: the rotation plus the first `k`
  // queued jobs (all if k < 0), no arrivals to come. Turn 0 is the current stage.
  std::vector<const TraceStage*> Forecast(int k) const {
    std::deque<Active> rot = rotation_;
    std::deque<size_t> queue(queue_.begin(),
                             k < 0 || static_cast<size_t>(k) >= queue_.size() ? queue_.end()
                                                                              : queue_.begin() + k);
    std::vector<const TraceStage*> turns;
    while (!rot.empty() || !queue.empty()) {
      while (rot.size() < static_cast<size_t>(slots_) && !queue.empty()) {
        rot.push_back({queue.front(), 0});
        queue.pop_front();
      }
      Active a = rot.front();
      rot.pop_front();
      turns.push_back(&trace_.jobs[a.job].stages[a.next_stage]);
      if (++a.next_stage < trace_.jobs[a.job].stages.size()) rot.push_back(a);
    }
    return turns;
  }

 private:
  const Trace& trace_;
  const int slots_;
  int64_t clock_ = 0;
  size_t next_ = 0;
  std::deque<size_t> queue_;
  std::deque<Active> rotation_;
};

// Stages as requests, with the trace's model bytes and pins.
FutureSequence ToSequence(const std::vector<const TraceStage*>& stages,
                          const absl::flat_hash_map<std::string, TraceModel>& models,
                          uint64_t version) {
  FutureSequence seq;
  seq.version = version;
  for (const TraceStage* s : stages) {
    auto it = models.find(s->model);
    const bool known = it != models.end();
    seq.requests.push_back(
        {s->model, known ? it->second.bytes : 0, s->working_bytes, known && it->second.pinned});
  }
  return seq;
}

// Next-use distances and the request sequence for the turn being played, computed once per
// turn on first use. The sequence's version is the turn: it changes with every turn.
class ReplayFuture final : public FutureReferences {
 public:
  explicit ReplayFuture(const absl::flat_hash_map<std::string, TraceModel>& models)
      : models_(models) {}
  // Whole-schedule future (belady, planner-offline): `schedule` lists every turn's stage.
  void SetSchedule(std::vector<const TraceStage*> schedule) { schedule_ = std::move(schedule); }
  void SetTurn(size_t turn, const Scheduler* scheduler) {
    turn_ = turn, scheduler_ = scheduler, computed_ = false, sequence_ = nullptr;
  }
  int lookahead_jobs = -1;
  uint64_t NextUse(const std::string& model) const override {
    if (!computed_) Compute();
    auto it = next_.find(model);
    return it == next_.end() ? kNoFutureUse : it->second;
  }
  // The rotation's forecast (arrived jobs only), or the rest of the whole schedule.
  std::shared_ptr<const FutureSequence> Sequence() const override {
    if (scheduler_ == nullptr) return nullptr;
    if (sequence_ == nullptr) {
      std::vector<const TraceStage*> stages =
          schedule_.empty() ? scheduler_->Forecast(lookahead_jobs)
                            : std::vector<const TraceStage*>(schedule_.begin() + turn_, schedule_.end());
      sequence_ = std::make_shared<FutureSequence>(ToSequence(stages, models_, turn_ + 1));
    }
    return sequence_;
  }

 private:
  void Compute() const {
    next_.clear();
    if (!schedule_.empty()) {
      for (size_t i = schedule_.size(); i-- > turn_;) next_[schedule_[i]->model] = i - turn_;
    } else {
      std::vector<const TraceStage*> turns = scheduler_->Forecast(lookahead_jobs);
      for (size_t i = turns.size(); i-- > 0;) next_[turns[i]->model] = i;
    }
    computed_ = true;
  }
  const absl::flat_hash_map<std::string, TraceModel>& models_;
  std::vector<const TraceStage*> schedule_;
  size_t turn_ = 0;
  const Scheduler* scheduler_ = nullptr;
  mutable bool computed_ = false;
  mutable absl::flat_hash_map<std::string, uint64_t> next_;
  mutable std::shared_ptr<const FutureSequence> sequence_;
};

}  // namespace

absl::StatusOr<Trace> ParseTrace(const std::string& jsonl) {
  Trace trace;
  std::istringstream in(jsonl);
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.empty()) continue;
    try {
      const nlohmann::json j = nlohmann::json::parse(line);
      if (n == 1) {
        for (const auto& m : j.at("models")) {
          trace.models.push_back({m.at("name"), m.at("bytes"), m.value("pinned", false)});
        }
        continue;
      }
      TraceJob job{j.at("t"), j.at("client"), j.at("job"), {}};
      for (const auto& s : j.at("stages")) job.stages.push_back({s.at("model"), s.at("working_bytes")});
      if (job.stages.empty()) return absl::InvalidArgumentError(absl::StrCat("line ", n, ": no stages"));
      trace.jobs.push_back(std::move(job));
    } catch (const nlohmann::json::exception& e) {
      return absl::InvalidArgumentError(absl::StrCat("trace line ", n, ": ", e.what()));
    }
  }
  if (trace.models.empty()) return absl::InvalidArgumentError("trace: no models line");
  return trace;
}

absl::StatusOr<ReplayResult> Replay(const Trace& trace, const ReplayOptions& options) {
  TraceLoader loader(trace);
  absl::flat_hash_map<std::string, TraceModel> models;
  for (const TraceModel& tm : trace.models) models[tm.name] = tm;
  ReplayFuture future(models);
  future.lookahead_jobs = options.lookahead_jobs;
  const bool offline_planner = options.policy == "planner-offline";
  if (options.policy == "belady" || options.policy == "belady-bytes" || offline_planner) {
    std::vector<const TraceStage*> schedule;
    Scheduler s(trace, options.concurrency);
    for (; s.PrepareTurn(); s.FinishTurn()) schedule.push_back(&s.Current());
    future.SetSchedule(std::move(schedule));
  }
  ResidencyManager::Options mo;
  mo.device_budget_bytes = options.budget_bytes;
  mo.policy = offline_planner ? "planner" : options.policy;
  mo.loader = &loader;
  mo.future = &future;
  auto manager = ResidencyManager::Create(mo);
  if (!manager.ok()) return manager.status();
  ResidencyManager& m = **manager;
  uint64_t pinned = 0;
  for (const TraceModel& tm : trace.models) {
    if (absl::Status s = m.RegisterModel({tm.name, tm.bytes}); !s.ok()) return s;
  }
  for (const TraceModel& tm : trace.models) {
    if (!tm.pinned) continue;
    if (absl::Status s = m.Pin(tm.name, absl::Now()); !s.ok()) return s;
    pinned += tm.bytes;
  }

  ReplayResult result;
  Scheduler scheduler(trace, options.concurrency);
  size_t arrived = 0;
  for (size_t turn = 0; scheduler.PrepareTurn(); scheduler.FinishTurn(), ++turn) {
    const TraceStage& stage = scheduler.Current();
    auto it = models.find(stage.model);
    if (it == models.end()) {
      return absl::InvalidArgumentError(absl::StrCat("unknown model '", stage.model, "'"));
    }
    const uint64_t pinned_other = pinned - (it->second.pinned ? it->second.bytes : 0);
    const bool fits = it->second.bytes + stage.working_bytes + pinned_other <= options.budget_bytes;
    future.SetTurn(turn, &scheduler);
    m.PrepareEviction();  // as fusiond after a queue change: the plan is made off the lock
    if (options.requests != nullptr) {
      ReplayRequest r{turn, stage.model, it->second.bytes, stage.working_bytes,
                      it->second.pinned, fits, scheduler.arrived(), {}};
      if (scheduler.arrived() != arrived) r.forecast = ToSequence(scheduler.Forecast(-1), models, turn);
      options.requests->push_back(std::move(r));
    }
    arrived = scheduler.arrived();
    auto lease = m.Acquire({"replay", 0}, stage.model, stage.working_bytes, absl::Now());
    if (lease.ok() != fits) {
      return absl::InternalError(absl::StrCat("turn ", turn, ": manager answered ",
                                              lease.status().ToString(), " but the stage ",
                                              fits ? "fits" : "does not fit"));
    }
    if (!fits) ++result.refused;
  }
  ResidencySnapshot s = m.Snapshot();
  result.bytes_uploaded = s.totals.bytes_uploaded;
  result.loads = s.totals.uploads;
  result.evictions = s.totals.evictions;
  result.peak_bytes = s.device.peak_bytes;
  return result;
}

}  // namespace fusion::bench
