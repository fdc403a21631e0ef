// Plain value types of the fusiond SDK (no gRPC or protobuf types). Byte counts are bytes,
// times are Unix milliseconds. They mirror fusion.v1 messages in proto/fusion/v1/fusion.proto.
// Thread-safety: plain values.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace fusion {

// One memory tier of the daemon ("device" or "host").
struct TierState {
  std::string tier;             // "device" | "host"
  std::string kind;             // device: "cpu" | "cuda:N"; host: "host"
  uint64_t capacity_bytes = 0;  // physical size
  uint64_t available_bytes = 0; // free now
  uint64_t budget_bytes = 0;    // min(limit, free + fusiond's usage - reserve)
  uint64_t limit_bytes = 0;     // configured limit, 0 = none
  uint64_t used_bytes = 0;      // resident model bytes
  uint64_t reserved_bytes = 0;  // working sets reserved by running stages
  uint64_t peak_bytes = 0;      // high-water mark of used + reserved
  uint64_t external_bytes = 0;  // used by other processes
  bool over_budget = false;     // pinned + leased bytes exceed the budget
};

// A catalogue model and its residency.
struct ModelState {
  std::string name, stage, state, tier;
  uint64_t bytes = 0;
  bool pinned = false;
  uint32_t leases = 0;
  int64_t last_use_unix_ms = 0;
  uint64_t loads = 0, uploads = 0, evictions = 0, hits = 0, misses = 0;
  bool one_shot = false, tileable = false;
};

// What one client uid has in the daemon now.
struct ClientUsage {
  uint32_t uid = 0;
  uint32_t jobs_queued = 0;
  uint32_t jobs_running = 0;
  uint64_t working_bytes = 0;
};

struct MemoryCounters {
  uint64_t bytes_uploaded = 0, loads = 0, uploads = 0, evictions = 0, hits = 0, misses = 0,
           waits = 0, refusals = 0;
  std::map<std::string, uint64_t> oom_recovered;  // by ladder step
};

struct MemoryState {
  TierState device;
  TierState host;
  std::vector<ModelState> models;
  std::vector<ClientUsage> clients;
  MemoryCounters counters;
  int64_t unix_ms = 0;
};

enum class ServingStatus { kUnknown, kServing, kNotServing, kServiceUnknown };

const char* ToString(ServingStatus status);

}  // namespace fusion
