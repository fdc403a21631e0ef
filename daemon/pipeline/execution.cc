// Execution (execution.h). No LibTorch in this TU.
#include "pipeline/execution.h"

#include <algorithm>

#include <opencv2/imgproc.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "device/cpu_device_memory.h"
#include "image/image_header.h"
#include "models/common/exception_text.h"
#include "loader/device_oom.h"
#include "base/status_macros.h"

namespace fusion {
namespace {


// A stage body over one model: the device attempt runs inside the stage's scope on the
// device copy, the CPU fallback on a host copy inside a host scope (OomLadder). Exceptions become statuses;
// a device OOM (thrown, or swallowed by a network into an error status after the allocator
// refused) becomes DeviceOomError(); a cancellation stays CANCELLED.
class ModelBody final : public StageBody {
 public:
  ModelBody(const ModelStore& store, std::string stage, std::string model, StageFn fn, Checkpoint cp)
      : store_(store), stage_(std::move(stage)), model_(std::move(model)), fn_(std::move(fn)),
        cp_(std::move(cp)) {}

  absl::Status RunDevice(int tile_px, ScopeId scope) override {
    DeviceScope in_scope(scope);
    ASSIGN_OR_RETURN(auto copy, store_.DeviceCopy(model_));
    return Guard(*copy, tile_px);
  }
  // The host copy is built outside any scope (its weights are the host tier's); the stage's
  // own allocations are charged to the host scope its host lease admitted.
  absl::Status RunCpu(int tile_px, ScopeId scope) override {
    ASSIGN_OR_RETURN(auto copy, store_.HostCopy(model_));
    DeviceScope in_host_scope(scope);
    return Guard(*copy, tile_px);
  }

 private:
  absl::Status Guard(const ModelCopy& copy, int tile_px) {
    (void)IsDeviceOom(std::runtime_error(""));  // clears this thread's refusal flag
    absl::Status st;
    try {
      st = fn_(copy, tile_px, cp_);
    } catch (const std::exception& e) {
      if (IsDeviceOom(e)) return DeviceOomError(absl::StrCat("stage '", stage_, "': ", ExceptionText(e)));
      return absl::InternalError(absl::StrCat("stage '", stage_, "' (model '", model_, "'): ", ExceptionText(e)));
    }
    if (absl::IsCancelled(st)) return st;  // never mistaken for an OOM: the ladder ends at once
    // Networks turn LibTorch exceptions into INTERNAL; the allocator's flag tells an OOM apart.
    if (!st.ok() && (IsDeviceOom(std::runtime_error("")) ||
                     absl::StrContains(st.message(), "out of memory"))) {
      return DeviceOomError(absl::StrCat("stage '", stage_, "': ", st.message()));
    }
    return st;
  }

