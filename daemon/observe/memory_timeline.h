// MemoryTimeline: a ring buffer of fusiond's memory over time — per model its tier and device /
// host bytes, the device budget, used and reserved bytes, the host tier's used bytes, and the
// eviction and OOM-recovery counters — for plots of a run (bench/plot_timeline.py) and for
// `GET /timeline` on the metrics endpoint (metrics_http.h).
// Invariant: at most `capacity` samples, oldest dropped first; samples are in Record() order.
// Start() samples `snapshot` every `period` on its own thread until Stop() (or destruction);
// a failed snapshot is skipped. Memory: ~100 bytes + ~40 per model per sample (3,600 samples
// of 10 models at 250 ms, 15 minutes: ~1.8 MiB).
// Thread-safety: Record, JsonLines and size may be called from any thread (one mutex).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/mutex.h"
#include "fusion/v1/fusion.pb.h"

namespace fusion {

class MemoryTimeline {
 public:
  struct ModelSample {
    std::string name, tier;  // tier: storage|host|device
    uint64_t device_bytes = 0, host_bytes = 0;
  };
  struct Sample {
    int64_t unix_ms = 0;
    uint64_t device_budget = 0, device_used = 0, device_reserved = 0, host_used = 0;
    uint64_t evictions = 0, oom_recovered = 0;  // counters since start (all ladder steps)
    std::vector<ModelSample> models;  // models not in storage
  };

  explicit MemoryTimeline(size_t capacity = 3600) : capacity_(capacity == 0 ? 1 : capacity) {}
  ~MemoryTimeline();  // Stop()
  MemoryTimeline(const MemoryTimeline&) = delete;
  MemoryTimeline& operator=(const MemoryTimeline&) = delete;

  void Record(const v1::MemoryState& state);
  // Samples with unix_ms > since_unix_ms, oldest first, one JSON object per line:
  // {"unix_ms":..,"device_budget":..,"device_used":..,"device_reserved":..,"host_used":..,
  //  "evictions":..,"oom_recovered":..,"models":{"NAME":{"tier":"device","bytes":..,"host_bytes":..}}}
  std::string JsonLines(int64_t since_unix_ms = 0) const;
  size_t size() const;

  using Snapshot = std::function<absl::StatusOr<v1::MemoryState>()>;
  void Start(absl::Duration period, Snapshot snapshot);
  void Stop();  // idempotent; joins the sampling thread

 private:
  const size_t capacity_;
  mutable Mutex mu_;
  std::vector<Sample> ring_ ABSL_GUARDED_BY(mu_);
  size_t next_ ABSL_GUARDED_BY(mu_) = 0;  // where the next sample goes once the ring is full
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  CondVar stop_cv_;
  std::thread thread_;
};

}  // namespace fusion
