#include "pipeline/oom_ladder.h"

#include <algorithm>
#include <atomic>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/size.h"
#include "loader/device_oom.h"
#include "spdlog/spdlog.h"

namespace fusion {
namespace {

// Stage scopes are numbered apart from model scopes (which the loader picks) by the top bit.
ScopeId NextStageScope() {
  static std::atomic<uint64_t> next{1};
  return (uint64_t{1} << 63) | next++;
}

double Ms(absl::Duration d) { return absl::ToDoubleMilliseconds(d); }

// "untiled" or "in 64px tiles".
std::string How(int tile_px) { return tile_px == 0 ? "untiled" : absl::StrCat("in ", tile_px, "px tiles"); }

}  // namespace

const char* ToString(StageMode mode) {
  switch (mode) {
    case StageMode::kDevice: return "device";
    case StageMode::kTiled: return "tiled";
    case StageMode::kCpuFallback: return "cpu_fallback";
    case StageMode::kHost: return "host";
  }
  return "unknown";
}

std::string OomLadder::TileBucket(const StageSpec& stage, int tile_px) {
  return tile_px == 0 ? stage.shape_bucket : absl::StrCat(stage.shape_bucket, "@tile", tile_px);
}

uint64_t OomLadder::TileEstimate(const StageSpec& stage, uint64_t whole, int tile_px) const {
  uint64_t scaled = whole;
  if (stage.input_pixels != 0) {
    // Working sets scale with the pixels processed at once; a tile also carries its overlap:
    // its halo on each side, and at least (1.5 * side)^2 in all.
    const double with_halo = static_cast<double>(tile_px + 2 * stage.tile_halo_px);
    const double tile_pixels = std::max(2.25 * tile_px * tile_px, with_halo * with_halo);
    const double fraction = std::min(1.0, tile_pixels / static_cast<double>(stage.input_pixels));
    scaled = std::max<uint64_t>(1, static_cast<uint64_t>(static_cast<double>(whole) * fraction));
  }
  return std::max(scaled, residency_->WorkingSetEstimate(stage.model, TileBucket(stage, tile_px), 0));
}

std::string OomLadder::NeedNote(const StageSpec& stage, uint64_t working) const {
  const ResidencySnapshot s = residency_->Snapshot();
  uint64_t model_bytes = 0;
  for (const ModelSnapshot& m : s.models) {
    if (m.name == stage.model) model_bytes = m.bytes;
  }
  return absl::StrCat("the model and its working set need ", FormatBytes(model_bytes + working), " of the ",
                      FormatBytes(s.device.budget_bytes), " device budget");
}

std::string OomLadder::WaitNote(const StageSpec& stage, uint64_t working) const {
  const ResidencySnapshot s = residency_->Snapshot();
  uint64_t model_bytes = 0, evictable = 0;
  bool resident = false;
  for (const ModelSnapshot& m : s.models) {
    if (m.name == stage.model) {
      model_bytes = m.bytes;
      resident = m.state == ModelState::kDevice || m.state == ModelState::kInUse;
    } else if (m.state == ModelState::kDevice && !m.pinned && m.leases == 0) {
      evictable += m.bytes;
    }
  }
  const uint64_t need = working + (resident ? 0 : model_bytes);
  const uint64_t busy = s.device.used_bytes + s.device.reserved_bytes;
  const uint64_t free = busy >= s.device.budget_bytes ? 0 : s.device.budget_bytes - busy;
  // Waits only what could fit once others' leases end (the rest is refused at once).
  if (need <= free + evictable || working + model_bytes > s.device.budget_bytes) return "";
  return absl::StrCat("waiting for device memory: model '", stage.model, "' needs ", FormatBytes(need),
                      ", ", FormatBytes(free), " free, ", FormatBytes(s.device.reserved_bytes),
                      " held by running stages");
}

absl::Status OomLadder::Attempt(const Owner& owner, const StageSpec& stage, StageBody& body,
                                uint64_t working, int tile_px, StageOutcome& out,
                                bool& admitted, bool& outgrew) {
  const absl::Time deadline = absl::Now() + options_.admission_timeout;
  outgrew = false;
  while (true) {
    const absl::Time start = absl::Now();
    const std::string note = stage.waiting ? WaitNote(stage, working) : "";
    if (!note.empty()) stage.waiting(note);
    auto lease = residency_->Acquire(owner, stage.model, working, deadline, stage.cancelled);
    if (!note.empty()) stage.waiting("");
    out.upload_wait_ms += Ms(absl::Now() - start);
    admitted = lease.ok() || !absl::IsResourceExhausted(lease.status());
    if (!lease.ok()) return lease.status();
    ++out.attempts;
    const ScopeId scope = NextStageScope();
    // The scope may allocate what its lease admitted and no more (see the header).
    meter_->LimitScope(scope, working, ScopeKind::kDevice);
    meter_->ResetPeak(scope);
    absl::Status st;
    if (faults_ != nullptr && faults_->Hangs(stage.name)) {
      spdlog::warn("stage '{}': injected hang (FUSIOND_FAULTS)", stage.name);
      absl::SleepFor(absl::Hours(1));  // no checkpoint: the job loop looks stuck
    }
    const bool injected = faults_ != nullptr && faults_->FailDevice(stage.name, tile_px);
    if (injected) {
      st = DeviceOomError(absl::StrCat("stage '", stage.name, "': injected device OOM"));
    } else {
      st = body.RunDevice(tile_px, scope);
    }
    const ScopeUsage usage = meter_->Usage(scope);
    meter_->Forget(scope);
    const uint64_t peak = usage.peak_bytes;
    const bool shared_oom = !injected && IsDeviceOom(st) && usage.shared_refusals > 0 && usage.limit_refusals == 0;
    lease->Release();
    // Within its admission but refused by the shared budget while other stages of fusiond hold
    // reservations (leases, uploads): contention; they will end. Without any, the budget is
    // short for another reason (another process's memory): a real OOM, handled below.
    if (shared_oom && residency_->Snapshot().device.reserved_bytes > 0 &&
        absl::Now() + options_.contention_backoff < deadline) {
      ++out.contention_retries;
      if (stage.cancelled && stage.cancelled()) {
        return absl::CancelledError(absl::StrCat("job cancelled while waiting for device memory for model '",
                                                 stage.model, "'"));
      }
      absl::SleepFor(options_.contention_backoff);
      continue;
    }
    if (st.ok()) {
      out.peak_bytes = peak;
      residency_->RecordWorkingSetPeak(stage.model, TileBucket(stage, tile_px), peak);
    } else if (IsDeviceOom(st) && !injected) {
      // The run needed more than it was admitted with: at least what it reached. An injected
      // fault measured nothing: learning from it would leave the estimate raised for good (the
      // profile keeps maxima) and send later normal jobs of this shape to tiles.
      outgrew = usage.limit_refusals > 0;  // refused at its own admission (not a fault, not others)
      residency_->RecordWorkingSetPeak(stage.model, TileBucket(stage, tile_px), std::max(peak, working * 2));
    }
    return st;  // the lease has ended, whatever happened
  }
}

absl::Status OomLadder::CpuAttempt(const Owner& owner, const StageSpec& stage, StageBody& body,
                                   uint64_t bytes, int tile_px, absl::Time deadline,
                                   StageOutcome& out, bool& admitted) {
  const absl::Time start = absl::Now();
  auto lease = residency_->AcquireHost(
      owner, absl::StrCat("stage '", stage.name, "' CPU fallback ", How(tile_px), " (model '", stage.model, "')"),
      bytes, deadline, stage.cancelled);
  out.upload_wait_ms += Ms(absl::Now() - start);
  admitted = lease.ok() || !absl::IsResourceExhausted(lease.status());
  if (!lease.ok()) return lease.status();
  ++out.attempts;
  const ScopeId scope = NextStageScope();
  // An unbounded host tier (budget 0) admits anything: the scope is then only measured.
  const bool bounded = residency_->Snapshot().host.budget_bytes != 0;
  meter_->LimitScope(scope, bounded ? bytes : 0, ScopeKind::kHost);
  meter_->ResetPeak(scope);
  absl::Status st;
  if (faults_ != nullptr && faults_->FailCpu(stage.name)) {
    st = absl::ResourceExhaustedError(absl::StrCat("stage '", stage.name, "': injected CPU failure"));
  } else {
    st = body.RunCpu(tile_px, scope);
  }
  const uint64_t peak = meter_->Usage(scope).peak_bytes;
  meter_->Forget(scope);
  if (st.ok()) out.peak_bytes = peak;
  return st;  // the host lease ends here
}

absl::Status OomLadder::CpuFallback(const Owner& owner, const StageSpec& stage, StageBody& body,
                                    uint64_t estimate, absl::Time deadline, StageOutcome& out) {
  // The host copy's network is built for the attempt: count the model's bytes with it.
  uint64_t model_bytes = 0;
  for (const ModelSnapshot& m : residency_->Snapshot().models) {
    if (m.name == stage.model) model_bytes = m.bytes;
  }
  std::vector<int> tiles = {0};
  if (stage.tileable) {
    for (int tile = stage.max_tile_px; tile >= stage.min_tile_px; tile /= 2) tiles.push_back(tile);
  }
  std::string last;
  for (int tile : tiles) {
    const uint64_t bytes = (tile == 0 ? estimate : TileEstimate(stage, estimate, tile)) + model_bytes;
    bool admitted = true;
    absl::Status st = CpuAttempt(owner, stage, body, bytes, tile, deadline, out, admitted);
    if (st.ok()) {
      out.tile_px = tile;
      return st;
    }
    if (admitted && !IsDeviceOom(st) && !absl::IsResourceExhausted(st)) return st;
    last = std::string(st.message());
    if (admitted && IsDeviceOom(st)) {
      out.degradations.push_back(absl::StrCat(stage.name, ": out of host memory on the CPU ", How(tile), " (",
                                              FormatBytes(bytes), " admitted on the host tier)"));
    }
  }
  return absl::ResourceExhaustedError(last);
}

absl::StatusOr<StageOutcome> OomLadder::Run(const Owner& owner, const StageSpec& stage,
                                            StageBody& body) {
  const absl::Time start = absl::Now();
  StageOutcome out;
  uint64_t estimate =
      residency_->WorkingSetEstimate(stage.model, stage.shape_bucket, stage.working_bytes);
  auto finish = [&](StageMode mode, std::string recovered_by) {
    if (!recovered_by.empty()) residency_->RecordOomRecovery(recovered_by);
    out.mode = mode;
    out.recovered_by = std::move(recovered_by);
    out.ms = Ms(absl::Now() - start);
    return out;
  };
  // Why the last device attempt ran out: its own admission, or (after waiting until the
  // admission deadline) memory other jobs held.
  auto why = [&](uint32_t contention_before) {
    return out.contention_retries > contention_before
               ? "contention: other jobs held the device until the admission deadline"
               : "too big for its admission";
  };

  // A degradation says what happened and why, in one line: "detect: ran in 256-px tiles: the
  // model and its working set need 138.8 MiB of the 128.0 MiB device budget". `untiled` is why
  // the stage did not run whole on the device.
  std::string untiled;

  // 1. Admission from the estimate.
  bool admitted = true, outgrew = false;
  absl::Status st = Attempt(owner, stage, body, estimate, 0, out, admitted, outgrew);
  if (st.ok()) return finish(StageMode::kDevice, "");
  if (admitted && !IsDeviceOom(st)) return st;
  if (!admitted) {
    untiled = out.contention_retries > 0 ? why(0) : NeedNote(stage, estimate);
  } else {
    // 2. Real OOM: raise the estimate, make all the room there is, retry once.
    estimate = residency_->WorkingSetEstimate(stage.model, stage.shape_bucket, estimate);
    residency_->EvictAllEvictable();
    meter_->ReleaseCache();
    const uint32_t before = out.contention_retries;
    st = Attempt(owner, stage, body, estimate, 0, out, admitted, outgrew);
    if (st.ok()) return finish(StageMode::kDevice, "evict_retry");
    if (admitted && !IsDeviceOom(st)) return st;
    untiled = admitted ? absl::StrCat("untiled it ran out of device memory (", FormatBytes(estimate),
                                      " working set; ", why(before), ")")
                       : NeedNote(stage, estimate);
  }

  // 3. Tiles, halving.
  if (stage.tileable) {
    for (int tile = stage.max_tile_px; tile >= stage.min_tile_px; tile /= 2) {
      const uint32_t before = out.contention_retries;
      st = Attempt(owner, stage, body, TileEstimate(stage, estimate, tile), tile, out, admitted, outgrew);
      if (outgrew) {
        // The tile outgrew its estimate (raised now): make all the room there is, retry once.
        residency_->EvictAllEvictable();
        meter_->ReleaseCache();
        st = Attempt(owner, stage, body, TileEstimate(stage, estimate, tile), tile, out, admitted, outgrew);
      }
      if (st.ok()) {
        out.tile_px = tile;
        out.degradations.push_back(absl::StrCat(stage.name, ": ran in ", tile, "-px tiles: ", untiled));
        return finish(StageMode::kTiled, "tiled");
      }
      if (admitted && !IsDeviceOom(st)) return st;
      // A tile that ran out for real: the next, smaller one gets all the room there is.
      if (admitted) {
        if (out.contention_retries > before) {
          out.degradations.push_back(absl::StrCat(stage.name, ": ", tile, "px tiles: ", why(before)));
        }
        residency_->EvictAllEvictable();
        meter_->ReleaseCache();
      }
    }
  }

  // 4. CPU fallback on the host tier, admitted and tiled like the device path.
  st = CpuFallback(owner, stage, body, estimate, absl::Now() + options_.admission_timeout, out);
  if (st.ok()) {
    out.degradations.push_back(absl::StrCat(
        stage.name, ": ran on the CPU (device memory exhausted; ",
        out.tile_px == 0 ? "untiled" : absl::StrCat(out.tile_px, "px tiles"), " on the host tier): ", untiled,
        stage.tileable ? absl::StrCat("; device tiles down to ", stage.min_tile_px, " px did not fit either") : ""));
    return finish(StageMode::kCpuFallback, "cpu_fallback");
  }
  if (!absl::IsResourceExhausted(st)) return st;

  // 5. Nothing worked.
  const ResidencySnapshot snap = residency_->Snapshot();
  return absl::ResourceExhaustedError(absl::StrCat(
      "stage '", stage.name, "' (model '", stage.model, "') does not fit: working set ",
      FormatBytes(estimate), " (", estimate, " bytes), device budget ",
      FormatBytes(snap.device.budget_bytes), "; CPU fallback on the host tier (host budget ",
      snap.host.budget_bytes == 0 ? std::string("unbounded") : FormatBytes(snap.host.budget_bytes),
      ") failed: ", st.message()));
}

}  // namespace fusion
