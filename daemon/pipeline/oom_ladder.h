// OomLadder: runs one pipeline stage under a residency lease and degrades, instead of
// crashing, when device memory runs out (docs/ARCHITECTURE.md#invariants, 5):
//   1. admission from the working-set estimate (per model and input-shape bucket);
//   2. on a real device OOM: raise the estimate to the measured peak, evict everything
//      evictable, retry once (an admission that can never fit skips to 3);
//   3. tileable stages: tiles of max_tile_px with overlap, halving down to min_tile_px; a tile
//      size that outgrew its estimate is retried once with the raised one (as in step 2)
//      before halving; tile peaks are learnt per tile size;
//   4. CPU fallback on the HOST tier: whole, then (tileable stages) the same halving tiles;
//      each attempt is admitted first with a host lease (ResidencyManager::AcquireHost) of its
//      estimated working set plus the model's bytes, and runs in a host scope of the
//      allocator limited to those bytes, so it never allocates what the host budget did not
//      admit (an attempt past them gets a real OOM and the next tile);
//   5. RESOURCE_EXHAUSTED naming the stage, the model, the tier(s) and the bytes.
// Every device attempt's scope is limited to the bytes its lease admitted: a stage runs out
// only of its own admission, whatever other jobs hold, so it takes the same path and gives the
// same bytes alone or beside others (docs/ARCHITECTURE.md#invariants, 4). Admission itself
// waits for
// other leases when the stage could fit once they end ("could fit" vs "can never fit",
// ResidencyManager::Acquire). An attempt refused by the shared device budget while within its
// own admission (someone else's memory: an upload's temporaries, a charge above its estimate)
// is contention too: it is retried at the same size until the admission deadline, not degraded.
// Invariant: when Run() returns, whatever the outcome, the stage holds no lease and its
// reservation is returned (leases are RAII; one attempt holds at most one).
// The stage body does the work in each mode; this class only decides. Errors other than an
// OOM or an admission refusal (bad input, cancellation, DEADLINE_EXCEEDED waiting for memory)
// end the ladder at once and pass through.
// Thread-safety: Run() may be called concurrently for different stages.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "device/device_meter.h"
#include "memory/residency_manager.h"
#include "pipeline/fault_injection.h"

namespace fusion {

enum class StageMode { kDevice, kTiled, kCpuFallback, kHost };
// "device" | "tiled" | "cpu_fallback" | "host" (the fusionctl --json names).
const char* ToString(StageMode mode);

struct StageSpec {
  std::string name;               // detect | landmarks | encode | generate | enhance | blend
  std::string model;              // catalogue name, registered with the ResidencyManager
  bool tileable = false;
  uint64_t working_bytes = 0;     // prior working-set estimate for the whole input, bytes
  std::string shape_bucket;       // e.g. "1280x960": estimates are kept per (model, bucket)
  uint64_t input_pixels = 0;      // of the whole input; tile estimates scale by area
  int max_tile_px = 256;
  int min_tile_px = 64;
  // Context pixels a tile reads on each side (an ESRGAN's receptive field): a tile's estimate
  // counts (tile + 2 * halo)^2 pixels, at least (1.5 * tile)^2.
  int tile_halo_px = 0;
  // Polled while an attempt waits for device memory (ResidencyManager::Acquire): the job's
  // cancellation, so a cancelled job does not sit out the admission timeout. Empty = never.
  std::function<bool()> cancelled;
  // Told, before an attempt whose admission will have to wait for other jobs' memory, what it
  // waits for ("waiting for device memory: model 'm' needs 30.5 MiB, 2.0 MiB free, ..."), and
  // "" once admitted. Empty = not told.
  std::function<void(const std::string& note)> waiting;
};

// What the stage does in each mode (implemented by the pipeline with LibTorch).
class StageBody {
 public:
  virtual ~StageBody() = default;
  // Runs on the device with every allocation charged to `scope` (enter a DeviceScope);
  // tile_px 0 = in one piece. Returns DeviceOomError() on a device OOM.
  virtual absl::Status RunDevice(int tile_px, ScopeId scope) = 0;
  // Runs off the device from the host copy of the model, every allocation charged to the host
  // scope `scope` (limited to the bytes its host lease admitted); tile_px as RunDevice. Returns
  // DeviceOomError() when the allocator refused (the scope ran past its admission).
  virtual absl::Status RunCpu(int tile_px, ScopeId scope) = 0;
};

struct StageOutcome {
  StageMode mode = StageMode::kDevice;
  uint32_t attempts = 0;           // device + CPU attempts made
  int tile_px = 0;                 // when kTiled, or kCpuFallback run in tiles
  double ms = 0;                   // wall time of the whole ladder
  double upload_wait_ms = 0;       // time spent in admission (incl. model uploads)
  uint64_t peak_bytes = 0;         // measured peak of the successful attempt (device or host)
  std::string recovered_by;        // "", "evict_retry", "tiled", "cpu_fallback"
  // Device attempts refused by the shared device budget while within their own admission
  // (other jobs' memory) and retried at the same size: contention, not a degradation.
  uint32_t contention_retries = 0;
  std::vector<std::string> degradations;  // human-readable, for the job result
};

class OomLadder {
 public:
  struct Options {
    absl::Duration admission_timeout = absl::Seconds(60);  // wait for leases to end
    // Pause between retries of an attempt refused for want of memory other jobs hold.
    absl::Duration contention_backoff = absl::Milliseconds(50);
  };
  // All pointers must outlive the ladder; `faults` may be null.
  OomLadder(ResidencyManager* residency, DeviceMeter* meter, FaultInjector* faults,
            Options options)
      : residency_(residency), meter_(meter), faults_(faults), options_(options) {}

