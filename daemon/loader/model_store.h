// ModelStore: the ModelLoader over the model catalogue (models/manifest.json) with LibTorch, and
// where a stage finds the copy of its model to run.
//
// Tiers (docs/ARCHITECTURE.md#invariants, 3):
//   LoadToHost   STORAGE -> HOST: verifies the catalogue's files (size + sha256), reads the
//                weights into CPU tensors outside any device scope (TF.js weights; a Keras
//                model also keeps its model.json). Returns the host bytes (fp32 weights + JSON).
//   Upload       HOST -> DEVICE: builds the network from the host weights inside the model's
//                own DeviceScope. On `cpu` the weights are cloned first, so the device copy is a
//                second copy charged to the device tier by the budget-enforcing allocator; on
//                `cuda:N` (only with a CUDA LibTorch, FUSION_WITH_CUDA) it is moved with To()
//                from pinned host memory on a side stream, published once that stream drained.
//                Returns the measured bytes: the scope's bytes after the build (cpu), the
//                allocator's growth (cuda). Temporaries peak at about twice the model's bytes
//                (2.5x for a bf16 enhancer's first copy on a device: the probe's fp32 build).
//   ReleaseDevice / ReleaseHost drop the copy (its tensors are freed when the last stage that
//                holds the shared copy lets it go; stages hold it only under a lease).
// Precision: a copy runs the manifest's default_precision (CPU device, host copies) or
// cuda_precision (CUDA). The first copy of a model with a reduced one on a device runs the probe
// (loader/precision.h; for the ESRGAN bf16 fast path against an fp32 build, which lives in
// the model's scope until the verdict); above the manifest's reduced_precision_tolerance, or
// when the probe fails, the copy runs fp32 (logged). The verdict is kept per model and device
// (Precision()). bf16 on a CPU without native bf16 runs fp32 (no verdict).
// Weight-free models (the builtins "classical-fusion" and "feather-blend") are registered with a
// 1-byte estimate (the manager refuses 0) and measure 0 bytes.
// A stage holding a lease calls DeviceCopy(model); the CPU fallback calls HostCopy(model), which
// builds a network from the host weights outside the device scope (from storage when the host
// copy was dropped).
// Errors: the catalogue's NOT_FOUND / DATA_LOSS for missing or corrupt files; INVALID_ARGUMENT
// for a format this build cannot run; RESOURCE_EXHAUSTED when the device allocator refuses an
// upload; INTERNAL naming the model for a LibTorch failure.
// Thread-safety: every method may be called from any thread; the residency manager never calls
// two loader methods concurrently for one model. No LibTorch in this header.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "common/mutex.h"
#include "device/device_meter.h"
#include "memory/model_loader.h"
#include "memory/residency_manager.h"
#include "models/catalogue/catalogue.h"

namespace fusion::faceapi {
class TinyFaceDetector;
class SsdMobilenetV1;
class FaceLandmark68Net;
class FaceRecognitionNet;
}  // namespace fusion::faceapi
namespace fusion::keras {
class KerasModel;
}
namespace fusion::tfjs {
class WeightMap;
}
namespace fusion::models {
class FusionGenerator;
class TorchScriptEnhancer;
}

