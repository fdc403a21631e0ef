// FaultInjector: makes chosen ladder attempts of chosen stages fail with a device OOM, to test
// every step of the OOM ladder (docs/ARCHITECTURE.md#invariants, 5) without a real shortage.
//
// Modes per stage:
//   fail_first_device   the first device attempt fails (-> evict + retry succeeds)
//   fail_untiled        every untiled device attempt fails (-> tiled, for tileable stages)
//   fail_device         every device attempt, tiled too (-> CPU fallback)
//   fail_all            every attempt, CPU included (-> RESOURCE_EXHAUSTED)
//   hang                every attempt blocks for an hour without a checkpoint (a stuck device
//                       call: the service watchdog's test; only SIGKILL ends it)
// Spec text: "stage=mode[,stage=mode...]", e.g. "detect=fail_first_device,enhance=fail_untiled".
// fusiond honours the FUSIOND_FAULTS environment variable only when built with
// FUSION_FAULT_INJECTION (test builds); production builds ignore it.
// Thread-safety: all methods may be called concurrently.
#pragma once

#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "common/mutex.h"

namespace fusion {

enum class FaultMode { kNone, kFailFirstDevice, kFailUntiled, kFailDevice, kFailAll, kHang };

class FaultInjector {
 public:
  // INVALID_ARGUMENT naming the bad entry.
  static absl::StatusOr<FaultInjector> Parse(const std::string& spec);
  // From FUSIOND_FAULTS when built with FUSION_FAULT_INJECTION, else an empty injector.
  static absl::StatusOr<FaultInjector> FromEnvironment();

  FaultInjector() = default;
  FaultInjector(const FaultInjector& other);
  FaultInjector& operator=(const FaultInjector& other);

  void Set(const std::string& stage, FaultMode mode);
  // True when this device attempt of `stage` must fail (`tile_px` 0 = untiled). Counts it.
  bool FailDevice(const std::string& stage, int tile_px);
  // True when the CPU attempt of `stage` must fail.
  bool FailCpu(const std::string& stage) const;
  // True when every attempt of `stage` must hang (kHang).
  bool Hangs(const std::string& stage) const;

 private:
  mutable Mutex mu_;
  absl::flat_hash_map<std::string, FaultMode> modes_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, int> device_attempts_ ABSL_GUARDED_BY(mu_);
};

}  // namespace fusion
