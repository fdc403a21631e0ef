// TorchScript enhancer adapter (torchscript_enhancer.h).
#include "models/generator/torchscript_enhancer.h"

#include <torch/script.h>

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "models/common/exception_text.h"
#include "models/generator/script_error.h"

namespace fusion::models {

TorchScriptEnhancer::TorchScriptEnhancer(std::string path, std::unique_ptr<torch::jit::Module> module, int scale)
    : path_(std::move(path)), module_(std::move(module)), scale_(scale) {}

TorchScriptEnhancer::~TorchScriptEnhancer() = default;

absl::StatusOr<std::unique_ptr<TorchScriptEnhancer>> TorchScriptEnhancer::Load(const std::string& path) {
  if (!std::filesystem::exists(path)) {
    return absl::NotFoundError(absl::StrCat("TorchScript enhancer file not found: ", path));
  }
  try {
    auto module = std::make_unique<torch::jit::Module>(torch::jit::load(path, torch::kCPU));
    if (!module->find_method("forward")) {
      return absl::InvalidArgumentError(absl::StrCat("TorchScript enhancer ", path, " has no forward()"));
    }
    const int64_t scale = module->hasattr("scale") && module->attr("scale").isInt() ? module->attr("scale").toInt() : 0;
    if (scale != 2 && scale != 4) {
      return absl::InvalidArgumentError(
          absl::StrCat("TorchScript enhancer ", path, " needs an int attribute 'scale' of 2 or 4"));
    }
    module->eval();
    return std::unique_ptr<TorchScriptEnhancer>(new TorchScriptEnhancer(path, std::move(module), static_cast<int>(scale)));
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("TorchScript enhancer ", path, " failed to load: ", ExceptionText(e)));
  }
}

absl::Status TorchScriptEnhancer::MoveTo(const std::string& device) {
  try {
    module_->to(torch::Device(device));
    return absl::OkStatus();
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("TorchScript enhancer ", path_, " to ", device, ": ", ExceptionText(e)));
  }
}

absl::StatusOr<at::Tensor> TorchScriptEnhancer::Forward(const at::Tensor& x) const {
  if (x.dim() != 4 || x.size(0) != 1 || x.size(1) != 3 || x.scalar_type() != at::kFloat) {
    return absl::InvalidArgumentError(
        absl::StrCat("enhancer '", name(), "': input must be [1,3,H,W] float32, got ", x.toString()));
  }
  at::Tensor out;
  try {
    torch::NoGradGuard no_grad;
    const torch::jit::IValue result = module_->forward({x});
    if (!result.isTensor()) {
      return absl::InternalError(absl::StrCat("enhancer '", name(), "' returned a ", result.tagKind(), ", not a Tensor"));
    }
    out = result.toTensor();
  } catch (const std::exception& e) {
    // An allocator refusal inside is recognised by the stage's edge (pipeline/execution.cc).
    return absl::InternalError(absl::StrCat("enhancer '", name(), "' forward failed: ", ScriptErrorText(e)));
  }
  if (out.dim() != 4 || out.size(0) != 1 || out.size(1) != 3 || out.size(2) != x.size(2) * scale_ ||
      out.size(3) != x.size(3) * scale_ || !at::isFloatingType(out.scalar_type())) {
    return absl::InternalError(absl::StrCat("enhancer '", name(), "': output must be [1,3,", x.size(2) * scale_, ",",
                                            x.size(3) * scale_, "] floating point"));
  }
  return out;
}

}  // namespace fusion::models
