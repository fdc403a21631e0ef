#include "device/device.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "device/cuda_probe.h"
#include "device/cgroup_memory.h"
#include "base/status_macros.h"

namespace fusion {
namespace {

class CpuDevice final : public Device {
 public:
  std::string Kind() const override { return "cpu"; }
  absl::StatusOr<DeviceMemory> QueryMemory() const override {
    ASSIGN_OR_RETURN(auto host, ReadProcessHostMemory());
    return DeviceMemory{host.total_bytes, host.available_bytes};
  }
};

class CudaDevice final : public Device {
 public:
  explicit CudaDevice(int index) : index_(index) {}
  std::string Kind() const override { return absl::StrCat("cuda:", index_); }
  absl::StatusOr<DeviceMemory> QueryMemory() const override {
    CudaDeviceMemory mem;
    std::string error;
    if (!QueryCudaMemory(index_, mem, error)) {
      return absl::UnavailableError(absl::StrCat(Kind(), ": ", error));
    }
    return DeviceMemory{mem.total_bytes, mem.free_bytes};
  }

 private:
  const int index_;
};

// The reason, for a person: no driver, a driver that sees no device, or no device of that index.
std::string WhyNoCudaDevice(const CudaProbe& probe) {
  if (!probe.built_with_cudart) return probe.runtime_error;
  if (!probe.driver_loadable) {
    return absl::StrCat("no NVIDIA driver on this machine (", probe.driver_error, ")");
  }
  if (probe.device_count == 0) {
    return absl::StrCat("the NVIDIA driver reports no usable CUDA device (", probe.runtime_error, ")");
  }
  return absl::StrCat("no such device: this machine has ", probe.device_count, " CUDA device",
                      probe.device_count == 1 ? " (cuda:0)" : absl::StrCat("s (cuda:0 to cuda:", probe.device_count - 1, ")"));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Device>> OpenDevice(const std::string& spec) {
  if (spec == "cpu") return std::unique_ptr<Device>(new CpuDevice());
  int index = -1;
  const std::string digits = absl::StartsWith(spec, "cuda:") ? spec.substr(5) : "";
  if (digits.empty() || !std::all_of(digits.begin(), digits.end(), absl::ascii_isdigit) ||
      !absl::SimpleAtoi(digits, &index)) {
    return absl::InvalidArgumentError(absl::StrCat("device '", spec, "' is not cpu or cuda:N"));
  }
  CudaProbe probe = ProbeCuda();
  if (index >= probe.device_count) {
    return absl::FailedPreconditionError(
        absl::StrCat("device ", spec, " is not available: ", WhyNoCudaDevice(probe)));
  }
  return std::unique_ptr<Device>(new CudaDevice(index));
}

uint64_t EffectiveBudget(uint64_t limit, uint64_t available, uint64_t own_usage,
                         uint64_t reserve) {
  const uint64_t reachable = available + own_usage;
  const uint64_t after_reserve = reachable > reserve ? reachable - reserve : 0;
  return limit == 0 ? after_reserve : std::min(limit, after_reserve);
}

}  // namespace fusion
