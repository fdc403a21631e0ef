// LiveSessionRegistry: the live sessions open now and what they did, for ListLiveSessions,
// MemoryState.live_sessions and the metrics endpoint (docs/USER-GUIDE.md#seeing-open-sessions).
//
// A session is registered when its stream starts (Open) and removed when its Entry is destroyed,
// which the rpc layer does as the session's leases end, before the stream finishes. Per open
// session: its owner, start, leases (once held), frames received / returned / dropped, and the
// daemon-side total_ms of its last kLatencyWindow returned frames (the percentiles). Since the
// daemon started, over every session ended or open: the frame counts and a histogram of
// total_ms (Totals), which only grow.
// Percentiles are nearest-rank over the window: p of n sorted values is the ceil(p*n)-th.
// Thread-safety: every method may be called from any thread (one mutex); an Entry's methods are
// called by its session's threads, and it must be destroyed before the registry.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "common/mutex.h"
#include "fusion/v1/fusion.pb.h"
#include "memory/residency_types.h"

namespace fusion {

class LiveSessionRegistry {
 public:
  static constexpr size_t kLatencyWindow = 256;
  // Histogram upper bounds of a frame's total_ms, seconds (+Inf implied).
  static constexpr std::array<double, 12> kLatencyBuckets = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                                            0.5,   1,    2.5,   5,    10,  30};

  // Frames of every session since the daemon started, and their latency histogram.
  struct Totals {
    uint64_t received = 0, returned = 0, dropped = 0;
    std::array<uint64_t, kLatencyBuckets.size()> buckets{};  // per bucket, not cumulative
    uint64_t latency_count = 0;                              // = returned
    double latency_sum_seconds = 0;
  };

  // One open session's handle: its updates go to the registry; destroying it removes the
  // session from every listing.
  class Entry {
   public:
    ~Entry();
    Entry(const Entry&) = delete;
    Entry& operator=(const Entry&) = delete;
    // Its leases are held: the device, the models and their device bytes together.
    void Leased(const std::string& device, const std::vector<std::string>& models, uint64_t model_bytes);
    void Received();
    void Dropped();
    // A result went out `total_ms` after its frame was received.
    void Returned(double total_ms);

   private:
    friend class LiveSessionRegistry;
    Entry(LiveSessionRegistry* registry, uint64_t key) : registry_(registry), key_(key) {}
    LiveSessionRegistry* const registry_;
    const uint64_t key_;
  };

  // Registers a session of `owner` (owner.job_id is its session id) started at `started`.
  std::unique_ptr<Entry> Open(const Owner& owner, absl::Time started);

  // The open sessions in the order they started: every uid's (nullopt) or one uid's.
  std::vector<v1::LiveSessionInfo> List(std::optional<uint32_t> uid) const;
  Totals totals() const;

 private:
  struct Session {
    v1::LiveSessionInfo info;          // latency not filled: List computes it from `latency`
    std::vector<double> latency;       // ring of the last kLatencyWindow total_ms
    size_t next = 0;                   // where the next one goes once the ring is full
  };
  void Remove(uint64_t key);
  // Applies `f` to the session under the lock (nothing when it is gone).
  template <typename F>
  void Update(uint64_t key, F f);

  mutable Mutex mu_;
  uint64_t next_key_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<uint64_t, Session> open_ ABSL_GUARDED_BY(mu_);  // by key: the order they started
  Totals totals_ ABSL_GUARDED_BY(mu_);
};

// Nearest-rank percentile `p` in (0,1] of `values` (sorted here); 0 for none.
double NearestRankPercentile(std::vector<double> values, double p);

}  // namespace fusion
