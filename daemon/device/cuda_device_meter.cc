// MakeCudaDeviceMeter: compiled only with a CUDA LibTorch (FUSION_WITH_CUDA). Never built on
// the CPU-only machine this was written on; see device_meter.h.
#include <c10/cuda/CUDACachingAllocator.h>

#include "device/device_meter.h"

namespace fusion {
namespace {

namespace cca = c10::cuda::CUDACachingAllocator;
constexpr size_t kAggregate = static_cast<size_t>(cca::StatType::AGGREGATE);

class CudaDeviceMeter final : public DeviceMeter {
 public:
  explicit CudaDeviceMeter(int device) : device_(device) {}
  void ResetPeak(ScopeId) override { cca::resetPeakStats(device_); }
  ScopeUsage Usage(ScopeId) const override {
    const cca::DeviceStats s = cca::getDeviceStats(device_);
    return {static_cast<uint64_t>(s.allocated_bytes[kAggregate].current),
            static_cast<uint64_t>(s.allocated_bytes[kAggregate].peak)};
  }
  void Forget(ScopeId) override {}
  void ReleaseCache() override { cca::emptyCache(); }
  uint64_t AllocatedBytes() const override {
    return static_cast<uint64_t>(cca::getDeviceStats(device_).allocated_bytes[kAggregate].current);
  }
  uint64_t ReservedBytes() const override {
    return static_cast<uint64_t>(cca::getDeviceStats(device_).reserved_bytes[kAggregate].current);
  }

 private:
  const int device_;
};

}  // namespace

std::unique_ptr<DeviceMeter> MakeCudaDeviceMeter(int device_index) {
  return std::make_unique<CudaDeviceMeter>(device_index);
}

}  // namespace fusion
