// ModelStore (model_store.h): the catalogue's models between storage, host and device.
#include "loader/model_store.h"

#include <ATen/ATen.h>
#ifdef FUSION_WITH_CUDA
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

#include <fstream>
#include <optional>
#include <sstream>

#include "models/common/exception_text.h"
#include "absl/strings/str_cat.h"
#include "device/cpu_device_memory.h"
#include "base/size.h"
#include "models/faceapi/face_landmark_68.h"
#include "models/faceapi/face_recognition.h"
#include "models/faceapi/ssd_mobilenet_v1.h"
#include "models/faceapi/tiny_face_detector.h"
#include "models/generator/generator_factory.h"
#include "models/generator/torchscript_enhancer.h"
#include "models/keras/keras_model.h"
#include "models/onednn/program.h"
#include "models/tfjs/weights.h"
#include "loader/device_oom.h"
#include "loader/precision.h"
#include "spdlog/spdlog.h"
#include "base/status_macros.h"

namespace fusion {

struct ModelStore::HostWeights {
  tfjs::WeightMap weights;  // CPU fp32, allocated outside any device scope
  std::string model_json;   // keras-layers-model only
  uint64_t bytes = 0;
};

ModelCopy::ModelCopy() = default;
ModelCopy::~ModelCopy() = default;

namespace {

absl::StatusOr<std::string> ReadText(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path.string()));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// A deep copy of every tensor (allocated in the caller's device scope).
tfjs::WeightMap Clone(const tfjs::WeightMap& w) {
  tfjs::TensorMap copy;
  for (const auto& [name, t] : w.tensors()) copy.emplace(name, t.clone());
  return tfjs::WeightMap(std::move(copy), w.origin());
}

template <typename T>
absl::Status Take(absl::StatusOr<std::unique_ptr<T>> net, std::unique_ptr<T>& slot) {
  if (!net.ok()) return net.status();
  slot = *std::move(net);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<ModelStore>> ModelStore::Create(const models::ModelCatalogue* catalogue,
                                                               Options options) {
  if (options.device != "cpu") {
#ifndef FUSION_WITH_CUDA
    return absl::FailedPreconditionError(absl::StrCat(
        "device '", options.device, "': this fusiond's LibTorch has no CUDA; use --device cpu"));
#endif
  }
  return std::unique_ptr<ModelStore>(new ModelStore(catalogue, std::move(options)));
}

ModelStore::~ModelStore() = default;

ScopeId ModelStore::ScopeOf(const std::string& model) const {
  const auto& all = catalogue_->models();
  for (size_t i = 0; i < all.size(); ++i) {
    if (all[i].name == model) return static_cast<ScopeId>(i + 1);  // stage scopes: top bit set
  }
  return kNoScope;
}

absl::StatusOr<std::shared_ptr<const ModelStore::HostWeights>> ModelStore::ReadHost(
    const models::ModelSpec& spec) const {
  DeviceScope host_tier(kNoScope);  // host copies are never charged to the device
  auto host = std::make_shared<HostWeights>();
  if (spec.format == "builtin" || spec.format == "torchscript") return host;
  RETURN_IF_ERROR(catalogue_->Verify(spec.name));
  const std::filesystem::path first = catalogue_->PathOf(spec.files.at(0));
  try {
    auto weights = tfjs::LoadWeights(first);
    if (!weights.ok()) return weights.status();
    host->weights = *std::move(weights);
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("model '", spec.name, "': reading weights: ", ExceptionText(e)));
  }
  if (spec.format == "keras-layers-model") {
    ASSIGN_OR_RETURN(host->model_json, ReadText(first));
  }
  host->bytes = host->weights.Fp32Bytes() + host->model_json.size();
  return host;
}

absl::StatusOr<std::shared_ptr<ModelCopy>> ModelStore::Build(const models::ModelSpec& spec,
                                                             const HostWeights& host,
                                                             bool device) const {
  auto copy = std::make_shared<ModelCopy>();
  copy->precision = device && options_.device != "cpu" ? spec.cuda_precision : spec.default_precision;
  copy->device = device ? options_.device : "cpu";
  // The CPU device copy is a second copy: clone inside the caller's scope so it is charged.
  const bool clone = device && options_.device == "cpu";
  const tfjs::WeightMap cloned = clone ? Clone(host.weights) : tfjs::WeightMap();
  const tfjs::WeightMap& w = clone ? cloned : host.weights;
  absl::Status st;
  // A copy for another device is built on the CPU and moved: fp32 there, whatever the CPU
  // fast path's precision (onednn/program.h).
  std::optional<onednn::Fp32Scope> fp32;
  if (device && options_.device != "cpu") fp32.emplace();
  if (spec.format == "tfjs-weights") {
    if (spec.name == faceapi::TinyFaceDetector::kModelName) {
      st = Take(faceapi::TinyFaceDetector::Create(w, {}), copy->tiny_detector);
    } else if (spec.name == faceapi::SsdMobilenetV1::kModelName) {
      st = Take(faceapi::SsdMobilenetV1::Create(w, {}), copy->ssd_detector);
    } else if (spec.name == faceapi::FaceLandmark68Net::kModelName) {
      st = Take(faceapi::FaceLandmark68Net::Create(w), copy->landmarks);
    } else if (spec.name == faceapi::FaceRecognitionNet::kModelName) {
      st = Take(faceapi::FaceRecognitionNet::Create(w), copy->recognition);
    } else {
      st = absl::InvalidArgumentError(absl::StrCat("model '", spec.name, "': no network for it"));
    }
  } else if (spec.format == "keras-layers-model") {
    // bf16 on the CPU: the fast path compiled in bf16 (granted where the CPU has it natively),
    // unless the probe has already rejected it for this model here.
    bool bf16 = copy->device == "cpu" && copy->precision == "bf16";
    if (bf16) {
      MutexLock lock(&mu_);
      auto it = verdicts_.find({spec.name, copy->device});
      bf16 = it == verdicts_.end() || it->second.accepted;
    }
    st = Take(keras::KerasModel::FromJson(host.model_json, w, spec.name, bf16), copy->keras);
  } else if (spec.format == "builtin" && spec.stage == "blend" && spec.name == kFeatherBlendModel) {
    copy->feather_blend = true;
  } else if (spec.format == "torchscript" && spec.stage == "enhance") {
    if (spec.files.empty()) {
      st = absl::InvalidArgumentError(absl::StrCat("enhancer '", spec.name, "' lists no file"));
    } else if (st = catalogue_->Verify(spec.name); st.ok()) {
      st = Take(models::TorchScriptEnhancer::Load(catalogue_->PathOf(spec.files.front()).string()),
                copy->torchscript_enhancer);
    }
  } else if (spec.stage == "generate") {
    st = Take(models::CreateGenerator(*catalogue_, spec.name), copy->generator);
  } else {
    st = absl::InvalidArgumentError(
        absl::StrCat("model '", spec.name, "': format '", spec.format, "' is not runnable"));
  }
  if (!st.ok()) return st;
#ifdef FUSION_WITH_CUDA
  if (device && options_.device != "cpu") {
    // On a side stream from the pool: an upload (often a prefetch while a stage computes on the
    // default stream) overlaps that compute instead of queueing behind it. The copies come from
    // pinned host memory (Params::To, KerasModel::MoveTo); the copy is published only after the
    // side stream has drained, so the stages' default stream never reads a partial upload.
    const c10::Device d(options_.device);
    const c10::cuda::CUDAStream side = c10::cuda::getStreamFromPool(/*isHighPriority=*/false, d.index());
    {
      const c10::cuda::CUDAStreamGuard on_side(side);
      if (copy->tiny_detector) copy->tiny_detector->To(d);
      if (copy->ssd_detector) copy->ssd_detector->To(d);
      if (copy->landmarks) copy->landmarks->To(d);
      if (copy->recognition) copy->recognition->To(d);
      if (copy->keras) {
        RETURN_IF_ERROR(copy->keras->MoveTo(d));
      }
      if (copy->torchscript_enhancer) {
        RETURN_IF_ERROR(copy->torchscript_enhancer->MoveTo(options_.device));
      }
      if (copy->generator) {  // a TorchScript generator's weights (loaded onto the CPU)
        RETURN_IF_ERROR(copy->generator->MoveTo(options_.device));
      }
    }
    side.synchronize();
  }
#endif
  if (copy->keras) {
    RETURN_IF_ERROR(SettlePrecision(spec, host, w, *copy));
  }
  return copy;
}

absl::Status ModelStore::SettlePrecision(const models::ModelSpec& spec, const HostWeights& host,
                                         const tfjs::WeightMap& weights, ModelCopy& copy) const {
  const std::string& on = copy.device;
  const std::pair<std::string, std::string> key{spec.name, on};
  std::optional<PrecisionVerdict> cached;
  {
    MutexLock lock(&mu_);
    if (auto it = verdicts_.find(key); it != verdicts_.end()) cached = it->second;
  }
  if (copy.keras->bf16()) {  // the bf16 fast path (also when FUSION_ONEDNN_PRECISION asked for it)
    copy.precision = "bf16";
    if (cached.has_value() && cached->accepted) return absl::OkStatus();
    // The probe's reference: an fp32 build of the same weights (charged to the caller's scope
    // while it lives; the copy itself when bf16 is rejected).
    absl::StatusOr<std::unique_ptr<keras::KerasModel>> fp32;
    {
      onednn::Fp32Scope fp32_only;
      fp32 = keras::KerasModel::FromJson(host.model_json, weights, spec.name, /*bf16=*/false);
    }
    if (!fp32.ok()) return fp32.status();
    absl::StatusOr<double> error = ReducedPrecisionError(*copy.keras, **fp32);
    if (!error.ok()) {  // not verified (e.g. no memory for the probe now): fp32, ask again next time
      spdlog::warn("model '{}' on {}: bf16 not verified, running fp32: {}", spec.name, on, error.status().ToString());
      copy.keras = *std::move(fp32);
      copy.precision = "fp32";
      return absl::OkStatus();
    }
    const PrecisionVerdict v{"bf16", *error, *error <= spec.reduced_precision_tolerance};
    if (v.accepted) {
      spdlog::info("model '{}' on {}: bf16 fast path accepted (probe max abs difference {:.4g} <= {})", spec.name,
                   on, v.error, spec.reduced_precision_tolerance);
    } else {
      spdlog::warn("model '{}' on {}: bf16 fast path rejected, running fp32 (probe max abs difference {:.4g} > {})",
                   spec.name, on, v.error, spec.reduced_precision_tolerance);
      copy.keras = *std::move(fp32);
      copy.precision = "fp32";
    }
    MutexLock lock(&mu_);
    verdicts_.emplace(key, v);
    return absl::OkStatus();
  }
  if (copy.precision == "fp32") return absl::OkStatus();
  if (copy.precision == "bf16" && (copy.keras->compiled() || !onednn::Bf16Native())) {
    // Asked for bf16 but the fast path is fp32: no native bf16 on this CPU (emulated bf16 is
    // slower than fp32), or FUSION_ONEDNN_PRECISION=fp32 said so.
    if (!cached.has_value()) {
      spdlog::info("model '{}' on {}: bf16 asked for, running fp32 ({})", spec.name, on,
                   onednn::Bf16Native() ? "FUSION_ONEDNN_PRECISION" : "this CPU has no native bf16");
    }
    copy.precision = "fp32";
    return absl::OkStatus();
  }
  if (cached.has_value()) {
    if (!cached->accepted) copy.precision = "fp32";
    return absl::OkStatus();
  }
  absl::StatusOr<double> error = ReducedPrecisionError(*copy.keras, copy.precision, on);
  if (!error.ok()) {  // not verified (e.g. no memory for the probe now): fp32, ask again next time
    spdlog::warn("model '{}' on {}: {} not verified, running fp32: {}", spec.name, on, copy.precision,
                 error.status().ToString());
    copy.precision = "fp32";
    return absl::OkStatus();
  }
  const PrecisionVerdict v{copy.precision, *error, *error <= spec.reduced_precision_tolerance};
  if (v.accepted) {
    spdlog::info("model '{}' on {}: {} accepted (probe max abs difference {:.4g} <= {})", spec.name, on,
                 v.precision, v.error, spec.reduced_precision_tolerance);
  } else {
    spdlog::warn("model '{}' on {}: {} rejected, running fp32 (probe max abs difference {:.4g} > {})", spec.name,
                 on, v.precision, v.error, spec.reduced_precision_tolerance);
    copy.precision = "fp32";
  }
  MutexLock lock(&mu_);
  verdicts_.emplace(key, v);
  return absl::OkStatus();
}

std::optional<ModelStore::PrecisionVerdict> ModelStore::Precision(const std::string& model,
                                                                  const std::string& device) const {
  MutexLock lock(&mu_);
  auto it = verdicts_.find({model, device});
  if (it == verdicts_.end()) return std::nullopt;
  return it->second;
}

absl::StatusOr<uint64_t> ModelStore::LoadToHost(const std::string& model) {
  ASSIGN_OR_RETURN(auto spec, catalogue_->Get(model));
  ASSIGN_OR_RETURN(auto host, ReadHost(*spec));
  const uint64_t bytes = host->bytes;
  MutexLock lock(&mu_);
  host_[model] = std::move(host);
  return bytes;
}

std::shared_ptr<const ModelStore::HostWeights> ModelStore::FindHost(const std::string& model) const {
  MutexLock lock(&mu_);
  auto it = host_.find(model);
  return it == host_.end() ? nullptr : it->second;
}

absl::StatusOr<uint64_t> ModelStore::Upload(const std::string& model) {
  ASSIGN_OR_RETURN(auto spec, catalogue_->Get(model));
  std::shared_ptr<const HostWeights> host = FindHost(model);
  if (host == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat("model '", model, "': no host copy to upload"));
  }
  const ScopeId scope = ScopeOf(model);
  const uint64_t before = options_.meter != nullptr ? options_.meter->AllocatedBytes() : 0;
  absl::StatusOr<std::shared_ptr<ModelCopy>> copy;
  try {
    DeviceScope device_tier(scope);
    copy = Build(*spec, *host, /*device=*/true);
  } catch (const std::exception& e) {
    if (IsDeviceOom(e)) {
      return absl::ResourceExhaustedError(absl::StrCat("model '", model, "': upload: ", ExceptionText(e)));
    }
    return absl::InternalError(absl::StrCat("model '", model, "': upload: ", ExceptionText(e)));
  }
  if (!copy.ok()) {
    // A network's own status (e.g. a tensor the budget allocator refused) names the file and
    // tensor; say which model and that the upload's temporaries count (about twice its bytes).
    return absl::Status(copy.status().code(),
                        absl::StrCat("model '", model, "': upload to ", options_.device, " (",
                                     FormatBytes(spec->device_bytes), ", with temporaries up to about twice that): ",
                                     copy.status().message()));
  }
  uint64_t bytes = 0;
  if (options_.meter != nullptr) {
    bytes = options_.device == "cpu" ? options_.meter->Usage(scope).current_bytes
                                     : options_.meter->AllocatedBytes() - before;
  } else {
    bytes = spec->device_bytes;
  }
  MutexLock lock(&mu_);
  device_[model] = *std::move(copy);
  return bytes;
}

