// Host RAM figures from the kernel (/proc/meminfo). Thread-safe (pure functions).
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace fusion {

struct HostMemoryInfo {
  uint64_t total_bytes = 0;      // MemTotal
  uint64_t available_bytes = 0;  // MemAvailable: what can be allocated without swapping
};

// Parses /proc/meminfo text (values in kB = KiB). INVALID_ARGUMENT if MemTotal or
// MemAvailable is missing or malformed.
absl::StatusOr<HostMemoryInfo> ParseMeminfo(absl::string_view text);

// The host tier's budget when --host-memory-limit is not given: half of MemTotal (12 GiB on a
// 24 GiB machine; an 80-megapixel job's images, ~2 GiB with an x2 upscale, fit it many times),
// leaving the rest to the device tier on `cpu` and to other programs. fusiond passes MemTotal
// capped by its cgroup's memory limit (cgroup_memory.h).
inline uint64_t DefaultHostMemoryLimit(const HostMemoryInfo& info) { return info.total_bytes / 2; }

// Reads and parses `path`. UNAVAILABLE if it cannot be read.
absl::StatusOr<HostMemoryInfo> ReadHostMemory(const std::string& path = "/proc/meminfo");

}  // namespace fusion
