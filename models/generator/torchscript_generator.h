// A learned fusion generator saved as TorchScript (torch::jit::save), used in place of the
// classical one when the model catalogue registers it. The module must provide
//   forward(source, source_landmarks, target, target_landmarks, ratio: float) -> Tensor
// with the tensor contract of generator.h; every output is checked against that contract.
// Thread-safety: Fuse() is const; TorchScript forward on one module may run concurrently
// (the module is never mutated after load).
#pragma once

#include <memory>
#include <string>

#include "models/generator/generator.h"

namespace torch::jit {
struct Module;
}

namespace fusion::models {

class TorchScriptGenerator final : public FusionGenerator {
 public:
  // Loads `path` onto the CPU (STORAGE->HOST); MoveTo() then places it on a device.
  // Errors: NotFound for a missing file; InvalidArgument for a file that is not TorchScript or
  // has no forward method (the message names the file and the LibTorch error).
  static absl::StatusOr<std::unique_ptr<TorchScriptGenerator>> Load(const std::string& path);
  ~TorchScriptGenerator() override;

  // Errors: Internal naming the device when the copy fails. Not thread-safe with Fuse().
  absl::Status MoveTo(const std::string& device) override;

  absl::StatusOr<at::Tensor> Fuse(const GeneratorInputs& in) const override;
  std::string name() const override { return "torchscript:" + path_; }

 private:
  TorchScriptGenerator(std::string path, std::unique_ptr<torch::jit::Module> module);
  std::string path_;
  std::unique_ptr<torch::jit::Module> module_;
};

}  // namespace fusion::models
