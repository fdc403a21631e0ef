// Probes the CUDA runtime (cudart, linked when the CUDA toolkit is found at build time) and the
// NVIDIA driver's NVML (loaded with dlopen at run time: the toolkit ships no NVML library to
// link against, and linking the driver would stop the daemon starting on a machine without one).
//
// Never fails and never hangs: on a machine with no GPU or no driver, cudart answers
// cudaErrorInsufficientDriver in microseconds and NVML's dlopen fails; both are reported as
// "no device" with the reason. Thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace fusion {

struct CudaDeviceMemory {
  int index = 0;
  uint64_t free_bytes = 0;   // cudaMemGetInfo
  uint64_t total_bytes = 0;
};

struct CudaProbe {
  bool built_with_cudart = false;  // the CUDA toolkit was found at build time
  int runtime_version = 0;         // e.g. 13000; 0 if unknown
  int device_count = 0;            // 0 when any call failed
  std::string runtime_error;       // why device_count is 0, empty if it is not
  std::vector<CudaDeviceMemory> devices;

  bool driver_loadable = false;    // libcuda.so.1 (the NVIDIA driver's CUDA library) opens
  std::string driver_error;        // dlopen's text when it does not

  bool nvml_loaded = false;        // libnvidia-ml.so.1 opened and initialised
  int nvml_device_count = 0;
  std::string nvml_error;          // dlopen/nvmlInit failure text, empty when loaded
};

// Runs the probe (cudart first, then NVML). Costs well under 10 ms without a driver.
CudaProbe ProbeCuda();

// Free/total of one device through cudaMemGetInfo. Returns false with `error` set when the
// runtime or device is unavailable.
bool QueryCudaMemory(int index, CudaDeviceMemory& out, std::string& error);

}  // namespace fusion