  const ModelStore& store_;
  const std::string stage_, model_;
  StageFn fn_;
  const Checkpoint cp_;
};

v1::StageMode ToProto(StageMode m) {
  switch (m) {
    case StageMode::kDevice: return v1::DEVICE;
    case StageMode::kTiled: return v1::TILED;
    case StageMode::kCpuFallback: return v1::CPU_FALLBACK;
    case StageMode::kHost: return v1::HOST;
  }
  return v1::STAGE_MODE_UNSPECIFIED;
}

}  // namespace

absl::Status Execution::CancelledBefore(const std::string& name) const {
  return absl::CancelledError(absl::StrCat("job cancelled before stage '", name, "'",
                                           per_frame_ && !frame_.empty() ? absl::StrCat(" (", frame_, ")") : ""));
}

Checkpoint Execution::StageCheckpoint(const std::string& name) {
  Checkpoint cp(name, [this] { return ctx_.Cancelled(); }, [this] { ctx_.GiveWay(); });
  return per_frame_ && !frame_.empty() ? cp.Within(frame_) : cp;
}

void Execution::Started(const std::string& name, float progress) {
  if (per_frame_) {
    ctx_.FrameStage(name);
  } else {
    ctx_.StageStarted(name, progress);
  }
}

absl::Status Execution::Stage(const std::string& name, const std::string& model, uint64_t input_pixels,
                              const std::string& bucket, float progress, StageFn fn, int max_tile_px,
                              int min_tile_px, int tile_halo_px) {
  ctx_.YieldPoint();  // no lease held here: the previous stage's ended
  if (ctx_.Cancelled()) return CancelledBefore(name);
  Started(name, progress);
  ASSIGN_OR_RETURN(auto spec, store_.catalogue().Get(model));
  StageSpec stage{.name = name,
                  .model = model,
                  .tileable = spec->tileable,
                  .working_bytes = std::max<uint64_t>(1, spec->working_set_bytes_per_pixel * input_pixels),
                  .shape_bucket = bucket,
                  .input_pixels = input_pixels,
                  .max_tile_px = max_tile_px,
                  .min_tile_px = min_tile_px,
                  .tile_halo_px = tile_halo_px,
                  .cancelled = [this] { return ctx_.Cancelled(); },
                  // The job's stage text says what it waits for while it waits.
                  .waiting = [this, name, progress](const std::string& note) {
                    Started(note.empty() ? name : absl::StrCat(name, " (", note, ")"), progress);
                  }};
  // The prefetch of this stage's model (started while the previous stage ran) counts as
  // upload wait; then the next model comes up while this stage runs.
  const absl::Time wait_start = absl::Now();
  if (prefetch_.valid()) prefetch_.wait();
  const double prefetch_wait_ms = absl::ToDoubleMilliseconds(absl::Now() - wait_start);
  // A planned stage the job skips (the encode of a source whose analysis is in the face cache)
  // is passed over: the plan moves to this stage's model wherever it is next.
  if (auto it = std::find(plan_.begin() + static_cast<std::ptrdiff_t>(next_), plan_.end(), model); it != plan_.end()) {
    next_ = static_cast<size_t>(it - plan_.begin());
  }
  while (next_ < plan_.size() && plan_[next_] == model) ++next_;
  if (next_ < plan_.size()) Prefetch(plan_[next_]);
  ModelBody body(store_, name, model, std::move(fn), StageCheckpoint(name));
  ASSIGN_OR_RETURN(auto outcome, ladder_.Run(owner_, stage, body));
  outcome.upload_wait_ms += prefetch_wait_ms;
  v1::StageReport r;
  r.set_name(name);
  r.set_model(model);
  r.set_ms(outcome.ms);
  r.set_mode(ToProto(outcome.mode));
  r.set_attempts(outcome.attempts);
  r.set_tile(outcome.tile_px);
  r.set_upload_wait_ms(outcome.upload_wait_ms);
  r.set_peak_bytes(outcome.peak_bytes);
  Finish(r, progress, outcome.degradations);
  return absl::OkStatus();
}

absl::StatusOr<Lease> Execution::HostBuffers(const std::string& what, uint64_t bytes) {
  return residency_.AcquireHost(owner_, what, bytes, absl::Now() + ladder_.admission_timeout(),
                                [this] { return ctx_.Cancelled(); });
}

absl::Status Execution::HostStage(const std::string& name, float progress,
                                  const std::function<absl::Status(const Checkpoint&)>& fn) {
  ctx_.YieldPoint();
  if (ctx_.Cancelled()) return CancelledBefore(name);
  Started(name, progress);
  const absl::Time start = absl::Now();
  RETURN_IF_ERROR(fn(StageCheckpoint(name)));
  v1::StageReport r;
  r.set_name(name);
  r.set_ms(absl::ToDoubleMilliseconds(absl::Now() - start));
  r.set_mode(v1::HOST);
  r.set_attempts(1);
  Finish(r, progress, {});
  return absl::OkStatus();
}

void Execution::Prefetch(const std::string& model) {
  const ResidencySnapshot s = residency_.Snapshot();
  for (const ModelSnapshot& m : s.models) {
    if (m.name != model) continue;
    if (m.state != ModelState::kAbsent && m.state != ModelState::kHost) return;  // there or coming
    if (s.device.used_bytes + s.device.reserved_bytes + m.bytes > s.device.budget_bytes) return;
    ResidencyManager* r = &residency_;
    prefetch_ = std::async(std::launch::async, [r, model] {
      (void)r->Load(model, absl::Now() + absl::Seconds(5));
    });
    return;
  }
}

void Execution::Degrade(const std::string& d) {
  if (per_frame_ && std::find(report_.degradations().begin(), report_.degradations().end(), d) !=
                        report_.degradations().end()) {
    return;
  }
  report_.add_degradations(d);
  ctx_.Degradation(d);
}

void Execution::Progress(const std::string& stage, const std::string& note, float progress) {
  float seen = progress_floor_.load();
  while (seen < progress && !progress_floor_.compare_exchange_weak(seen, progress)) {
  }
  // Never lower than what was shown: the scan's pass count grows as proposal windows are added
  // (multiscale.h), so "pass i of n" can be a smaller fraction than the pass before.
  if (!per_frame_) ctx_.StageStarted(absl::StrCat(stage, " (", note, ")"), std::max(seen, progress));
}

void Execution::Finish(const v1::StageReport& r, float progress, const std::vector<std::string>& degradations) {
  progress = std::max(progress, progress_floor_.load());
  if (per_frame_) {
    Merge(r);
  } else {
    *report_.add_stages() = r;
  }
  for (const std::string& d : degradations) {
    if (per_frame_ && std::find(report_.degradations().begin(), report_.degradations().end(), d) !=
                          report_.degradations().end()) {
      continue;  // a frame's ladder step, already said for an earlier frame
    }
    report_.add_degradations(d);
    ctx_.Degradation(d);
  }
  if (!per_frame_) ctx_.StageFinished(r, progress);
}

void Execution::Merge(const v1::StageReport& r) {
  for (v1::StageReport& s : *report_.mutable_stages()) {
    if (s.name() != r.name()) continue;
    s.set_ms(s.ms() + r.ms());
    s.set_upload_wait_ms(s.upload_wait_ms() + r.upload_wait_ms());
    s.set_attempts(std::max(s.attempts(), r.attempts()));
    s.set_peak_bytes(std::max(s.peak_bytes(), r.peak_bytes()));
    if (r.mode() != v1::HOST && r.mode() > s.mode()) s.set_mode(r.mode());  // DEVICE < TILED < CPU_FALLBACK
    if (r.tile() != 0 && (s.tile() == 0 || r.tile() < s.tile())) s.set_tile(r.tile());
    return;
  }
  *report_.add_stages() = r;
}

absl::StatusOr<Picture> MakePicture(const cv::Mat& bgr, std::string what) {
  Picture p;
  p.what = std::move(what);
  p.bgr = bgr;
  cv::cvtColor(bgr, p.rgb, cv::COLOR_BGR2RGB);
  return p;
}

std::string Bucket(const cv::Mat& m) { return absl::StrCat(m.cols, "x", m.rows); }

absl::StatusOr<DecodedImage> AdmittedDecode(Execution& run, const std::string& bytes, const std::string& what,
                                            uint64_t max_pixels, uint64_t extra_per_px, Lease* buffers) {
  ASSIGN_OR_RETURN(auto header, image::ScreenImage(bytes, what, max_pixels));
  const DecodeFootprint f = DecodeHostBytes(header, bytes.size());
  const std::string size = absl::StrCat(header.width, "x", header.height);
  ASSIGN_OR_RETURN(auto kept, run.HostBuffers(absl::StrCat("stage 'decode': the ", what, "'s ", size, " buffers"),
                              f.kept + header.pixels() * extra_per_px));
  ASSIGN_OR_RETURN(auto scratch, run.HostBuffers(absl::StrCat("stage 'decode': the ", what, " decoder's ", size, " scratch"),
                                 f.scratch));
  auto img = DecodeImage(bytes, what, max_pixels);
  if (img.ok()) *buffers = std::move(kept);
  return img;
}

}  // namespace fusion
