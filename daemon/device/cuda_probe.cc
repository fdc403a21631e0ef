#include "device/cuda_probe.h"

#include <dlfcn.h>

#include "absl/strings/str_cat.h"

#ifdef FUSION_HAVE_CUDART
#include <cuda_runtime_api.h>
#endif

namespace fusion {
namespace {

// The few NVML entry points used, declared by hand: the toolkit has no nvml.h. ABI from the
// NVML API reference (nvmlReturn_t is an int enum; 0 = NVML_SUCCESS).
using NvmlInit = int (*)();
using NvmlShutdown = int (*)();
using NvmlGetCount = int (*)(unsigned int*);
using NvmlErrorString = const char* (*)(int);

// dlopen(name) with its own symbols kept local; on failure nullptr and `error` set to dlerror's text.
void* OpenLibrary(const char* name, std::string& error) {
  void* lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* err = dlerror();
    error = err != nullptr ? err : absl::StrCat("dlopen(", name, ") failed");
  }
  return lib;
}

void ProbeNvml(CudaProbe& probe) {
  void* lib = OpenLibrary("libnvidia-ml.so.1", probe.nvml_error);
  if (lib == nullptr) return;
  auto init = reinterpret_cast<NvmlInit>(dlsym(lib, "nvmlInit_v2"));
  auto shutdown = reinterpret_cast<NvmlShutdown>(dlsym(lib, "nvmlShutdown"));
  auto count = reinterpret_cast<NvmlGetCount>(dlsym(lib, "nvmlDeviceGetCount_v2"));
  auto error_string = reinterpret_cast<NvmlErrorString>(dlsym(lib, "nvmlErrorString"));
  if (init == nullptr || shutdown == nullptr || count == nullptr) {
    probe.nvml_error = "libnvidia-ml.so.1 lacks nvmlInit_v2/nvmlDeviceGetCount_v2";
  } else if (int rc = init(); rc != 0) {
    probe.nvml_error = absl::StrCat("nvmlInit_v2: ", error_string ? error_string(rc) : "error ",
                                    rc);
  } else {
    unsigned int n = 0;
    if (count(&n) == 0) {
      probe.nvml_loaded = true;
      probe.nvml_device_count = static_cast<int>(n);
    } else {
      probe.nvml_error = "nvmlDeviceGetCount_v2 failed";
    }
    shutdown();
  }
  dlclose(lib);
}

// Whether the driver's libcuda.so.1 can be loaded at all: without it cudart says only "CUDA driver
// version is insufficient", which reads as an old driver rather than none.
void ProbeDriver(CudaProbe& probe) {
  if (void* lib = OpenLibrary("libcuda.so.1", probe.driver_error); lib != nullptr) {
    probe.driver_loadable = true;
    dlclose(lib);
  }
}

}  // namespace

bool QueryCudaMemory(int index, CudaDeviceMemory& out, std::string& error) {
#ifdef FUSION_HAVE_CUDART
  int previous = 0;
  if (cudaError_t rc = cudaGetDevice(&previous); rc != cudaSuccess) {
    error = absl::StrCat("cudaGetDevice: ", cudaGetErrorString(rc));
    return false;
  }
  if (cudaError_t rc = cudaSetDevice(index); rc != cudaSuccess) {
    error = absl::StrCat("cudaSetDevice(", index, "): ", cudaGetErrorString(rc));
    return false;
  }
  size_t free_bytes = 0, total_bytes = 0;
  cudaError_t rc = cudaMemGetInfo(&free_bytes, &total_bytes);
  cudaSetDevice(previous);
  if (rc != cudaSuccess) {
    error = absl::StrCat("cudaMemGetInfo: ", cudaGetErrorString(rc));
    return false;
  }
  out = {index, free_bytes, total_bytes};
  return true;
#else
  error = "fusiond was built without the CUDA toolkit";
  return false;
#endif
}

CudaProbe ProbeCuda() {
  CudaProbe probe;
#ifdef FUSION_HAVE_CUDART
  probe.built_with_cudart = true;
  cudaRuntimeGetVersion(&probe.runtime_version);
  int count = 0;
  if (cudaError_t rc = cudaGetDeviceCount(&count); rc != cudaSuccess) {
    probe.runtime_error = absl::StrCat("cudaGetDeviceCount: ", cudaGetErrorString(rc), " (",
                                       static_cast<int>(rc), ")");
  } else {
    probe.device_count = count;
    for (int i = 0; i < count; ++i) {
      CudaDeviceMemory mem;
      std::string error;
      if (QueryCudaMemory(i, mem, error)) probe.devices.push_back(mem);
    }
    if (count == 0) probe.runtime_error = "no CUDA device";
  }
#else
  probe.runtime_error = "fusiond was built without the CUDA toolkit";
#endif
  ProbeDriver(probe);
  ProbeNvml(probe);
  return probe;
}

}  // namespace fusion
