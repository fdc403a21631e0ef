// LiveSessionRegistry: the live sessions open now and what they did, for ListLiveSessions,
// MemoryState.live_sessions and the metrics endpoint (docs/USER-GUIDE.md#seeing-open-sessions).
//
// A session is registered when its stream starts (Open) and removed when its Entry is destroyed,
// which the rpc layer does as the session's leases end, before the stream finishes. Per open
// session: its owner, start, leases (once held), frames received / returned / dropped, and the
// daemon-side total_ms of its last kLatencyWindow returned frames (the percentiles). Each frame
// event also goes to the registry's FrameHook (the daemon's metrics count them since start,
// ended sessions included); the hook runs on the caller's thread without the registry's lock.
// Percentiles are nearest-rank over the window: p of n sorted values is the ceil(p*n)-th.
// Thread-safety: every method may be called from any thread (one mutex); an Entry's methods are
// called by its session's threads, and it must be destroyed before the registry.
#pragma once

#include <cstdint>
#include <functional>
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

  enum class FrameEvent { kReceived, kDropped, kReturned };
  // Called for every frame event of every session; total_ms is a returned frame's (else 0).
  using FrameHook = std::function<void(FrameEvent event, double total_ms)>;

  explicit LiveSessionRegistry(FrameHook on_frame = nullptr) : on_frame_(std::move(on_frame)) {}

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
  void Notify(FrameEvent event, double total_ms) const {
    if (on_frame_) on_frame_(event, total_ms);
  }

  const FrameHook on_frame_;
  mutable Mutex mu_;
  uint64_t next_key_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<uint64_t, Session> open_ ABSL_GUARDED_BY(mu_);  // by key: the order they started
};

// Nearest-rank percentile `p` in (0,1] of `values` (sorted here); 0 for none.
double NearestRankPercentile(std::vector<double> values, double p);

}  // namespace fusion
