// torch_compat.h: the shim over the LibTorch APIs that differ between Debian's LibTorch 1.13 (CPU,
// the .deb's build) and the CUDA LibTorch 2.x of PyPI's torch wheel (scripts/build-cuda.sh pins
// 2.12.1; what every GPU owner builds against). Both are built and tested in CI. Its autocast half
// is torch_autocast.h; models/ and daemon/ include these two, never each other's copies.
//
//   c10::Allocator      2.3 made allocate() non-const and added the pure virtual copy_data():
//                       FUSION_C10_ALLOCATE_CONST is `const` on 1.13/2.0-2.2 and empty after,
//                       FUSION_C10_COPY_DATA declares copy_data where it exists.
//   CUDA allocator      the caching allocator's StatType moved namespaces twice (CUDACachingAllocator
//   stats (CUDA only)   -> c10::CachingDeviceAllocator -> c10::CachingAllocator); the aggregate
//                       row is index 0 in every version, so CudaAllocatorStats() reads it by index.
//   autocast            2.4 deprecated the ..._cpu_... / is_enabled calls: torch_autocast.h
//                       (ATen's autocast header stays out of here).
//   NoGradGuard         2.x's ATen/ATen.h no longer declares at::NoGradGuard: c10::NoGradGuard
//                       (c10/core/GradMode.h) is the same class in both.
//   streams             c10::cuda::getStreamFromPool(bool, DeviceIndex) and device_synchronize()
//                       are the same in 1.13 and 2.x: no shim needed (model_store.cc).
//
// Only <torch/version.h> (a page of #defines) and c10 headers: cheap in c10-only TUs.
// Thread-safety: stateless.
#pragma once

#include <cstdint>
#include <torch/version.h>

#define FUSION_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) || (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

#if FUSION_TORCH_AT_LEAST(2, 3)
#define FUSION_C10_ALLOCATE_CONST
#define FUSION_C10_COPY_DATA                                                  \
  void copy_data(void* dest, const void* src, std::size_t count) const override { \
    default_copy_data(dest, src, count);                                       \
  }
#else
#define FUSION_C10_ALLOCATE_CONST const
#define FUSION_C10_COPY_DATA
#endif

#ifdef FUSION_WITH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>

namespace fusion::torch_compat {

struct CudaStats {
  uint64_t allocated_bytes = 0;       // held by live tensors now
  uint64_t peak_allocated_bytes = 0;  // since the last resetPeakStats
  uint64_t reserved_bytes = 0;        // taken from the driver (>= allocated)
};

// The caching allocator's aggregate stats for `device` (index 0 = StatType::AGGREGATE).
inline CudaStats CudaAllocatorStats(int device) {
  const auto s = c10::cuda::CUDACachingAllocator::getDeviceStats(static_cast<c10::DeviceIndex>(device));
  return {static_cast<uint64_t>(s.allocated_bytes[0].current), static_cast<uint64_t>(s.allocated_bytes[0].peak),
          static_cast<uint64_t>(s.reserved_bytes[0].current)};
}

inline void CudaResetPeak(int device) {
  c10::cuda::CUDACachingAllocator::resetPeakStats(static_cast<c10::DeviceIndex>(device));
}

// Returns the allocator's unused cached blocks to the driver.
inline void CudaEmptyCache() { c10::cuda::CUDACachingAllocator::emptyCache(); }

}  // namespace fusion::torch_compat
#endif  // FUSION_WITH_CUDA
