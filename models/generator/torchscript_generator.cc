// TorchScript generator adapter (torchscript_generator.h).
#include "models/generator/torchscript_generator.h"

#include <torch/script.h>

#include <filesystem>

#include "models/common/exception_text.h"
#include "models/generator/script_error.h"
#include "absl/strings/str_cat.h"

namespace fusion::models {

TorchScriptGenerator::TorchScriptGenerator(std::string path, std::unique_ptr<torch::jit::Module> module)
    : path_(std::move(path)), module_(std::move(module)) {}

TorchScriptGenerator::~TorchScriptGenerator() = default;

absl::StatusOr<std::unique_ptr<TorchScriptGenerator>> TorchScriptGenerator::Load(const std::string& path) {
  if (!std::filesystem::exists(path)) {
    return absl::NotFoundError(absl::StrCat("TorchScript generator file not found: ", path));
  }
  try {
    auto module = std::make_unique<torch::jit::Module>(torch::jit::load(path, torch::kCPU));
    if (!module->find_method("forward")) {
      return absl::InvalidArgumentError(absl::StrCat("TorchScript generator ", path, " has no forward()"));
    }
    module->eval();
    return std::unique_ptr<TorchScriptGenerator>(new TorchScriptGenerator(path, std::move(module)));
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("TorchScript generator ", path, " failed to load: ", ExceptionText(e)));
  }
}

absl::Status TorchScriptGenerator::MoveTo(const std::string& device) {
  try {
    module_->to(torch::Device(device));
    return absl::OkStatus();
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("TorchScript generator ", path_, " to ", device, ": ", ExceptionText(e)));
  }
}

absl::StatusOr<at::Tensor> TorchScriptGenerator::Fuse(const GeneratorInputs& in) const {
  if (auto s = ValidateGeneratorInputs(in); !s.ok()) return s;
  at::Tensor out;
  try {
    torch::NoGradGuard no_grad;
    std::vector<torch::jit::IValue> args{in.source, in.source_landmarks, in.target,
                                         in.target_landmarks, in.ratio};
    const torch::jit::IValue result = module_->forward(std::move(args));
    if (!result.isTensor()) {
      return absl::InternalError(absl::StrCat("generator '", name(), "' returned a ",
                                              result.tagKind(), ", not a Tensor"));
    }
    out = result.toTensor();
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("generator '", name(), "' forward failed: ", ScriptErrorText(e)));
  }
  if (auto s = ValidateGeneratorOutput(name(), in, out); !s.ok()) return s;
  return out;
}

}  // namespace fusion::models
