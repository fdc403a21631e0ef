// Value types of the residency manager: model states, owners, counters and snapshots.
//
// Model state machine (docs/ARCHITECTURE.md#state-machines). Every model starts ABSENT (weights
// only in STORAGE):
//
//        Load/Acquire                 upload                  first lease
//   ABSENT ---------> LOADING ---> HOST ---------> UPLOADING ---> DEVICE <-----> IN_USE
//     ^ ^                |          ^ ^               |             |   last lease
//     | |   load failed  |          | |  upload failed|             | victim chosen
//     | +----------------+          | +---------------+             v
//     +--- host budget / Unload ----+ <-- device copy released --- EVICTING
//     ^                                                               |
//     +------ device copy released, host copy already dropped --------+

// HOST: weights in RAM (host tier). DEVICE: resident on the device tier, no lease.
// IN_USE: DEVICE with at least one lease. A pinned model stays DEVICE/IN_USE.
// The host copy is tracked apart from the state: HOST and UPLOADING always have one, ABSENT and
// LOADING never, DEVICE/IN_USE/EVICTING may have lost it to the host budget; such a model is
// evicted straight to ABSENT (EVICTING -> ABSENT) and its next upload loads it again.
// Thread-safety: plain value types.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"

namespace fusion {

enum class ModelState { kAbsent, kLoading, kHost, kUploading, kDevice, kInUse, kEvicting };
enum class Tier { kStorage, kHost, kDevice };

// "ABSENT", "LOADING", "HOST", "UPLOADING", "DEVICE", "IN_USE", "EVICTING".
const char* ToString(ModelState state);
// "storage", "host", "device".
const char* ToString(Tier tier);
// The tier holding the model's most useful copy in `state`.
Tier TierOf(ModelState state);

// Who holds a lease: the job and the uid that submitted it.
struct Owner {
  std::string job_id;
  uint32_t uid = 0;
};
// Owner::job_id of the leases a daemon cache holds between jobs (the source-face cache's host
// slabs), not any job's: GetMemoryState reports them as a tier's cache_bytes, not as a client's.
inline constexpr char kCacheOwnerJob[] = "face-cache";

// Counters, per model and in total. Monotonic.
struct ResidencyCounters {
  uint64_t loads = 0;           // STORAGE -> HOST
  uint64_t uploads = 0;         // HOST -> DEVICE
  uint64_t evictions = 0;       // DEVICE -> HOST
  uint64_t expirations = 0;     // of evictions, those whose keep-alive ran out
  uint64_t hits = 0;            // Acquire found the model on the device
  uint64_t misses = 0;          // Acquire had to upload it
  uint64_t bytes_uploaded = 0;  // sum of measured device bytes of each upload
  uint64_t waits = 0;           // Acquire/Pin calls that had to wait for leases to end
  uint64_t refusals = 0;        // RESOURCE_EXHAUSTED, DEADLINE_EXCEEDED, FAILED_PRECONDITION
};

struct ModelSnapshot {
  std::string name;
  ModelState state = ModelState::kAbsent;
  uint64_t bytes = 0;  // measured device bytes once uploaded, else the catalogue's estimate
  // Bytes of the host copy (weights in RAM, charged to the host tier), 0 when there is none: in
  // ABSENT/LOADING, and in DEVICE/IN_USE/EVICTING once the host budget dropped it (the device
  // copy stays; the next upload re-reads storage). The sum over models is host.used_bytes.
  uint64_t host_bytes = 0;
  bool measured = false;
  bool pinned = false;
  bool one_shot = false;
  uint32_t leases = 0;
  int64_t last_use_unix_ms = 0;  // 0 = never used
  ResidencyCounters counters;
  // The model's keep-alive; nullopt = forever (a pinned model's, whatever is configured).
  std::optional<absl::Duration> keep_alive;
  // Time left before the keep-alive evicts it; set only while the countdown runs (resident,
  // unleased, unpinned, finite keep-alive), zero when due.
  std::optional<absl::Duration> expires_in;
  // The working set the model's most recent device Acquire asked for (0 = none yet): what its
  // next stage most likely asks (the OOM ladder's learned estimate, or the tile it fell back
  // to; a request too large for the budget stays here, so that stage is expected refused).
  // The planner's forecast reads it (QueueFutureReferences::ModelInfo).
  uint64_t last_working_bytes = 0;
};

struct LeaseSnapshot {
  Owner owner;
  std::string model;
  uint64_t working_bytes = 0;
};

struct TierUsage {
  uint64_t budget_bytes = 0;    // what the tier may hold now (0 for host = unbounded)
  uint64_t used_bytes = 0;      // device: resident model bytes (includes models being evicted);
                                // host: bytes of the host copies
  uint64_t reserved_bytes = 0;  // device: working sets of leases + uploads in flight;
                                // host: host working sets (AcquireHost)
  uint64_t peak_bytes = 0;      // high-water mark of used + reserved
  // device: pinned + leased bytes exceed the budget; host: the host copies exceed it (only while
  // a copy in transit needs the room, e.g. the upload of a model larger than the host budget).
  bool over_budget = false;
};

struct ResidencySnapshot {
  TierUsage device;
  TierUsage host;
  std::vector<ModelSnapshot> models;  // sorted by name
  std::vector<LeaseSnapshot> leases;       // device leases
  std::vector<LeaseSnapshot> host_leases;  // host working sets (AcquireHost); model = what
  ResidencyCounters totals;
  // Stages the OOM ladder recovered, by the step that did it: "evict_retry", "tiled",
  // "cpu_fallback" (RecordOomRecovery). Monotonic.
  std::map<std::string, uint64_t> oom_recovered;
};

}  // namespace fusion
