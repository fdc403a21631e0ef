// OomLadder: runs one pipeline stage under a residency lease and degrades, instead of
// crashing, when device memory runs out (DESIGN.md §4):
//   1. admission from the working-set estimate (per model and input-shape bucket);
//   2. on a real device OOM: raise the estimate to the measured peak, evict everything
//      evictable, retry once (an admission that can never fit skips to 3);
//   3. tileable stages: tiles of max_tile_px with overlap, halving down to min_tile_px;
//   4. CPU fallback: the stage runs outside the device scope, from the host copy;
//   5. RESOURCE_EXHAUSTED naming the stage, the model and the bytes.
// Invariant: when Run() returns, whatever the outcome, the stage holds no lease and its
// reservation is returned (leases are RAII; one attempt holds at most one).
// The stage body does the work in each mode; this class only decides. Errors other than a
// device OOM or an admission refusal (bad input, cancellation, DEADLINE_EXCEEDED waiting for
// memory) end the ladder at once and pass through.
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
  // Polled while an attempt waits for device memory (ResidencyManager::Acquire): the job's
  // cancellation, so a cancelled job does not sit out the admission timeout. Empty = never.
  std::function<bool()> cancelled;
};

// What the stage does in each mode (implemented by the pipeline with LibTorch).
class StageBody {
 public:
  virtual ~StageBody() = default;
  // Runs on the device with every allocation charged to `scope` (enter a DeviceScope);
  // tile_px 0 = in one piece. Returns DeviceOomError() on a device OOM.
  virtual absl::Status RunDevice(int tile_px, ScopeId scope) = 0;
  // Runs outside the device scope from the host copy of the model.
  virtual absl::Status RunCpu() = 0;
};

struct StageOutcome {
  StageMode mode = StageMode::kDevice;
  uint32_t attempts = 0;           // device + CPU attempts made
  int tile_px = 0;                 // when kTiled
  double ms = 0;                   // wall time of the whole ladder
  double upload_wait_ms = 0;       // time spent in admission (incl. model uploads)
  uint64_t peak_bytes = 0;         // measured peak of the successful device attempt
  std::string recovered_by;        // "", "evict_retry", "tiled", "cpu_fallback"
  std::vector<std::string> degradations;  // human-readable, for the job result
};

class OomLadder {
 public:
  struct Options {
    absl::Duration admission_timeout = absl::Seconds(60);  // wait for leases to end
  };
  // All pointers must outlive the ladder; `faults` may be null.
  OomLadder(ResidencyManager* residency, DeviceMeter* meter, FaultInjector* faults,
            Options options)
      : residency_(residency), meter_(meter), faults_(faults), options_(options) {}

  absl::StatusOr<StageOutcome> Run(const Owner& owner, const StageSpec& stage, StageBody& body);

 private:
  // One device attempt under a fresh lease of `working` bytes. Sets `admitted` false when the
  // admission itself was refused with RESOURCE_EXHAUSTED.
  absl::Status Attempt(const Owner& owner, const StageSpec& stage, StageBody& body,
                       uint64_t working, int tile_px, StageOutcome& out, bool& admitted);
  uint64_t TileEstimate(const StageSpec& stage, uint64_t whole, int tile_px) const;

  ResidencyManager* residency_;
  DeviceMeter* meter_;
  FaultInjector* faults_;
  const Options options_;
};

}  // namespace fusion
