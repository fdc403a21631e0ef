#include "models/faceapi/params.h"

#include <ATen/ATen.h>

#include <stdexcept>

#include "models/common/exception_text.h"
#include "models/onednn/program.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace fusion::faceapi {

absl::Status Params::Take(const tfjs::WeightMap& w, const std::string& name,
                          std::vector<int64_t> tf_shape, Layout layout) {
  ASSIGN_OR_RETURN(at::Tensor t, w.Get(name, std::move(tf_shape)));
  at::Tensor v = t;
  switch (layout) {
    case Layout::kAsIs: break;
    case Layout::kConv: v = v.permute({3, 2, 0, 1}); break;
    case Layout::kDepthwise: v = v.permute({2, 3, 0, 1}); break;
    case Layout::kLinear: v = v.t(); break;
  }
  try {
    const bool view = views_ && (layout == Layout::kConv || layout == Layout::kDepthwise);
    tensors_[name] = view ? v : v.contiguous().to(device_);
  } catch (const std::exception& e) {
    return absl::ResourceExhaustedError(absl::StrCat(w.origin(), ": tensor '", name, "': ", ExceptionText(e)));
  }
  return absl::OkStatus();
}

const at::Tensor& Params::operator[](std::string_view name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) throw std::out_of_range("faceapi::Params: no tensor " + std::string(name));
  return it->second;
}

void Params::MakeContiguous() {
  for (auto& [name, t] : tensors_) t = t.contiguous();
  views_ = false;
}

at::Tensor Params::Release(std::string_view name) {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) throw std::out_of_range("faceapi::Params: no tensor " + std::string(name));
  at::Tensor t = std::move(it->second);
  tensors_.erase(it);
  return t;
}

void Params::Drop(std::string_view name) {
  auto it = tensors_.find(name);
  if (it != tensors_.end()) tensors_.erase(it);
}

void Params::Put(const std::string& name, at::Tensor t) { tensors_[name] = t.contiguous().to(device_); }

absl::Status Params::Adopt(absl::StatusOr<std::unique_ptr<onednn::Program>> built,
                           std::unique_ptr<onednn::Program>* slot) {
  if (!built.ok()) return built.status();
  *slot = *std::move(built);
  for (const std::string& name : (*slot)->packed_names()) Drop(name);
  return absl::OkStatus();
}

void Params::To(const c10::Device& device, std::initializer_list<std::unique_ptr<onednn::Program>*> programs) {
  for (std::unique_ptr<onednn::Program>* program : programs) {
    if (device.is_cpu() || !*program) continue;
    for (auto& [name, t] : (*program)->PlainWeights()) Put(name, t);
    program->reset();
  }
  // To CUDA: staged through pinned (page-locked) host memory and copied without blocking the
  // host, on the caller's current stream (ModelStore uploads on a side stream and waits for it).
  for (auto& [name, t] : tensors_) t = device.is_cuda() ? t.pin_memory().to(device, /*non_blocking=*/true) : t.to(device);
  device_ = device;
}

uint64_t Params::DeviceBytes() const {
  uint64_t total = 0;
  for (const auto& [name, t] : tensors_) total += t.nbytes();
  return total;
}

uint64_t Params::ResidentBytes(std::initializer_list<const std::unique_ptr<onednn::Program>*> programs) const {
  uint64_t bytes = DeviceBytes();
  for (const std::unique_ptr<onednn::Program>* program : programs) bytes += *program ? (*program)->PackedBytes() : 0;
  return bytes;
}

absl::StatusOr<tfjs::WeightMap> LoadCatalogueWeights(const models::ModelCatalogue& catalogue,
                                                     std::string_view name) {
  ASSIGN_OR_RETURN(const models::ModelSpec* spec, catalogue.Get(name));
  RETURN_IF_ERROR(catalogue.Verify(name));
  return tfjs::LoadWeights(catalogue.PathOf(spec->files.at(0)));
}

}  // namespace fusion::faceapi
