// Params: the weights of one face-api network, converted once from TF layout to LibTorch layout
// and kept by name, on one device.
//
// Layouts (TF.js -> LibTorch): kConv HWIO [kh,kw,I,O] -> OIHW; kDepthwise [kh,kw,C,1] -> [C,1,kh,kw]
// (groups = C); kLinear [in,out] -> [out,in]; kAsIs unchanged (biases, per-channel scales).
// Invariant: every tensor is contiguous fp32 on device(), except kConv/kDepthwise tensors taken
// after KeepViews(): permuted views of the given weights (no copy) for a network that packs them
// at Create (onednn::Program) and then drops them, so that the upload's peak stays the clone +
// the packed copy. MakeContiguous() restores the invariant. DeviceBytes() = sum of nbytes.
// Thread-safety: const methods are safe concurrently; To() must not run concurrently with use.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "models/catalogue/catalogue.h"
#include "models/tfjs/weights.h"

namespace fusion::onednn {
class Program;
}

namespace fusion::faceapi {

enum class Layout { kAsIs, kConv, kDepthwise, kLinear };

class Params {
 public:
  // Copies tensor `name` from `w`, checking its TF shape, converted to `layout`.
  // NOT_FOUND / INVALID_ARGUMENT naming the tensor and both shapes.
  absl::Status Take(const tfjs::WeightMap& w, const std::string& name,
                    std::vector<int64_t> tf_shape, Layout layout);
  // The converted tensor; `name` must have been taken (a programming error otherwise: throws).
  const at::Tensor& operator[](std::string_view name) const;
  // Keeps kConv/kDepthwise tensors as views from now on (see above); MakeContiguous() ends it.
  void KeepViews() { views_ = true; }
  void MakeContiguous();
  // Removes tensor `name` and returns it (a network's fast path packs it: the packed copy replaces
  // it); throws std::out_of_range when absent, as operator[].
  at::Tensor Release(std::string_view name);
  // Drops tensor `name` (a network's fast path holds it in another layout); no-op if absent.
  void Drop(std::string_view name);
  // Adds (or replaces) tensor `name`: contiguous fp32 on device() (the plain form given back).
  void Put(const std::string& name, at::Tensor t);
  // The fast path's programs (onednn::Program, built by the net's Create from these weights):
  // Adopt() keeps `built` in *slot and Drop()s every weight it packed (Build's error passes
  // through, nothing kept).
  absl::Status Adopt(absl::StatusOr<std::unique_ptr<onednn::Program>> built, std::unique_ptr<onednn::Program>* slot);
  // Moves every tensor to `device` (e.g. CUDA after a CPU load). Off the CPU, the programs in
  // `programs` first Put() their packed weights back in plain form and are dropped (the at::
  // path runs there).
  void To(const c10::Device& device, std::initializer_list<std::unique_ptr<onednn::Program>*> programs = {});
  c10::Device device() const { return device_; }
  uint64_t DeviceBytes() const;
  // DeviceBytes() plus the packed bytes of the programs that are there.
  uint64_t ResidentBytes(std::initializer_list<const std::unique_ptr<onednn::Program>*> programs) const;
  size_t size() const { return tensors_.size(); }

 private:
  std::map<std::string, at::Tensor, std::less<>> tensors_;
  c10::Device device_ = c10::Device(c10::kCPU);
  bool views_ = false;
};

// The weights of catalogue model `name`: its files verified (sha256) and its first file (the
// TF.js manifest or model.json) read. Errors: those of Get(), Verify() and LoadWeights().
absl::StatusOr<tfjs::WeightMap> LoadCatalogueWeights(const models::ModelCatalogue& catalogue,
                                                     std::string_view name);

}  // namespace fusion::faceapi
