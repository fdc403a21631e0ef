// How a stage body reports a device out-of-memory to the OOM ladder: a RESOURCE_EXHAUSTED
// status carrying a payload, so it cannot be confused with an admission refusal.
// The LibTorch side turns c10::OutOfMemoryError, std::bad_alloc and an interpreter
// std::runtime_error after an allocator refusal (IsDeviceOom(exception), cpu_device_memory.h)
// into DeviceOomError(). Thread-safety: pure functions.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/strings/cord.h"

namespace fusion {

inline constexpr char kDeviceOomPayload[] = "type.fusiond/device-oom";

inline absl::Status DeviceOomError(const std::string& message) {
  absl::Status st = absl::ResourceExhaustedError(message);
  st.SetPayload(kDeviceOomPayload, absl::Cord("1"));
  return st;
}

inline bool IsDeviceOom(const absl::Status& status) {
  return status.GetPayload(kDeviceOomPayload).has_value();
}

}  // namespace fusion
