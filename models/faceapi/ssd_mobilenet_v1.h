// SsdMobilenetV1: face-api's "accurate" face detector (MobileNetV1 backbone + SSD box
// predictors at 6 scales, 5118 prior boxes), ported to LibTorch.
//
// Source: @vladmandic/face-api 1.7.15 src/ssdMobilenetv1 (MIT); weights
// package/model/ssd_mobilenetv1_model.bin, trained on WIDER FACE by yeephycho/tensorflow-face-
// detection. MODELS.md §2.4(d).
// Forward input:  [N,3,512,512] float32 RGB, 0..255 (the image zero-padded at the bottom/right to
//                 a square, resized to 512); normalised inside to x/127.5 - 1.
// Forward output: {boxes [N,5118,4] as (ymin,xmin,ymax,xmax) relative to the padded square,
//                  scores [N,5118] = sigmoid of the face class}.
// Detect(): score > min_confidence (0.5), greedy NMS at IoU 0.5, at most max_results boxes,
//           clipped to the square and scaled to image pixels.
// Device bytes: DeviceBytes() (fp32 parameters + the prior boxes buffer).
// Tiles: Forward(x, tile_px > 0) runs the stride-8 stem (Conv2d_0-Conv2d_5, where the largest
// activations are) in tile_px windows with a 32-px halo (ops::TiledPrefix; the stem's receptive
// field is 43 px) and the rest whole: the same output up to float order.
// CPU fast path: Create on the CPU compiles the stem and the rest (backbone,
// prediction layers, box predictors) as two onednn::Programs (weights packed once; bias, the
// depthwise layers' batch norm as a per-channel scale/shift and the ReLU6 fused; activations
// NHWC); Forward runs them for a float32 CPU input (else, and after To() another device, the
// at:: path). The batch norms' scale/shift are computed per call (as the at:: path does).
// ResidentBytes() is what the copy holds (the packed weights replace the plain ones): fp32
// 22,402,300 bytes (DeviceBytes() + 0.8%), bf16 11,315,132 (the weights' half; biases, batch
// norm statistics and prior boxes fp32).
// Precision of the fast path: bf16 by default where the CPU has it natively (AVX512-BF16 or AMX;
// onednn::Bf16Native()), else fp32; FUSION_ONEDNN_PRECISION=ssd_mobilenetv1=fp32 chooses fp32.
// In bf16 the conv weights are held as bf16, activations bf16 between layers, input and output
// fp32: about half the fp32 CPU time at 1 thread (0.51x ORT's, fp32 1.03x). SSD has no numpy
// golden: its bf16 boxes are the fp32 ones on the test photos (IoU > 0.95, scores within 0.02;
// onednn_test.cc Bf16FastPath), and the pyramid (multiscale.h) finds the same faces in both on
// every recall test and bench/quality row, since its window packing keeps context around each
// proposal and its merge votes among near-tied boxes (docs/PERFORMANCE.md, "SSD in bf16 by
// default"). A copy built for another device is fp32 (onednn::Fp32Scope).
// Thread-safety: see FaceDetector.
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <utility>

#include "absl/status/statusor.h"
#include "models/catalogue/catalogue.h"
#include "models/faceapi/detector.h"
#include "models/faceapi/params.h"

namespace fusion::onednn {
class Program;
}

namespace fusion::faceapi {

class SsdMobilenetV1 : public FaceDetector {
 public:
  struct Options {
    float min_confidence = 0.5f;  // face-api's default
    float nms_iou = 0.5f;         // face-api's value
    int max_results = 100;
  };
  static constexpr char kModelName[] = "ssd_mobilenetv1";
  static constexpr int kInputSize = 512;
  ~SsdMobilenetV1() override;

  static absl::StatusOr<std::unique_ptr<SsdMobilenetV1>> Create(const tfjs::WeightMap& weights, Options options);
  static absl::StatusOr<std::unique_ptr<SsdMobilenetV1>> Load(const models::ModelCatalogue& catalogue,
                                                               Options options);

  // Returns {boxes [N,5118,4], scores [N,5118]} on the weights' device.
  // tile_px 0 = the stem in one piece.
  std::pair<at::Tensor, at::Tensor> Forward(const at::Tensor& x, int tile_px = 0) const;
  absl::StatusOr<std::vector<FaceBox>> Detect(const cv::Mat& rgb, int input_size = 0, int tile_px = 0,
                                              float min_score = 0) const override;
  int DefaultInputSize() const override { return kInputSize; }
  bool FreeInputSize() const override { return false; }
  DetectorTraits Traits() const override {
    DetectorTraits t = kSsdMobilenetV1Traits;
    t.min_score = options_.min_confidence;
    t.max_boxes = options_.max_results;
    return t;
  }

  void To(const c10::Device& device);
  uint64_t DeviceBytes() const { return param_bytes_; }
  uint64_t ResidentBytes() const;
  static InputContract Input() { return {{-1, 3, kInputSize, kInputSize}, "float32", "0..255", "RGB"}; }
  static constexpr bool kTileable = true;
  // Reduced precision (tests/gpu/reduced_precision_test.cc): the largest difference from fp32 on
  // the same device, in units of Forward()'s boxes (relative to the input square) and scores
  // (0..1). bf16 (CPU autocast) measured 0.0269 on grace_hopper_512x600.jpg; fp16 keeps 3 more
  // mantissa bits (~8x less rounding error), so its bound is bf16's measured figure until a GPU run
  // prints its own. fusiond runs this network at fp32 on every device (the manifest's
  // cuda_precision).
  static constexpr double kFp16Tolerance = 0.03, kBf16Tolerance = 0.06;

 private:
  static constexpr int kStemLayers = 5, kStemStride = 8, kStemHaloPx = 32;
  explicit SsdMobilenetV1(Options options);
  absl::Status Compile();  // the CPU fast path
  std::pair<at::Tensor, at::Tensor> Decode(const std::vector<at::Tensor>& enc, const std::vector<at::Tensor>& cls) const;
  at::Tensor Stem(const at::Tensor& x) const;          // [N,3,512,512] -> [N,256,64,64]
  at::Tensor Layer(const at::Tensor& x, int i) const;  // depthwise + pointwise layer i
  at::Tensor Pointwise(const at::Tensor& x, const std::string& prefix, int stride) const;
  at::Tensor Depthwise(const at::Tensor& x, const std::string& prefix, int stride) const;
  std::pair<at::Tensor, at::Tensor> BoxPredictor(const at::Tensor& x, int index) const;
  Params params_;
  const Options options_;
  uint64_t param_bytes_ = 0;
  std::unique_ptr<onednn::Program> stem_, head_;  // null: the at:: path
  std::vector<at::Tensor> BatchNormArgs(int first, int last) const;  // per call, layers first..last
};

}  // namespace fusion::faceapi
