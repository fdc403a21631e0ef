#include "pipeline/oom_ladder.h"

#include <algorithm>
#include <atomic>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "fusion/size.h"
#include "pipeline/device_oom.h"

namespace fusion {
namespace {

// Stage scopes are numbered apart from model scopes (which the loader picks) by the top bit.
ScopeId NextStageScope() {
  static std::atomic<uint64_t> next{1};
  return (uint64_t{1} << 63) | next++;
}

double Ms(absl::Duration d) { return absl::ToDoubleMilliseconds(d); }

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

uint64_t OomLadder::TileEstimate(const StageSpec& stage, uint64_t whole, int tile_px) const {
  if (stage.input_pixels == 0) return whole;
  // Working sets scale with the pixels processed at once; a tile also carries its overlap,
  // so count it as (1.5 * side)^2.
  const double tile_pixels = 2.25 * tile_px * tile_px;
  const double fraction = std::min(1.0, tile_pixels / static_cast<double>(stage.input_pixels));
  return std::max<uint64_t>(1, static_cast<uint64_t>(static_cast<double>(whole) * fraction));
}

absl::Status OomLadder::Attempt(const Owner& owner, const StageSpec& stage, StageBody& body,
                                uint64_t working, int tile_px, StageOutcome& out,
                                bool& admitted) {
  const absl::Time start = absl::Now();
  auto lease = residency_->Acquire(owner, stage.model, working,
                                   start + options_.admission_timeout, stage.cancelled);
  out.upload_wait_ms += Ms(absl::Now() - start);
  admitted = lease.ok() || !absl::IsResourceExhausted(lease.status());
  if (!lease.ok()) return lease.status();
  ++out.attempts;
  const ScopeId scope = NextStageScope();
  meter_->ResetPeak(scope);
  absl::Status st;
  const bool injected = faults_ != nullptr && faults_->FailDevice(stage.name, tile_px);
  if (injected) {
    st = DeviceOomError(absl::StrCat("stage '", stage.name, "': injected device OOM"));
  } else {
    st = body.RunDevice(tile_px, scope);
  }
  const uint64_t peak = meter_->Usage(scope).peak_bytes;
  meter_->Forget(scope);
  if (st.ok()) {
    out.peak_bytes = peak;
    // Tiles measure a tile's working set, not the whole input's: learn only from whole runs.
    if (tile_px == 0) residency_->RecordWorkingSetPeak(stage.model, stage.shape_bucket, peak);
  } else if (IsDeviceOom(st) && tile_px == 0 && !injected) {
    // The run needed more than it was admitted with: at least what it reached. An injected
    // fault measured nothing: learning from it would leave the estimate raised for good (the
    // profile keeps maxima) and send later normal jobs of this shape to tiles.
    residency_->RecordWorkingSetPeak(stage.model, stage.shape_bucket, std::max(peak, working * 2));
  }
  return st;  // the lease ends here, whatever happened
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

  // 1. Admission from the estimate.
  bool admitted = true;
  absl::Status st = Attempt(owner, stage, body, estimate, 0, out, admitted);
  if (st.ok()) return finish(StageMode::kDevice, "");
  if (admitted && !IsDeviceOom(st)) return st;
  if (!admitted) {
    out.degradations.push_back(absl::StrCat(stage.name, ": ", st.message()));
  } else {
    // 2. Real OOM: raise the estimate, make all the room there is, retry once.
    estimate = residency_->WorkingSetEstimate(stage.model, stage.shape_bucket, estimate);
    residency_->EvictAllEvictable();
    meter_->ReleaseCache();
    st = Attempt(owner, stage, body, estimate, 0, out, admitted);
    if (st.ok()) return finish(StageMode::kDevice, "evict_retry");
    if (admitted && !IsDeviceOom(st)) return st;
    out.degradations.push_back(absl::StrCat(stage.name, ": out of device memory untiled (",
                                            FormatBytes(estimate), " working set)"));
  }

  // 3. Tiles, halving.
  if (stage.tileable) {
    for (int tile = stage.max_tile_px; tile >= stage.min_tile_px; tile /= 2) {
      st = Attempt(owner, stage, body, TileEstimate(stage, estimate, tile), tile, out, admitted);
      if (st.ok()) {
        out.tile_px = tile;
        out.degradations.push_back(absl::StrCat(stage.name, ": ran in ", tile, "px tiles"));
        return finish(StageMode::kTiled, "tiled");
      }
      if (admitted && !IsDeviceOom(st)) return st;
      // A tile that ran out for real: the next, smaller one gets all the room there is.
      if (admitted) {
        residency_->EvictAllEvictable();
        meter_->ReleaseCache();
      }
    }
  }

  // 4. CPU fallback, outside the device scope.
  ++out.attempts;
  if (faults_ != nullptr && faults_->FailCpu(stage.name)) {
    st = absl::ResourceExhaustedError("injected CPU failure");
  } else {
    st = body.RunCpu();
  }
  if (st.ok()) {
    out.degradations.push_back(absl::StrCat(stage.name, ": ran on the CPU (device memory exhausted)"));
    return finish(StageMode::kCpuFallback, "cpu_fallback");
  }
  if (!absl::IsResourceExhausted(st)) return st;

  // 5. Nothing worked.
  const ResidencySnapshot snap = residency_->Snapshot();
  return absl::ResourceExhaustedError(absl::StrCat(
      "stage '", stage.name, "' (model '", stage.model, "') does not fit: working set ",
      FormatBytes(estimate), " (", estimate, " bytes), device budget ",
      FormatBytes(snap.device.budget_bytes), "; CPU fallback failed: ", st.message()));
}

}  // namespace fusion
