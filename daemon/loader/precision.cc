// Reduced-precision autocast and its probe (precision.h).
#include "loader/precision.h"

#include <ATen/ATen.h>

#include "models/common/torch_autocast.h"
#include "models/common/exception_text.h"
#include "absl/strings/str_cat.h"
#include "models/keras/keras_model.h"
#include "base/status_macros.h"

namespace fusion {
namespace {
using torch_compat::CpuAutocast;
using torch_compat::CpuAutocastDtype;
using torch_compat::CudaAutocast;
using torch_compat::SetCpuAutocast;
using torch_compat::SetCpuAutocastDtype;
using torch_compat::SetCudaAutocast;
}  // namespace

absl::StatusOr<bool> PrecisionScope::Needed(const std::string& precision, const std::string& device) {
  const bool cpu = device == "cpu";
  if (precision == "fp32") return false;
  if (precision == "bf16" && cpu) return true;
#ifdef FUSION_WITH_CUDA
  if (precision == "fp16" && !cpu) return true;
#endif
  return absl::InvalidArgumentError(absl::StrCat("precision '", precision, "' cannot run on ", device,
                                                 " (bf16: CPU autocast; fp16: CUDA builds only)"));
}

PrecisionScope::PrecisionScope(bool on, const std::string& device) : on_(on), cpu_(device == "cpu") {
  if (!on_) return;
  if (cpu_) {
    was_ = CpuAutocast();
    dtype_ = static_cast<int>(CpuAutocastDtype());
    SetCpuAutocast(true);
    SetCpuAutocastDtype(at::kBFloat16);
  } else {
    was_ = CudaAutocast();
    SetCudaAutocast(true);  // CUDA autocast: fp16
  }
}

PrecisionScope::~PrecisionScope() {
  if (!on_) return;
  if (cpu_) {
    SetCpuAutocast(was_);
    SetCpuAutocastDtype(static_cast<at::ScalarType>(dtype_));
  } else {
    SetCudaAutocast(was_);
  }
  at::autocast::clear_cache();
}

namespace {
// Channel c at (y, x): a diagonal gradient plus a sinusoid, with a hard-edged square: the
// probe exercises both flat regions and the edges where reduced precision errs most.
at::Tensor Probe() {
  const at::Tensor y = at::arange(32, at::kFloat).view({1, 1, 32, 1});
  const at::Tensor x = at::arange(32, at::kFloat).view({1, 1, 1, 32});
  const at::Tensor c = at::arange(3, at::kFloat).view({1, 3, 1, 1});
  at::Tensor probe = 127.5 + 80.0 * at::sin(0.35 * x + 0.21 * y + 2.0 * c) + 1.5 * (x - y);
  return at::where((x > 8) * (x < 20) * (y > 10) * (y < 24), 255.0 - probe, probe).clamp(0, 255);
}
}  // namespace

absl::StatusOr<double> ReducedPrecisionError(const keras::KerasModel& reduced, const keras::KerasModel& fp32) {
  const at::Tensor probe = Probe();
  try {
    ASSIGN_OR_RETURN(auto full, fp32.Forward(probe));
    ASSIGN_OR_RETURN(auto low, reduced.Forward(probe));
    return (low.to(at::kFloat) - full).abs().max().item<double>();
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat(reduced.origin(), ": precision probe (bf16 fast path): ", ExceptionText(e)));
  }
}

absl::StatusOr<double> ReducedPrecisionError(const keras::KerasModel& m, const std::string& precision,
                                             const std::string& device) {
  ASSIGN_OR_RETURN(auto needed, PrecisionScope::Needed(precision, device));
  if (!needed) return 0.0;
  at::Tensor probe = Probe();
  if (device != "cpu") probe = probe.to(at::Device(device));
  try {
    ASSIGN_OR_RETURN(auto full, m.Forward(probe));
    absl::StatusOr<at::Tensor> reduced;
    {
      PrecisionScope scope(true, device);
      reduced = m.Forward(probe);
    }
    if (!reduced.ok()) return reduced.status();
    return (reduced->to(at::kFloat) - full).abs().max().item<double>();
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat(m.origin(), ": precision probe (", precision, "): ", ExceptionText(e)));
  }
}

}  // namespace fusion