  absl::StatusOr<StageOutcome> Run(const Owner& owner, const StageSpec& stage, StageBody& body);
  absl::Duration admission_timeout() const { return options_.admission_timeout; }

 private:
  // One device attempt under a fresh lease of `working` bytes. Sets `admitted` false when the
  // admission itself was refused with RESOURCE_EXHAUSTED, and `outgrew` true when the run (not
  // an injected fault) was refused at its own admission: the estimate was too small, and it has
  // been raised (RecordWorkingSetPeak under `bucket`) to at least twice what was admitted.
  absl::Status Attempt(const Owner& owner, const StageSpec& stage, StageBody& body,
                       uint64_t working, int tile_px, StageOutcome& out, bool& admitted,
                       bool& outgrew);
  // The note for stage.waiting when admitting `working` bytes must wait now, else "".
  // "the model and its working set need X of the Y device budget": why a stage did not fit.
  std::string NeedNote(const StageSpec& stage, uint64_t working) const;
  std::string WaitNote(const StageSpec& stage, uint64_t working) const;
  // The estimate bucket of `tile_px` (0 = the whole input's).
  static std::string TileBucket(const StageSpec& stage, int tile_px);
  // A tile's estimate: `whole` scaled by the pixels a tile sees, or the tile's measured peak
  // when larger (tiles that do not scale with area, e.g. detection's stem windows).
  uint64_t TileEstimate(const StageSpec& stage, uint64_t whole, int tile_px) const;
  // Step 4: the CPU fallback on the host tier, whole then tiled. OK with `out` filled, an error
  // that ends the ladder, or RESOURCE_EXHAUSTED (nothing fitted) describing the host side.
  absl::Status CpuFallback(const Owner& owner, const StageSpec& stage, StageBody& body,
                           uint64_t estimate, absl::Time deadline, StageOutcome& out);
  // One host attempt under a host lease of `bytes`; `admitted` as Attempt.
  absl::Status CpuAttempt(const Owner& owner, const StageSpec& stage, StageBody& body,
                          uint64_t bytes, int tile_px, absl::Time deadline, StageOutcome& out,
                          bool& admitted);

  ResidencyManager* residency_;
  DeviceMeter* meter_;
  FaultInjector* faults_;
  const Options options_;
};

}  // namespace fusion
