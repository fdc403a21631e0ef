// A super-resolution (enhance) model saved as TorchScript (torch::jit::save), registered in the
// model catalogue with format "torchscript" and stage "enhance"; a job picks it by name
// (JobOptions.enhance_model). The module must provide
//   forward(x: Tensor) -> Tensor   x [1,3,H,W] float32 RGB, range 0..255, NCHW
//                                  -> [1,3,s*H,s*W] float (any float dtype), range 0..255
// and an int attribute `scale` (s, 2 or 4). Every output is checked against that shape. Not
// tileable: the pipeline runs it on whole crops or frames (the OOM ladder falls back to the CPU).
// Thread-safety: Forward() is const and may run concurrently (the module is never mutated after
// load); MoveTo() is not thread-safe with Forward().
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace torch::jit {
struct Module;
}

namespace fusion::models {

class TorchScriptEnhancer final {
 public:
  // Loads `path` onto the CPU. Errors: NotFound for a missing file; InvalidArgument for a file
  // that is not TorchScript, has no forward() or no int `scale` of 2 or 4 (naming the file).
  static absl::StatusOr<std::unique_ptr<TorchScriptEnhancer>> Load(const std::string& path);
  ~TorchScriptEnhancer();

  // Errors: Internal naming the file and the device.
  absl::Status MoveTo(const std::string& device);

  // Errors: InvalidArgument for an input that is not [1,3,H,W] float32; Internal naming the
  // file for a failed run or an output that is not [1,3,s*H,s*W] floating point.
  absl::StatusOr<at::Tensor> Forward(const at::Tensor& x) const;

  int scale() const { return scale_; }
  std::string name() const { return "torchscript:" + path_; }

 private:
  TorchScriptEnhancer(std::string path, std::unique_ptr<torch::jit::Module> module, int scale);
  std::string path_;
  std::unique_ptr<torch::jit::Module> module_;
  int scale_;
};

}  // namespace fusion::models
