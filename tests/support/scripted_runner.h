// ScriptedRunner: a JobRunner for tests of the job machinery (queue, journal, RPCs) that
// needs no models. Test-only.
#pragma once

#include <atomic>
#include <map>
#include <utility>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/mutex.h"
#include "fusion_status.h"
#include "jobs/job_runner.h"
#include "notification.h"

namespace fusion::jobs {

// A scripted runner: two stages ("detect" of model "detector", "generate" of "generator"); each stage is `units` units of
// `stage_ms` sleep, with a cancellation check before each unit (as the pipeline's checkpoints
// between faces and tiles) and at its boundary; `units_run` counts the units that ran. The
// "image" is the target reversed plus the source length. A target "fail" fails the job (its
// status names stage "detect");
// options with ratio > 1 are invalid; a target "bomb" is refused by Plan. With `hold` set, the first unit waits for it without
// looking at cancellation (a unit that cannot be interrupted).
class ScriptedRunner : public JobRunner {
 public:
  absl::StatusOr<JobPlan> Plan(const v1::JobOptions& o, const std::string&, const std::string& target) override {
    if (o.ratio() < 0 || o.ratio() > 1) {
      return absl::InvalidArgumentError("options: ratio must be in [0,1]");
    }
    if (target == "bomb") return absl::InvalidArgumentError("target image: a bomb (scripted)");
    // The result: the target reversed plus the source's length in decimal.
    return JobPlan{.options = o, .target = v1::IMAGE, .stage_models = {"detector", "generator"},
                   .result_bound_bytes = target.size() + 32};
  }
  absl::StatusOr<Output> Run(const JobRecord& job, const std::string& source,
                             const std::string& target, Context& ctx) override {
    const int now = ++running;
    int seen = max_running.load();
    while (now > seen && !max_running.compare_exchange_weak(seen, now)) {}
    {
      MutexLock lock(&mu);
      start_order.push_back(job.id);
    }
    while (gate != nullptr && !gate->HasBeenNotified() && !ctx.Cancelled()) {
      absl::SleepFor(absl::Milliseconds(1));
    }
    absl::Status st = absl::OkStatus();
    for (const auto& [stage, model] : {std::pair{"detect", "detector"}, std::pair{"generate", "generator"}}) {
      if (ctx.Cancelled()) {
        st = absl::CancelledError("cancelled at stage boundary");
        break;
      }
      ctx.StageStarted(stage, 0.1f);
      st = RunUnits(stage, ctx);
      if (!st.ok()) break;
      v1::StageReport report;
      report.set_name(stage);
      report.set_model(model);
      report.set_ms(stage_ms);
      ctx.StageFinished(report, 0.5f);
      if (hold_after_detect && model == std::string("detector")) {
        v1::StageReport host;  // a host stage: no model
        host.set_name("blend");
        ctx.StageFinished(host, 0.5f);
        after_detect.Notify();
        release_after_detect.WaitForNotification();
      }
    }
    for (int i = 1; st.ok() && i <= frames; ++i) ctx.FramesDone(i, frames, 100.0);
    --running;
    if (!st.ok()) return st;
    if (target == "fail") return WithStage(absl::FailedPreconditionError("detect: no face in the target"), "detect");
    {
      MutexLock lock(&mu);
      ++completed[job.id];
    }
    Output out;
    out.image = std::string(target.rbegin(), target.rend()) + std::to_string(source.size());
    out.report.set_faces_swapped(1);
    return out;
  }
  absl::Status RunUnits(const char* stage, Context& ctx) {
    for (int i = 0; i < units; ++i) {
      if (i == 0 && hold != nullptr) hold->WaitForNotification();
      if (i > 0 && ctx.Cancelled()) {
        if (ctx.Interrupted()) ++interrupted_seen;
        return absl::CancelledError(absl::StrCat("job cancelled during stage '", stage, "' (unit ", i + 1,
                                                 " of ", units, ")"));
      }
      absl::SleepFor(absl::Milliseconds(stage_ms));
      ++units_run;
    }
    return absl::OkStatus();
  }
  int stage_ms = 5;
  int units = 1;                        // per stage
  int frames = 0;                       // after the stages: FramesDone(1..frames of frames)
  std::atomic<int> units_run{0};
  std::atomic<int> interrupted_seen{0};  // cancellations the context called an interruption
  Notification* hold = nullptr;
  Notification* gate = nullptr;  // when set, runs wait for it (or a cancel) first
  // When set, after its detect stage a run reports a host stage (no model), notifies
  // after_detect and waits for release_after_detect (one job only: they are one-shot).
  bool hold_after_detect = false;
  Notification after_detect, release_after_detect;
  std::atomic<int> running{0}, max_running{0};
  Mutex mu;
  std::vector<std::string> start_order;
  std::map<std::string, int> completed;
};

}  // namespace fusion::jobs