void ModelStore::ReleaseDevice(const std::string& model) {
  std::shared_ptr<const ModelCopy> dropped;
  {
    MutexLock lock(&mu_);
    auto it = device_.find(model);
    if (it == device_.end()) return;
    dropped = std::move(it->second);
    device_.erase(it);
  }
#ifdef FUSION_WITH_CUDA
  // The copy's blocks were allocated on an upload side stream; the caching allocator would hand
  // them to the next upload on that stream while default-stream kernels may still read them.
  if (options_.device != "cpu") c10::cuda::device_synchronize();
#endif
  dropped.reset();  // frees the tensors outside the lock
  if (options_.meter != nullptr) options_.meter->ReleaseCache();
}

void ModelStore::ReleaseHost(const std::string& model) {
  MutexLock lock(&mu_);
  host_.erase(model);
}

absl::StatusOr<std::shared_ptr<const ModelCopy>> ModelStore::DeviceCopy(const std::string& model) const {
  MutexLock lock(&mu_);
  auto it = device_.find(model);
  if (it == device_.end()) {
    return absl::FailedPreconditionError(absl::StrCat("model '", model, "' is not on the device"));
  }
  return it->second;
}

absl::StatusOr<std::shared_ptr<const ModelCopy>> ModelStore::HostCopy(const std::string& model) const {
  ASSIGN_OR_RETURN(auto spec, catalogue_->Get(model));
  std::shared_ptr<const HostWeights> host = FindHost(model);
  DeviceScope host_tier(kNoScope);
  if (host == nullptr) {  // dropped to storage meanwhile: a transient host copy
    ASSIGN_OR_RETURN(host, ReadHost(*spec));
  }
  try {
    ASSIGN_OR_RETURN(auto copy, Build(*spec, *host, /*device=*/false));
    return std::shared_ptr<const ModelCopy>(std::move(copy));
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("model '", model, "': host copy: ", ExceptionText(e)));
  }
}

absl::Status ModelStore::RegisterAll(ResidencyManager& residency) const {
  for (const models::ModelSpec& m : catalogue_->models()) {
    ModelSpec spec{.name = m.name,
                   .device_bytes = std::max<uint64_t>(m.device_bytes, 1),
                   .host_bytes = std::max<uint64_t>(m.TotalFileBytes(), 1),
                   .one_shot = m.one_shot,
                   // On the CPU an upload clones the weights and builds the network from the
                   // clone: its temporaries reach about the model's bytes again (see Upload).
                   .upload_extra_bytes = options_.device == "cpu" ? m.device_bytes : 0,
                   .keep_alive = m.keep_alive};  // the catalogue's override, if any
    RETURN_IF_ERROR(residency.RegisterModel(spec));
  }
  for (const models::ModelSpec& m : catalogue_->models()) {
    if (!m.pinned_by_default) continue;
    if (absl::Status st = residency.Pin(m.name, absl::Now() + absl::Seconds(60)); !st.ok()) {
      spdlog::warn("model '{}' is pinned by default but cannot be pinned: {}", m.name, st.ToString());
    }
  }
  return absl::OkStatus();
}

}  // namespace fusion
