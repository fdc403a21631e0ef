// Reduced precision for the enhance networks (manifest: default_precision on the CPU device,
// cuda_precision on CUDA; models/catalogue/catalogue.h).
//   bf16: on a CPU with native bf16 (onednn::Bf16Native()), the model's oneDNN fast path
//         compiled in bf16 (KerasModel::bf16(); no autocast). Where the model has no fast path
//         (FUSION_ONEDNN=0, a layer without a oneDNN form), CPU autocast on the at:: path
//         (LibTorch 1.13 has no fp16 convolution on the CPU). A CPU without native bf16 runs
//         fp32 (ModelStore).
//   fp16: CUDA autocast, compiled only with a CUDA LibTorch (FUSION_WITH_CUDA).
// A reduced precision is used only where its output stays within the manifest's stated
// tolerance of fp32: ReducedPrecisionError() runs a fixed probe at both precisions on the copy's
// device (for a bf16 fast path: through it and through an fp32 build of the same weights), and
// ModelStore keeps fp32 for a copy whose error exceeds it (once per model and device).
// Thread-safety: PrecisionScope changes this thread's autocast state only; the functions are
// stateless. No LibTorch headers here.
#pragma once

#include <string>

#include "absl/status/statusor.h"

namespace fusion {
namespace keras {
class KerasModel;
}

// Autocast for `precision` on `device` while the scope lives (this thread), restoring the
// previous state. Needed(): whether `precision` needs autocast on `device` (false for fp32);
// INVALID_ARGUMENT for a precision the device cannot run.
class PrecisionScope {
 public:
  static absl::StatusOr<bool> Needed(const std::string& precision, const std::string& device);
  PrecisionScope(bool on, const std::string& device);
  ~PrecisionScope();
  PrecisionScope(const PrecisionScope&) = delete;
  PrecisionScope& operator=(const PrecisionScope&) = delete;

 private:
  const bool on_, cpu_;
  bool was_ = false;
  int dtype_ = 0;  // the previous CPU autocast dtype (c10::ScalarType)
};

// The probe: a fixed 32x32 RGB pattern (smooth gradients and sharp edges, 0..255), through `m`
// on `device` at fp32 and at `precision`. Returns the max abs output difference in the model's
// output units (0..255 for ESRGAN). INVALID_ARGUMENT for an unsupported precision; the model's
// errors (INTERNAL, or a device OOM) pass through.
absl::StatusOr<double> ReducedPrecisionError(const keras::KerasModel& m, const std::string& precision,
                                             const std::string& device);
// The same probe through `reduced` (a model whose own Forward is reduced: a bf16 fast path) and
// `fp32` (an fp32 build of the same weights), on the CPU, no autocast. Errors: either model's.
absl::StatusOr<double> ReducedPrecisionError(const keras::KerasModel& reduced, const keras::KerasModel& fp32);

}  // namespace fusion
