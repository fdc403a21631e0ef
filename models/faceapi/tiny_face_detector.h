// TinyFaceDetector: face-api's light face detector (Tiny-YOLOv2 style, separable convolutions),
// ported to LibTorch with functional at:: ops.
//
// Source: @vladmandic/face-api 1.7.15 src/tinyFaceDetector, src/tinyYolov2 (identical logic to
// face-api.js 0.22.2); weights package/model/tiny_face_detector_model.bin (MIT). Architecture
// and decoding: shared/docs/MODELS.md §2.4(a).
//
// Forward input:  [N,3,S,S] float32 RGB, 0..255, S a multiple of 32 (default 416), square image
//                 zero-padded at the bottom/right (face-api toBatchTensor(S, center=false)).
// Forward output: [N,25,S/32,S/32]: per cell 5 anchors x (tx, ty, tw, th, objectness).
// Detect(): boxes in image pixels, score = sigmoid(objectness) > score_threshold, greedy NMS.
// Tiles: Forward(x, tile_px > 0) runs the stride-8 stem (conv0-conv2, ~90% of the activation
// bytes at S = 416) in tile_px windows with a 32-px halo (ops::TiledPrefix; the stem's
// receptive field is 22 px) and the rest whole: the same output up to float order.
// Device bytes: 773,284 (193,321 fp32 parameters). Tileable: yes (a fully convolutional net).
// CPU fast path: Create on the CPU compiles the stem and the rest as two
// onednn::Programs (weights packed once, activations NHWC, bias + leaky ReLU fused); Forward
// runs them for a float32 CPU input (else, and after To() another device, the at:: path).
// ResidentBytes() is what the copy holds (the packed weights replace the plain ones): fp32
// 789,668 bytes (DeviceBytes() + 2%, brgemm's blocks), bf16 396,164 (the weights' half).
// Precision of the fast path: bf16 by default where the CPU has it natively (AVX512-BF16 or
// AMX; onednn::Bf16Native()), fp32 elsewhere or with FUSION_ONEDNN_PRECISION=fp32 (or
// tiny_face_detector=fp32): conv weights held as bf16, activations bf16 between layers, input and
// output fp32. Within the goldens' tolerances (onednn_test.cc Bf16FastPath) and 0.3-0.6x the fp32 CPU time at 1 thread
// (docs/PERFORMANCE.md). A copy built for another device is fp32 (onednn::Fp32Scope).
// Thread-safety: see FaceDetector.
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>

#include "absl/status/statusor.h"
#include "models/catalogue/catalogue.h"
#include "models/faceapi/detector.h"
#include "models/faceapi/params.h"

namespace fusion::onednn {
class Program;
}

namespace fusion::faceapi {

class TinyFaceDetector : public FaceDetector {
 public:
  struct Options {
    float score_threshold = 0.5f;  // face-api's default
    float nms_iou = 0.4f;          // face-api's default
    int input_size = 416;          // multiple of 32
  };
  static constexpr char kModelName[] = "tiny_face_detector";
  ~TinyFaceDetector() override;

  // From decoded weights; INVALID_ARGUMENT/NOT_FOUND naming a missing or misshapen tensor.
  static absl::StatusOr<std::unique_ptr<TinyFaceDetector>> Create(const tfjs::WeightMap& weights,
                                                                   Options options);
  // Verifies the catalogue's files for kModelName, reads them and calls Create().
  static absl::StatusOr<std::unique_ptr<TinyFaceDetector>> Load(const models::ModelCatalogue& catalogue,
                                                                 Options options);

  // x [N,3,S,S] -> [N,25,S/32,S/32]; tile_px 0 = the stem in one piece.
  at::Tensor Forward(const at::Tensor& x, int tile_px = 0) const;
  absl::StatusOr<std::vector<FaceBox>> Detect(const cv::Mat& rgb, int input_size = 0, int tile_px = 0,
                                              float min_score = 0) const override;
  int DefaultInputSize() const override { return options_.input_size; }
  bool FreeInputSize() const override { return true; }
  DetectorTraits Traits() const override { return kTinyFaceDetectorTraits; }

  void To(const c10::Device& device);
  uint64_t DeviceBytes() const { return param_bytes_; }
  uint64_t ResidentBytes() const;
  // The oneDNN kernels the fast path runs for an input [1,3,S,S] (stem and head; empty on the
  // at:: path): tests check none is a reference kernel.
  std::string FastPathKernels(int input_size) const;
  static InputContract Input();
  static constexpr bool kTileable = true;
  // Reduced precision (tests/gpu/reduced_precision_test.cc): the largest difference from fp32 on
  // the same device, in units of Forward()'s logits (tx, ty, tw, th, objectness; a score moves at
  // most a quarter of it). bf16 (CPU autocast) measured 0.444 on grace_hopper_512x600.jpg; fp16
  // keeps 3 more mantissa bits (~8x less rounding error), so its bound is bf16's measured figure
  // until a GPU run prints its own. fusiond runs this network at fp32 on every device (the
  // manifest's cuda_precision).
  static constexpr double kFp16Tolerance = 0.5, kBf16Tolerance = 1.0;

 private:
  static constexpr int kStemStride = 8, kStemHaloPx = 32;
  explicit TinyFaceDetector(Options options);
  absl::Status Compile();  // the CPU fast path
  at::Tensor Stem(const at::Tensor& x) const;           // [N,3,S,S] -> [N,64,S/8,S/8]
  at::Tensor Block(const at::Tensor& x, int i) const;   // separable conv i + its pool
  Params params_;
  const Options options_;
  uint64_t param_bytes_ = 0;
  std::unique_ptr<onednn::Program> stem_, head_;  // null: the at:: path
};

// Decodes a Forward() output [1,25,g,g] into boxes relative to the image (0..1), before NMS.
// image_w/h: original size; input_size: S. Exposed for tests.
std::vector<FaceBox> DecodeTinyYolo(const at::Tensor& out, int image_w, int image_h, int input_size,
                                    float score_threshold);

}  // namespace fusion::faceapi
