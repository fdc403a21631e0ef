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

// Reads and parses `path`. UNAVAILABLE if it cannot be read.
absl::StatusOr<HostMemoryInfo> ReadHostMemory(const std::string& path = "/proc/meminfo");

}  // namespace fusion
