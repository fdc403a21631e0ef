// FaceLandmark68Net: face-api's 68-point landmark regressor (4 dense blocks of separable
// convolutions + FC), ported to LibTorch.
//
// Source: @vladmandic/face-api 1.7.15 src/faceLandmarkNet, src/faceFeatureExtractor (MIT);
// weights package/model/face_landmark_68_model.bin. MODELS.md §2.4(b).
// Forward input:  [N,3,112,112] float32 RGB, 0..255 (a face crop padded centred to a square).
// Forward output: [N,136] = x0,y0,x1,y1,... relative to the 112x112 padded square (0..1).
// Detect(): 68 points in image pixels for a detection box (crop clipped, not enlarged).
// Device bytes: 1,427,360 (356,840 fp32 parameters). Tileable: no (one face crop).
// CPU fast path: Create on the CPU compiles the dense blocks into an
// onednn::Program (weights packed once; bias, the dense sums and the ReLU fused; activations
// NHWC); Forward runs it for a float32 CPU input (else, and after To() another device, the
// at:: path). ResidentBytes() is what the copy holds, DeviceBytes() the fp32 parameters:
// 1,427,360 bytes fp32, 788,000 bf16 (the fc layer stays fp32).
// Precision of the fast path: bf16 by default where the CPU has it natively (AVX512-BF16 or
// AMX; onednn::Bf16Native()), fp32 elsewhere or with FUSION_ONEDNN_PRECISION=fp32 (or
// face_landmark_68=fp32): conv weights held as bf16, activations bf16 between layers, input and
// output fp32. Within the goldens' tolerances (onednn_test.cc Bf16FastPath) and 0.65x the fp32 CPU time at 1 thread
// (docs/PERFORMANCE.md). A copy built for another device is fp32 (onednn::Fp32Scope).
// Thread-safety: const methods may run concurrently; To() must not overlap them.
#pragma once

#include <ATen/core/Tensor.h>

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

class FaceLandmark68Net {
 public:
  static constexpr char kModelName[] = "face_landmark_68";
  static constexpr int kInputSize = 112;
  ~FaceLandmark68Net();

  static absl::StatusOr<std::unique_ptr<FaceLandmark68Net>> Create(const tfjs::WeightMap& weights);
  static absl::StatusOr<std::unique_ptr<FaceLandmark68Net>> Load(const models::ModelCatalogue& catalogue);

  at::Tensor Forward(const at::Tensor& x) const;
  // Landmarks of the face in `box` of `rgb` (CV_8UC3), in pixels of `rgb`.
  // INVALID_ARGUMENT when the box lies outside the image; INTERNAL on a LibTorch failure.
  absl::StatusOr<Landmarks68> Detect(const cv::Mat& rgb, const FaceBox& box) const;

  void To(const c10::Device& device);
  uint64_t DeviceBytes() const { return param_bytes_; }
  uint64_t ResidentBytes() const;
  static InputContract Input() { return {{-1, 3, kInputSize, kInputSize}, "float32", "0..255", "RGB"}; }
  static constexpr bool kTileable = false;
  // Reduced precision (tests/gpu/reduced_precision_test.cc): the largest difference from fp32 on
  // the same device, in units of Forward()'s points relative to the 112-px crop (fp16 0.005 = 0.56
  // px of it). bf16 (CPU autocast) measured 0.00467 on grace_hopper_512x600.jpg; fp16 keeps 3 more
  // mantissa bits (~8x less rounding error), so its bound is bf16's measured figure until a GPU run
  // prints its own. fusiond runs this network at fp32 on every device (the manifest's
  // cuda_precision).
  static constexpr double kFp16Tolerance = 0.005, kBf16Tolerance = 0.01;

 private:
  FaceLandmark68Net();
  absl::Status Compile();  // the CPU fast path
  at::Tensor DenseBlock(const at::Tensor& x, const std::string& prefix, bool first) const;
  Params params_;
  uint64_t param_bytes_ = 0;
  std::unique_ptr<onednn::Program> program_;  // null: the at:: path
};

}  // namespace fusion::faceapi
