// The CUDA device tier measured against the driver (label gpu; CUDA LibTorch builds only):
// the CUDA DeviceMeter's allocated/reserved bytes against cudaMemGetInfo within 2%, emptyCache
// after a release returning the memory to the driver, and a side-stream upload from pinned
// memory arriving intact. Each test skips when no CUDA device is visible.
#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>

#include "device/device_meter.h"
#include "no_cuda_reason.h"

namespace fusion {
namespace {

constexpr int64_t kGiB = int64_t{1} << 30;

int64_t DriverFreeBytes() {
  size_t free = 0, total = 0;
  EXPECT_EQ(cudaMemGetInfo(&free, &total), cudaSuccess);
  return static_cast<int64_t>(free);
}

class CudaMemoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const std::string why = fusion::testing::NoCudaReason(); !why.empty()) GTEST_SKIP() << why;
    meter_ = MakeCudaDeviceMeter(0);
    at::empty({1}, at::TensorOptions().device(at::kCUDA, 0));  // the context, outside the figures
    c10::cuda::device_synchronize();
    meter_->ReleaseCache();
  }
  std::unique_ptr<DeviceMeter> meter_;
};

TEST_F(CudaMemoryTest, MeterCountsAnAllocationWithinTwoPercentOfTheDriver) {
  const int64_t allocated0 = meter_->AllocatedBytes(), reserved0 = meter_->ReservedBytes();
  const int64_t free0 = DriverFreeBytes();
  at::Tensor t = at::empty({kGiB / 4}, at::TensorOptions().dtype(at::kFloat).device(at::kCUDA, 0));
  c10::cuda::device_synchronize();
  const int64_t allocated = meter_->AllocatedBytes() - allocated0;
  const int64_t reserved = meter_->ReservedBytes() - reserved0;
  const int64_t driver = free0 - DriverFreeBytes();
  EXPECT_GE(allocated, kGiB);
  EXPECT_LE(allocated, kGiB + kGiB / 50);
  EXPECT_NEAR(static_cast<double>(reserved), static_cast<double>(driver), 0.02 * static_cast<double>(driver))
      << "allocator reserved " << reserved << " bytes, the driver lost " << driver;
}

TEST_F(CudaMemoryTest, EmptyCacheAfterReleaseReturnsTheMemoryToTheDriver) {
  const int64_t free0 = DriverFreeBytes();
  {
    at::Tensor t = at::empty({kGiB / 4}, at::TensorOptions().dtype(at::kFloat).device(at::kCUDA, 0));
    c10::cuda::device_synchronize();
  }
  // Freed tensors stay in the caching allocator: the driver still counts them as used.
  EXPECT_LT(DriverFreeBytes(), free0 - kGiB + kGiB / 50);
  meter_->ReleaseCache();
  EXPECT_NEAR(static_cast<double>(DriverFreeBytes()), static_cast<double>(free0), 0.02 * static_cast<double>(kGiB));
  EXPECT_LT(meter_->ReservedBytes(), kGiB / 2) << "the released GiB is still cached";
}

TEST_F(CudaMemoryTest, SideStreamUploadFromPinnedMemoryArrivesIntact) {
  const at::Tensor host = at::rand({64, 1024, 1024}).pin_memory();
  ASSERT_TRUE(host.is_pinned());
  const c10::cuda::CUDAStream side = c10::cuda::getStreamFromPool(/*isHighPriority=*/false, 0);
  at::Tensor dev;
  {
    const c10::cuda::CUDAStreamGuard on_side(side);
    dev = host.to(at::Device(at::kCUDA, 0), /*non_blocking=*/true);
  }
  side.synchronize();
  EXPECT_TRUE(at::equal(dev.cpu(), host));
  EXPECT_NE(side.stream(), c10::cuda::getDefaultCUDAStream(0).stream());
}

}  // namespace
}  // namespace fusion
