// MakeCudaDeviceMeter: compiled only with a CUDA LibTorch (FUSION_WITH_CUDA: scripts/build-cuda.sh,
// built in CI); run on a GPU only by scripts/gpu-check so far. See device_meter.h.
#include "device/device_meter.h"
#include "models/common/torch_compat.h"

namespace fusion {
namespace {

namespace tc = torch_compat;

class CudaDeviceMeter final : public DeviceMeter {
 public:
  explicit CudaDeviceMeter(int device) : device_(device) {}
  void ResetPeak(ScopeId) override { tc::CudaResetPeak(device_); }
  ScopeUsage Usage(ScopeId) const override {
    const tc::CudaStats s = tc::CudaAllocatorStats(device_);
    return {s.allocated_bytes, s.peak_allocated_bytes};
  }
  void Forget(ScopeId) override {}
  void ReleaseCache() override { tc::CudaEmptyCache(); }
  uint64_t AllocatedBytes() const override { return tc::CudaAllocatorStats(device_).allocated_bytes; }
  uint64_t ReservedBytes() const override { return tc::CudaAllocatorStats(device_).reserved_bytes; }

 private:
  const int device_;
};

}  // namespace

std::unique_ptr<DeviceMeter> MakeCudaDeviceMeter(int device_index) {
  return std::make_unique<CudaDeviceMeter>(device_index);
}

}  // namespace fusion