namespace fusion {

inline constexpr char kFeatherBlendModel[] = "feather-blend";  // the builtin simple blender

// One runnable copy of a model (host or device); exactly one member is set, by format/name.
struct ModelCopy {
  ModelCopy();
  ~ModelCopy();
  std::unique_ptr<faceapi::TinyFaceDetector> tiny_detector;
  std::unique_ptr<faceapi::SsdMobilenetV1> ssd_detector;
  std::unique_ptr<faceapi::FaceLandmark68Net> landmarks;
  std::unique_ptr<faceapi::FaceRecognitionNet> recognition;
  std::unique_ptr<keras::KerasModel> keras;          // enhance (ESRGAN)
  std::unique_ptr<models::TorchScriptEnhancer> torchscript_enhancer;  // enhance (format torchscript)
  std::unique_ptr<models::FusionGenerator> generator;
  // The builtin "feather-blend" (stage blend): no weights, only at:: ops on `device`
  // (BlendSimpleOnDevice, stages.h). Its copies hold nothing and measure 0 bytes.
  bool feather_blend = false;
  // Where this copy's tensors live and runs: the store's device for a device copy, "cpu" for a
  // host copy (the CPU fallback).
  std::string device = "cpu";
  // The precision this copy runs (manifest default_precision on the CPU, cuda_precision on CUDA,
  // fp32 when the probe rejected it or the CPU has no native bf16): "bf16" is the enhancer's
  // oneDNN fast path compiled in bf16 (keras->bf16(): bf16 weights and activations, its last two
  // convs fp32), or, for a model without the fast path, its forward under CPU autocast
  // (bfloat16 compute, fp32 weights); "fp16" under CUDA autocast, compiled only with CUDA
  // (LibTorch 1.13 has no fp16 convolution on the CPU). Applied by Enhance (stages.h).
  std::string precision = "fp32";
};

class ModelStore final : public ModelLoader {
 public:
  struct Options {
    std::string device = "cpu";     // "cpu" or "cuda:N"
    DeviceMeter* meter = nullptr;   // measures uploads; null = the catalogue's figures
  };
  // `catalogue` must outlive the store. FAILED_PRECONDITION for cuda without a CUDA LibTorch.
  static absl::StatusOr<std::unique_ptr<ModelStore>> Create(const models::ModelCatalogue* catalogue,
                                                            Options options);
  ~ModelStore() override;

  absl::StatusOr<uint64_t> LoadToHost(const std::string& model) override;
  absl::StatusOr<uint64_t> Upload(const std::string& model) override;
  void ReleaseDevice(const std::string& model) override;
  void ReleaseHost(const std::string& model) override;

  // The device copy; FAILED_PRECONDITION when the model is not resident (hold a lease).
  absl::StatusOr<std::shared_ptr<const ModelCopy>> DeviceCopy(const std::string& model) const;
  // A copy built outside any device scope from the host weights (CPU fallback).
  absl::StatusOr<std::shared_ptr<const ModelCopy>> HostCopy(const std::string& model) const;

  // Registers every catalogue model with `residency` (device_bytes and one_shot from the
  // catalogue) and pins those marked pinned_by_default (a refused pin is logged, not fatal).
  absl::Status RegisterAll(ResidencyManager& residency) const;

  // The reduced-precision probe's verdict for `model` on `device` ("cpu" for host copies);
  // nullopt before a copy with a reduced precision was built there.
  struct PrecisionVerdict {
    std::string precision;  // the manifest's: "bf16" | "fp16"
    double error = 0;       // max abs output difference from fp32 on the probe
    bool accepted = false;  // error <= reduced_precision_tolerance: copies run `precision`
  };
  std::optional<PrecisionVerdict> Precision(const std::string& model, const std::string& device) const;

  const models::ModelCatalogue& catalogue() const { return *catalogue_; }
  const std::string& device() const { return options_.device; }

  struct HostWeights;  // model_store.cc

 private:
  ModelStore(const models::ModelCatalogue* catalogue, Options options)
      : catalogue_(catalogue), options_(std::move(options)) {}
  absl::StatusOr<std::shared_ptr<const HostWeights>> ReadHost(const models::ModelSpec& spec) const;
  absl::StatusOr<std::shared_ptr<ModelCopy>> Build(const models::ModelSpec& spec,
                                                   const HostWeights& host, bool device) const;
  ScopeId ScopeOf(const std::string& model) const;
  // Keeps copy.precision or sets it to fp32 from the (cached) probe verdict on copy.device; a
  // bf16 fast path is probed against an fp32 build from `weights` (which replaces it when
  // rejected). Errors: the fp32 build's.
  absl::Status SettlePrecision(const models::ModelSpec& spec, const HostWeights& host,
                               const tfjs::WeightMap& weights, ModelCopy& copy) const;

  const models::ModelCatalogue* const catalogue_;
  const Options options_;
  // The host copy of `model`, or null when it is only in STORAGE.
  std::shared_ptr<const HostWeights> FindHost(const std::string& model) const;

  mutable Mutex mu_;
  std::map<std::string, std::shared_ptr<const HostWeights>> host_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::shared_ptr<const ModelCopy>> device_ ABSL_GUARDED_BY(mu_);
  mutable std::map<std::pair<std::string, std::string>, PrecisionVerdict> verdicts_ ABSL_GUARDED_BY(mu_);
};

}  // namespace fusion
