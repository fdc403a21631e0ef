// Contract checks shared by every FusionGenerator (see generator.h).
#include "models/generator/generator.h"

#include <sstream>

#include "absl/strings/str_cat.h"

namespace fusion::models {
namespace {

std::string Describe(const at::Tensor& t) {
  if (!t.defined()) return "undefined";
  std::ostringstream s;
  s << t.sizes() << " " << t.dtype() << " on " << t.device();
  return s.str();
}

absl::Status CheckCrop(const char* what, const at::Tensor& t) {
  if (!t.defined() || t.dim() != 4 || t.size(0) != 1 || t.size(1) != 3 || t.size(2) != t.size(3) ||
      t.size(2) < kMinCropSize || t.scalar_type() != at::kFloat) {
    return absl::InvalidArgumentError(absl::StrCat("generator input '", what,
                                                   "' must be [1,3,S,S] float32 with S >= ",
                                                   kMinCropSize, ", got ", Describe(t)));
  }
  return absl::OkStatus();
}

absl::Status CheckLandmarks(const char* what, const at::Tensor& t) {
  if (!t.defined() || t.dim() != 3 || t.size(0) != 1 || t.size(1) != kNumLandmarks ||
      t.size(2) != 2 || t.scalar_type() != at::kFloat) {
    return absl::InvalidArgumentError(absl::StrCat("generator input '", what,
                                                   "' must be [1,68,2] float32, got ", Describe(t)));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateGeneratorInputs(const GeneratorInputs& in) {
  if (auto s = CheckCrop("source", in.source); !s.ok()) return s;
  if (auto s = CheckCrop("target", in.target); !s.ok()) return s;
  if (auto s = CheckLandmarks("source_landmarks", in.source_landmarks); !s.ok()) return s;
  if (auto s = CheckLandmarks("target_landmarks", in.target_landmarks); !s.ok()) return s;
  if (in.source.sizes() != in.target.sizes() || in.source.device() != in.target.device()) {
    return absl::InvalidArgumentError(absl::StrCat("generator inputs 'source' ", Describe(in.source),
                                                   " and 'target' ", Describe(in.target),
                                                   " must have one shape and device"));
  }
  if (!(in.ratio >= 0.0 && in.ratio <= 1.0)) {
    return absl::InvalidArgumentError(absl::StrCat("generator ratio must be in [0,1], got ", in.ratio));
  }
  return absl::OkStatus();
}

absl::Status ValidateGeneratorOutput(std::string_view generator, const GeneratorInputs& in,
                                     const at::Tensor& out) {
  if (!out.defined() || out.sizes() != in.target.sizes() || out.scalar_type() != at::kFloat ||
      out.device() != in.target.device()) {
    return absl::InternalError(absl::StrCat("generator '", std::string(generator), "' returned ", Describe(out),
                                            ", contract is ", Describe(in.target)));
  }
  return absl::OkStatus();
}

}  // namespace fusion::models
