// Keras layers-model interpreter: runs a TF.js "layers-model" (model.json: Keras Functional
// topology + weightsManifest, read by tfjs/weights.h) as LibTorch ops on any device.
// Written for the UpscalerJS ESRGAN models (MODELS.md §3; reference: shared/reference/
// upscaler_ref.py): layer types InputLayer, Conv2D (stride s, dilation 1, groups 1, padding
// "same" (TF asymmetric) or "valid", activation linear|relu, bias optional), Activation(relu),
// Concatenate (channel axis), Add, UpSampling2D (nearest, integer size), and the two custom
// layers of esrgan-thick: MultiplyBeta (x0.2) and PixelShuffle<s>x (tf.depthToSpace, DCR order).
//
// Tensors: Forward takes [N,C,H,W] float32 (NCHW; the model's NHWC input transposed) in the
// model's own range (ESRGAN slim/medium: RGB 0-255) and returns the single output [N,C',sH,sW]
// float32, raw (not clipped). Kernels are stored once as OIHW (from HWIO). On the CPU the
// convolutions call oneDNN directly (at::mkldnn_convolution), elsewhere at::conv2d.
// Tiling: the model is tileable when every conv has stride 1 and keeps the size ("same", or
// "valid" 1x1); halo_px() is then its receptive-field radius in input pixels, so a tile run with
// that many context pixels on each side gives the whole-image result in its interior.
// Parsing: keras_topology.h (no LibTorch); FromJson binds the weights to it.
// Errors: parse errors are InvalidArgument naming the model and the layer (unknown class,
// unsupported option, unknown inbound layer, missing or mis-shaped weight).
// CPU fast path: on the CPU, FromJson compiles the graph into an onednn::Program
// (weights packed once, bias + ReLU (its own or a following Activation's) and a conv's following
// two-input Add fused, NHWC activations kept across layers, concat/sum/nearest-upsample as
// oneDNN primitives; a nearest upsample followed by a "same" conv, ESRGAN's SR, as one conv on
// the low-resolution side with s*s times the outputs and a depthToSpace, the same sums without
// the upsampled tensor: keras_model.cc) unless a layer has no
// oneDNN form (MultiplyBeta, PixelShuffle: esrgan-thick) or FUSION_ONEDNN=0. Forward runs it
// for a float32 CPU input without CPU autocast; under autocast (a bf16 copy) the at:: path runs
// on the packed weights unpacked for that call (exact; charged to the caller's scope).
// Precision: FromJson's `bf16` asks for the fast path in bf16 (onednn/program.h), with the two
// convolutions nearest the output in fp32: 0.5-0.7x the fp32 CPU time, 0.56-0.71 levels
// (0..255) off fp32 on a face crop (all-bf16: 1.1-1.25, over the catalogue's
// reduced_precision_tolerance of 1.0). It is granted only where the CPU has native bf16
// (onednn::Bf16Native()) and the graph compiles; bf16() says whether it was. The daemon asks
// for it when the catalogue's default_precision is "bf16" (ModelStore, which then probes it
// against an fp32 build, loader/precision.h). FUSION_ONEDNN_PRECISION=bf16|fp32 (or
// esrgan-slim-x2=fp32, the catalogue name: the origin itself, or taken from its directories)
// overrides the request either way.
// resident_bytes() is what the model holds: the packed weights replace the plain ones, padded
// where oneDNN pads few-channel convs, plus an upsample-fused conv's packed weight (s*s times the
// outputs), its repeated bias and its plain weight kept for the at:: path (esrgan-slim-x2
// 955,164 B in fp32, 493,084 in bf16, vs 888,300 parameter bytes; slim-x4 1,072,236 / 610,156).
// Thread-safety: immutable after Load() except MoveTo(); Forward() may run concurrently.
#pragma once

#include <ATen/core/Tensor.h>

#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace fusion::tfjs {
class WeightMap;
}

namespace fusion::onednn {
class Program;
}

namespace fusion::keras {

struct Layer;  // keras_model.cc: a LayerSpec (keras_topology.h) with its weights

class KerasModel {
 public:
  // Reads model.json and its weight shards (same directory) onto the CPU.
  static absl::StatusOr<std::unique_ptr<KerasModel>> Load(const std::filesystem::path& model_json);
  // From model.json text and already decoded weights; `origin` names the model in errors.
  // `bf16`: compile the CPU fast path in bf16 where the CPU has it natively (see above).
  static absl::StatusOr<std::unique_ptr<KerasModel>> FromJson(std::string_view model_json,
                                                              const tfjs::WeightMap& weights,
                                                              std::string_view origin, bool bf16 = false);
  ~KerasModel();

  // Errors: InvalidArgument naming the model when x is not [N,C,H,W] float32 with the input's C;
  // Internal naming the layer when a LibTorch op fails.
  absl::StatusOr<at::Tensor> Forward(const at::Tensor& x) const;
  // Copies every weight to `device` (HOST->DEVICE). Not thread-safe with Forward().
  absl::Status MoveTo(const at::Device& device);

  const std::string& origin() const { return origin_; }
  int input_channels() const { return input_channels_; }
  int scale() const { return scale_; }             // output side / input side
  bool tileable() const { return tileable_; }
  int halo_px() const { return halo_px_; }         // input pixels; meaningful when tileable
  uint64_t parameter_bytes() const { return parameter_bytes_; }  // numel * 4 over all weights
  uint64_t resident_bytes() const;                 // what the weights take as held
  bool compiled() const { return program_ != nullptr; }
  // Forward runs the bf16 fast path for a float32 CPU input (no autocast needed or wanted).
  bool bf16() const;
  size_t num_layers() const { return layers_.size(); }
  // Reduced precision of the ESRGAN models: fp16 on CUDA is bounded by the manifest's
  // reduced_precision_tolerance (1.0 of 0..255; the daemon's probe gate, loader/precision.h).
  // bf16 CPU autocast on the at:: path (every conv bf16; not the bf16 fast path, which keeps an
  // fp32 tail), the CPU twin of tests/gpu/reduced_precision_test.cc, measured 1.52-1.82 on a
  // 48x48 face crop (esrgan-slim/medium x2/x4); its bound here, in 0..255 output units:
  static constexpr double kBf16Tolerance = 4.0;

 private:
  KerasModel();
  absl::Status Compile(bool bf16);  // the CPU fast path
  std::string origin_;
  std::vector<std::unique_ptr<Layer>> layers_;
  std::vector<int> last_use_;  // per layer: index of the last layer reading it
  int input_channels_ = 3, output_layer_ = 0, scale_ = 1, halo_px_ = 0;
  bool tileable_ = true;
  uint64_t parameter_bytes_ = 0;
  uint64_t fused_bytes_ = 0;  // the program's own biases of upsample-fused convs (Compile)
  std::unique_ptr<onednn::Program> program_;  // null: the at:: path
};

}  // namespace fusion::keras
