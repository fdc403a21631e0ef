// Reduced-precision output checks (precision_check.h).
#include "models/common/precision_check.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace fusion::models {

OutputDifference CompareOutputs(std::span<const float> reference, std::span<const float> reduced) {
  OutputDifference d;
  d.count = std::min(reference.size(), reduced.size());
  for (std::size_t i = 0; i < d.count; ++i) {
    if (!std::isfinite(reduced[i])) {
      ++d.non_finite;
      continue;
    }
    const double diff = std::abs(static_cast<double>(reduced[i]) - static_cast<double>(reference[i]));
    if (diff > d.max_abs) {
      d.max_abs = diff;
      d.at = i;
      d.reference_at = reference[i];
    }
  }
  return d;
}

absl::Status CheckReducedPrecision(absl::string_view model, absl::string_view precision,
                                   std::span<const float> reference, std::span<const float> reduced,
                                   double tolerance) {
  if (reference.size() != reduced.size() || reference.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(model, ": ", precision, " output has ", reduced.size(),
                                                   " values, fp32 ", reference.size()));
  }
  for (std::size_t i = 0; i < reference.size(); ++i) {
    if (!std::isfinite(reference[i])) {
      return absl::InvalidArgumentError(absl::StrCat(model, ": the fp32 output is not finite at ", i));
    }
  }
  const OutputDifference d = CompareOutputs(reference, reduced);
  if (d.non_finite > 0) {
    return absl::OutOfRangeError(absl::StrCat(model, ": ", d.non_finite, " of ", d.count, " ", precision,
                                              " output values are NaN or Inf (overflow)"));
  }
  if (d.max_abs > tolerance) {
    return absl::OutOfRangeError(absl::StrFormat(
        "%s: %s output differs from fp32 by up to %.6g (at %d, fp32 %.6g), above the tolerance %.6g", model,
        precision, d.max_abs, d.at, d.reference_at, tolerance));
  }
  return absl::OkStatus();
}

}  // namespace fusion::models
