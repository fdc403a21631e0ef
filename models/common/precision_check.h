// Reduced-precision output checks: a network's output at fp16 (CUDA autocast) or bf16 (CPU
// autocast) against its fp32 output on the same device, within a per-model tolerance stated in
// the model's header (kFp16Tolerance / kBf16Tolerance) or the manifest
// (reduced_precision_tolerance, ESRGAN). Used by tests/gpu/reduced_precision_test.cc.
//
// Values are flat float arrays in the network's output units (whatever Forward() returns,
// converted to float32); the caller flattens tensors. No LibTorch here.
// Errors: INVALID_ARGUMENT when the two arrays differ in length, are empty, or the fp32
// reference holds a NaN/Inf (nothing to compare against); OUT_OF_RANGE when the reduced output
// holds a NaN/Inf (fp16 overflows above 65504) or differs by more than the tolerance - the
// message names the model, the precision, the largest difference, where it is and the bound.
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <span>
#include "absl/strings/string_view.h"

#include "absl/status/status.h"

namespace fusion::models {

struct OutputDifference {
  double max_abs = 0;       // largest |reduced - reference| over the finite pairs
  std::size_t at = 0;       // flat index of that element
  double reference_at = 0;  // the fp32 value there
  std::size_t non_finite = 0;  // reduced elements that are NaN or +-Inf
  std::size_t count = 0;
};

OutputDifference CompareOutputs(std::span<const float> reference, std::span<const float> reduced);

// OK when `reduced` is finite and within `tolerance` (max abs difference) of `reference`.
absl::Status CheckReducedPrecision(absl::string_view model, absl::string_view precision,
                                   std::span<const float> reference, std::span<const float> reduced,
                                   double tolerance);

}  // namespace fusion::models
