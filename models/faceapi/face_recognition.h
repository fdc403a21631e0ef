// FaceRecognitionNet: dlib's face recognition ResNet-29 (dlib_face_recognition_resnet_model_v1,
// public domain, Davis King) as ported by face-api, in LibTorch.
//
// Source: @vladmandic/face-api 1.7.15 src/faceRecognitionNet (MIT); weights
// package/model/face_recognition_model.bin. MODELS.md §2.4(c).
// Forward input:  [N,3,150,150] float32 RGB, 0..255: the dlib-aligned crop (DlibAlignBox)
//                 padded centred to a square. Compute() first rotates a head rolled by more
//                 than 10 degrees (eye line) upright, so rolled faces keep their identity.
// Forward output: [N,128] descriptor, not normalised (norm ~1.4). Euclidean distance < 0.6
//                 means the same person (dlib's convention).
// Device bytes: 22,458,368 (5,614,592 fp32 parameters). Tileable: no.
// CPU fast path: Create on the CPU compiles the convolutions into an
// onednn::Program (weights packed once; bias, the per-channel scale layer, the residual sum and
// the ReLU fused into each convolution; activations NHWC); Forward runs it for a float32 CPU
// input (else, and after To() another device, the at:: path). ResidentBytes() is what the copy
// holds (packed weights replace the plain ones), DeviceBytes() the fp32 parameters:
// 22,458,368 bytes fp32, 13,678,464 bf16 (the fc layer and two 256x256 3x3 convs at 4x4 and
// 1x1, for which oneDNN 2.6 has no bf16 JIT kernel, stay fp32).
// Precision of the fast path: bf16 by default where the CPU has it natively (AVX512-BF16 or
// AMX; onednn::Bf16Native()), fp32 elsewhere or with FUSION_ONEDNN_PRECISION=fp32 (or
// face_recognition=fp32): conv weights held as bf16, activations bf16 between layers, input and
// output fp32. Within the goldens' tolerances (onednn_test.cc Bf16FastPath) and 0.6-0.7x the fp32 CPU time at 1 thread
// (docs/PERFORMANCE.md). A copy built for another device is fp32 (onednn::Fp32Scope).
// Thread-safety: const methods may run concurrently; To() must not overlap them.
#pragma once

#include <ATen/core/Tensor.h>

#include <array>
#include <memory>

#include <opencv2/core/mat.hpp>

#include "absl/status/statusor.h"
#include "models/catalogue/catalogue.h"
#include "models/faceapi/params.h"
#include "models/faceapi/types.h"

namespace fusion::onednn {
class Program;
}

namespace fusion::faceapi {

using Descriptor = std::array<float, 128>;
float DescriptorDistance(const Descriptor& a, const Descriptor& b);

class FaceRecognitionNet {
 public:
  static constexpr char kModelName[] = "face_recognition";
  static constexpr int kInputSize = 150;
  ~FaceRecognitionNet();

  static absl::StatusOr<std::unique_ptr<FaceRecognitionNet>> Create(const tfjs::WeightMap& weights);
  static absl::StatusOr<std::unique_ptr<FaceRecognitionNet>> Load(const models::ModelCatalogue& catalogue);

  at::Tensor Forward(const at::Tensor& x) const;
  // Descriptor of the face with landmarks `pts` in `rgb` (CV_8UC3): crops DlibAlignBox(pts).
  absl::StatusOr<Descriptor> Compute(const cv::Mat& rgb, const Landmarks68& pts) const;

  void To(const c10::Device& device);
  uint64_t DeviceBytes() const { return param_bytes_; }
  uint64_t ResidentBytes() const;
  static InputContract Input() { return {{-1, 3, kInputSize, kInputSize}, "float32", "0..255", "RGB"}; }
  static constexpr bool kTileable = false;
  // Reduced precision (tests/gpu/reduced_precision_test.cc): the largest difference from fp32 on
  // the same device, in units of a descriptor component (fp16 0.002 on all 128 moves the distance
  // by <= 0.023, against the 0.6 match threshold). bf16 (CPU autocast) measured 0.00158 on
  // grace_hopper_512x600.jpg; fp16 keeps 3 more mantissa bits (~8x less rounding error), so its
  // bound is bf16's measured figure until a GPU run prints its own. fusiond runs this network at
  // fp32 on every device (the manifest's cuda_precision).
  static constexpr double kFp16Tolerance = 0.002, kBf16Tolerance = 0.004;

 private:
  FaceRecognitionNet();
  absl::Status Compile();  // the CPU fast path
  at::Tensor ConvLayer(const at::Tensor& x, const std::string& prefix, int stride, bool relu, bool same) const;
  at::Tensor Residual(const at::Tensor& x, const std::string& prefix) const;
  at::Tensor ResidualDown(const at::Tensor& x, const std::string& prefix) const;
  Params params_;
  uint64_t param_bytes_ = 0;
  std::unique_ptr<onednn::Program> program_;  // null: the at:: path
};

}  // namespace fusion::faceapi
