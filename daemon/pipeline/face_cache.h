// FaceCache: the analysis of a job's source (or reference) image, kept across jobs so that a
// user swapping one source into many targets pays its detection, landmarks and descriptor once
// (else every job repeats 2 SSD passes, a landmark and a recogniser forward on the same image).
//
// An entry is what the pipeline keeps of such an image after those stages: its largest upright
// face (box, 68 landmarks, 128-d descriptor) and the turned faces the detector saw (for the
// job's degradations). The key is the SHA-256 of the image's encoded bytes plus everything else
// the analysis depends on (the caller's `settings`: the detector, landmark and encoder models,
// the device, the detection settings), so a hit gives the bytes a fresh analysis would give.
// The caller inserts only analyses whose stages ran in the normal mode (on the device copy,
// untiled): a tiled or CPU-fallback analysis may differ in the last float bits.
//
// Memory (docs/ARCHITECTURE.md#invariants, 1): the entries' bytes (EntryBytes: the entry, its
// key and list/map node
// overhead) never exceed Options::capacity_bytes; least recently used entries are evicted to
// make room. The entries are charged to the host tier in slabs of Options::slab_bytes: a slab
// is one ResidencyManager::AcquireHost lease, taken (without waiting) before the entry that
// needs it is stored and returned when evictions leave it unused. When the host tier refuses a
// slab, older entries are evicted until the new one fits the slabs held; if it still does not
// fit, it is not stored (counted in Stats::refused). Clear() returns every slab.
// Invariant: bytes <= charged_bytes <= capacity rounded up to a slab, at every instant.
// Thread-safety: all methods may be called concurrently (one mutex; AcquireHost is called under
// it with an immediate deadline, so it never waits).
#pragma once

#include <cstdint>
#include <list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "common/mutex.h"
#include "memory/residency_manager.h"
#include "pipeline/stages.h"

namespace fusion {

// One image's analysis (see above).
struct FaceAnalysis {
  DetectedFace face;                // landmarks and descriptor set (described)
  std::vector<TurnedFace> turned;   // in the detector's order
};

class FaceCache {
 public:
  struct Options {
    uint64_t capacity_bytes = 1ull << 20;  // entries' bytes at most (~850 images at ~1.2 KB)
    uint64_t slab_bytes = 64ull << 10;     // host-tier charge granularity
  };
  struct Stats {
    uint64_t hits = 0, misses = 0;   // Lookup calls
    uint64_t insertions = 0;         // entries stored
    uint64_t evictions = 0;          // entries dropped for room
    uint64_t refused = 0;            // Insert calls that stored nothing (no room on the host tier)
    uint64_t entries = 0;
    uint64_t bytes = 0;              // EntryBytes of the entries
    uint64_t charged_bytes = 0;      // host-tier bytes held (whole slabs)
  };

  // `residency` (may be null: nothing is charged, for tools) must outlive the cache.
  FaceCache(ResidencyManager* residency, Options options);
  ~FaceCache();
  FaceCache(const FaceCache&) = delete;
  FaceCache& operator=(const FaceCache&) = delete;

  // The key of an image's analysis: SHA-256 of `image_bytes` (32 raw bytes) and `settings`.
  static std::string Key(std::string_view image_bytes, std::string_view settings);
  // Bytes an entry of `key` and `analysis` counts against the capacity.
  static uint64_t EntryBytes(const std::string& key, const FaceAnalysis& analysis);

  // The analysis stored under `key` (and it becomes the most recently used), or nullopt.
  std::optional<FaceAnalysis> Lookup(const std::string& key);
  // Stores (or replaces) `analysis` under `key`, evicting least recently used entries for room.
  // An entry larger than the whole capacity is not stored (refused).
  void Insert(const std::string& key, FaceAnalysis analysis);
  void Clear();
  Stats stats() const;

 private:
  struct Entry {
    std::string key;
    FaceAnalysis analysis;
    uint64_t bytes = 0;
  };
  using List = std::list<Entry>;  // most recently used first

  void EvictLast() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Takes slabs until `bytes` fit them; false when the host tier refused one.
  bool ChargeFor(uint64_t bytes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Returns slabs the entries no longer need.
  void ReleaseUnused() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  ResidencyManager* const residency_;
  const Options options_;
  mutable Mutex mu_;
  List lru_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, List::iterator> index_ ABSL_GUARDED_BY(mu_);
  std::vector<Lease> slabs_ ABSL_GUARDED_BY(mu_);
  Stats stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace fusion
