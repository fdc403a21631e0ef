// Metrics: fusiond's state in the Prometheus text exposition format (version 0.0.4), for the
// optional /metrics endpoint (metrics_http.h).
//
// Gauges and counters come from a MemoryState snapshot at scrape time (the same numbers as
// `fusionctl mem`); the job counts and the stage histogram from job events (JobManager's
// on_event): the StageFinished report's ms and mode, and the Done event's final state.
//   fusiond_device_budget_bytes, fusiond_device_used_bytes, fusiond_device_reserved_bytes,
//   fusiond_host_budget_bytes, fusiond_host_used_bytes          gauges, bytes
//   fusiond_model_resident_bytes{model,tier}                    gauge, bytes (tier device|host)
//   fusiond_bytes_uploaded_total                                counter, bytes
//   fusiond_evictions_total{model}, fusiond_uploads_total{model} counters
//   fusiond_oom_recovered_total{step}                           counter (evict_retry|tiled|cpu_fallback|failed)
//   fusiond_jobs_total{state}                                   counter (SUCCEEDED|FAILED|CANCELLED), since start
//   fusiond_queue_depth{uid}, fusiond_jobs_running{uid}         gauges
//   fusiond_stage_seconds{stage,mode}                           histogram, seconds
// Live sessions: the open ones from the snapshot's live_sessions (every uid's); the frames and
// their latency since start from frame events (OnLiveFrame*, the live session registry's hook):
//   fusiond_live_sessions{uid}, fusiond_live_leased_bytes{uid}  gauges (sessions; their models' device bytes)
//   fusiond_live_frames_received_total, fusiond_live_frames_returned_total,
//   fusiond_live_frames_dropped_total                           counters, frames
//   fusiond_live_frame_seconds                                  histogram, seconds (received -> result sent)
// Thread-safety: all methods may be called concurrently (one mutex).
#pragma once

#include <array>
#include <map>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "common/mutex.h"
#include "fusion/v1/fusion.pb.h"

namespace fusion {

class Metrics {
 public:
  // Histogram upper bounds, seconds (+Inf implied): a landmark pass to a 80 MP detection.
  static constexpr std::array<double, 13> kStageBuckets = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                                          1,     2.5,  5,     10,   30,  120};

  // Counts what `event` reports (a finished stage, a finished job); others are ignored.
  void OnJobEvent(const v1::JobEvent& event);
  // Histogram upper bounds of a live frame's latency (received -> result sent), seconds.
  static constexpr std::array<double, 12> kLiveBuckets = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                                         0.5,   1,    2.5,   5,    10,  30};

  // Counts a live frame received, dropped (a newer one came while it waited), or returned
  // `total_ms` after it was received.
  void OnLiveFrameReceived();
  void OnLiveFrameDropped();
  void OnLiveFrameReturned(double total_ms);
  // The exposition text of `state` and the counts so far.
  std::string Exposition(const v1::MemoryState& state) const;

 private:
  struct Histogram {
    std::array<uint64_t, kStageBuckets.size()> buckets{};  // cumulative at render time
    uint64_t count = 0;
    double sum = 0;
  };
  struct LiveFrames {
    uint64_t received = 0, dropped = 0;
    std::array<uint64_t, kLiveBuckets.size()> buckets{};  // per bucket, cumulative at render time
    uint64_t returned = 0;
    double sum_seconds = 0;
  };
  mutable Mutex mu_;
  LiveFrames live_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, uint64_t> jobs_ ABSL_GUARDED_BY(mu_);                              // by final state
  std::map<std::pair<std::string, std::string>, Histogram> stages_ ABSL_GUARDED_BY(mu_);  // (stage, mode)
};

}  // namespace fusion
