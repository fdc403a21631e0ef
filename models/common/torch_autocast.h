// torch_autocast.h: the autocast half of the LibTorch 1.13 / 2.x shim (torch_compat.h is the c10
// half, kept apart so that c10-only TUs do not parse ATen's autocast header).
//
// LibTorch 2.4 deprecated at::autocast::is_enabled/set_enabled and the ..._cpu_... calls (runtime
// warnings) for per-device-type ones; these wrappers pick whichever the LibTorch being compiled
// against has. Used by daemon/pipeline/precision.cc and models/faceapi/ops.cc.
// Thread-safety: autocast state is thread-local; each call reads or changes this thread's only.
#pragma once

#include <ATen/autocast_mode.h>

#include "models/common/torch_compat.h"

namespace fusion::torch_compat {

#if FUSION_TORCH_AT_LEAST(2, 4)
inline bool CpuAutocast() { return at::autocast::is_autocast_enabled(at::kCPU); }
inline void SetCpuAutocast(bool on) { at::autocast::set_autocast_enabled(at::kCPU, on); }
inline at::ScalarType CpuAutocastDtype() { return at::autocast::get_autocast_dtype(at::kCPU); }
inline void SetCpuAutocastDtype(at::ScalarType t) { at::autocast::set_autocast_dtype(at::kCPU, t); }
inline bool CudaAutocast() { return at::autocast::is_autocast_enabled(at::kCUDA); }
inline void SetCudaAutocast(bool on) { at::autocast::set_autocast_enabled(at::kCUDA, on); }
#else
inline bool CpuAutocast() { return at::autocast::is_cpu_enabled(); }
inline void SetCpuAutocast(bool on) { at::autocast::set_cpu_enabled(on); }
inline at::ScalarType CpuAutocastDtype() { return at::autocast::get_autocast_cpu_dtype(); }
inline void SetCpuAutocastDtype(at::ScalarType t) { at::autocast::set_autocast_cpu_dtype(t); }
inline bool CudaAutocast() { return at::autocast::is_enabled(); }
inline void SetCudaAutocast(bool on) { at::autocast::set_enabled(on); }
#endif

}  // namespace fusion::torch_compat
