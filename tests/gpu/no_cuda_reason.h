// NoCudaReason(): why the gpu-labelled tests cannot run here, or "" when cuda:0 is usable. Each
// such test skips with this text, so a log from a machine without a GPU says what is missing (no
// driver, no device, a LibTorch whose CUDA hooks are not loaded) rather than passing silently.
#pragma once

#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <ATen/Context.h>
#include <string>

namespace fusion::testing {

inline std::string NoCudaReason() {
  if (void* driver = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL); driver == nullptr) {
    const char* err = dlerror();
    return std::string("no NVIDIA driver on this machine (") + (err ? err : "libcuda.so.1") + ")";
  } else {
    dlclose(driver);
  }
  int n = 0;
  if (const cudaError_t rc = cudaGetDeviceCount(&n); rc != cudaSuccess) {
    return std::string("no usable CUDA device (cudaGetDeviceCount: ") + cudaGetErrorString(rc) + ")";
  }
  if (n == 0) return "no CUDA device";
  if (!at::globalContext().hasCUDA()) return "LibTorch reports no CUDA (libtorch_cuda not loaded?)";
  return "";
}

}  // namespace fusion::testing
