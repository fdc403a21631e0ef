#include "models/faceapi/ssd_mobilenet_v1.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>

#include "models/common/exception_text.h"
#include "absl/strings/str_cat.h"
#include "models/faceapi/image.h"
#include "models/faceapi/ops.h"
#include "models/onednn/program.h"
#include "base/status_macros.h"

namespace fusion::faceapi {
namespace {
// The fast path's precision unless FUSION_ONEDNN_PRECISION says otherwise (program.h): bf16
// (fp32 where the CPU lacks native bf16). It halves SSD's CPU time and keeps its boxes on the test
// photos (onednn_test.cc Bf16FastPath). It was fp32 for a while because with the pyramid's
// proposal gating bf16 lost a face on a tile seam (PyramidRecall.AFaceOnATileSeamIsFoundWhole)
// and a 150-px face of the quality bench's grid; both were knife edges of the scan, not of bf16
// (a window packed up to its edge; a near-tie of two levels' scores picking the box), fixed in
// multiscale.cc (kProposalContextPx, Voted): both precisions now find the same faces.
constexpr onednn::Precision kFastPathPrecision = onednn::Precision::kBf16;
}  // namespace
namespace {

constexpr double kBnEpsilon = 0.0010000000474974513;  // face-api mobileNetV1.ts
// MobileNetV1 channels after conv_0..conv_13.
constexpr int64_t kBackbone[14] = {32, 64, 128, 128, 256, 256, 512, 512, 512, 512, 512, 512, 1024, 1024};
// Prediction/Conv2d_k_pointwise: (kernel, cin, cout), odd k are 3x3 stride 2.
constexpr int64_t kPrediction[8][3] = {{1, 1024, 256}, {3, 256, 512}, {1, 512, 128}, {3, 128, 256},
                                       {1, 256, 128},  {3, 128, 256}, {1, 256, 64},  {3, 64, 128}};
// Box predictor k: input channels and anchors per location.
constexpr int64_t kPredictorIn[6] = {512, 1024, 512, 256, 256, 128};
constexpr int64_t kAnchors[6] = {3, 6, 6, 6, 6, 6};

bool StrideTwo(int layer) { return layer == 2 || layer == 4 || layer == 6 || layer == 12; }

}  // namespace

absl::StatusOr<std::unique_ptr<SsdMobilenetV1>> SsdMobilenetV1::Create(const tfjs::WeightMap& w, Options options) {
  std::unique_ptr<SsdMobilenetV1> net(new SsdMobilenetV1(options));
  Params& p = net->params_;
  absl::Status s;
  const bool fast = onednn::Enabled();  // the CPU fast path packs the conv weights
  if (fast) p.KeepViews();
  s.Update(p.Take(w, "MobilenetV1/Conv2d_0_pointwise/weights", {3, 3, 3, 32}, Layout::kConv));
  s.Update(p.Take(w, "MobilenetV1/Conv2d_0_pointwise/convolution_bn_offset", {32}, Layout::kAsIs));
  for (int i = 1; i <= 13; ++i) {
    const int64_t cin = kBackbone[i - 1], cout = kBackbone[i];
    const std::string d = absl::StrCat("MobilenetV1/Conv2d_", i, "_depthwise");
    s.Update(p.Take(w, d + "/depthwise_weights", {3, 3, cin, 1}, Layout::kDepthwise));
    for (const char* bn : {"gamma", "beta", "moving_mean", "moving_variance"}) {
      s.Update(p.Take(w, absl::StrCat(d, "/BatchNorm/", bn), {cin}, Layout::kAsIs));
    }
    const std::string pw = absl::StrCat("MobilenetV1/Conv2d_", i, "_pointwise");
    s.Update(p.Take(w, pw + "/weights", {1, 1, cin, cout}, Layout::kConv));
    s.Update(p.Take(w, pw + "/convolution_bn_offset", {cout}, Layout::kAsIs));
  }
  for (int k = 0; k < 8; ++k) {
    const std::string pw = absl::StrCat("Prediction/Conv2d_", k, "_pointwise");
    const int64_t ks = kPrediction[k][0], cin = kPrediction[k][1], cout = kPrediction[k][2];
    s.Update(p.Take(w, pw + "/weights", {ks, ks, cin, cout}, Layout::kConv));
    s.Update(p.Take(w, pw + "/convolution_bn_offset", {cout}, Layout::kAsIs));
  }
  for (int k = 0; k < 6; ++k) {
    const std::string b = absl::StrCat("Prediction/BoxPredictor_", k);
    s.Update(p.Take(w, b + "/BoxEncodingPredictor/weights", {1, 1, kPredictorIn[k], kAnchors[k] * 4}, Layout::kConv));
    s.Update(p.Take(w, b + "/BoxEncodingPredictor/biases", {kAnchors[k] * 4}, Layout::kAsIs));
    s.Update(p.Take(w, b + "/ClassPredictor/weights", {1, 1, kPredictorIn[k], kAnchors[k] * 3}, Layout::kConv));
    s.Update(p.Take(w, b + "/ClassPredictor/biases", {kAnchors[k] * 3}, Layout::kAsIs));
  }
  s.Update(p.Take(w, "Output/extra_dim", {1, 5118, 4}, Layout::kAsIs));
  if (!s.ok()) return s;
  net->param_bytes_ = p.DeviceBytes();
  if (fast) {
    RETURN_IF_ERROR(net->Compile());
    p.MakeContiguous();
  }
  return net;
}

SsdMobilenetV1::SsdMobilenetV1(Options options) : options_(options) {}
SsdMobilenetV1::~SsdMobilenetV1() = default;

absl::Status SsdMobilenetV1::Compile() {
  using onednn::Activation;
  using onednn::Padding;
  const Params& p = params_;
  auto pointwise = [&](onednn::Program::Builder& b, int x, const std::string& prefix, int stride) {
    return b.Conv(x, {.name = prefix + "/weights", .weight = params_.Release(prefix + "/weights"),
                      .bias = p[prefix + "/convolution_bn_offset"], .stride = stride, .padding = Padding::kSame,
                      .act = Activation::kClip, .alpha = 6.f});
  };
  // The depthwise layers' batch norm as a per-channel scale/shift post-op, computed per call from
  // the statistics (BatchNormArgs; as the at:: path does), so nothing beyond them is resident.
  auto layer = [&](onednn::Program::Builder& b, int x, int i) {
    const std::string d = absl::StrCat("MobilenetV1/Conv2d_", i, "_depthwise");
    x = b.Conv(x, {.name = d + "/depthwise_weights", .weight = params_.Release(d + "/depthwise_weights"),
                   .stride = StrideTwo(i) ? 2 : 1, .depthwise = true, .padding = Padding::kSame,
                   .act = Activation::kClip, .alpha = 6.f, .affine_arg = 2 * (i <= kStemLayers ? i - 1 : i - 1 - kStemLayers)});
    return pointwise(b, x, absl::StrCat("MobilenetV1/Conv2d_", i, "_pointwise"), 1);
  };
  onednn::Program::Builder stem, head;
  const onednn::Precision precision = onednn::PrecisionFor(kModelName, kFastPathPrecision);
  stem.SetPrecision(precision);
  head.SetPrecision(precision);
  // The input normalisation of Stem() (x / 127.5 - 1), in the program: one pass.
  int x = pointwise(stem, stem.Normalize(stem.input(), at::full({3}, 127.5f), 127.5f),
                    "MobilenetV1/Conv2d_0_pointwise", 2);
  for (int i = 1; i <= kStemLayers; ++i) x = layer(stem, x, i);
  stem.MarkOutput(x);
  int y = head.input(), conv11 = -1;
  for (int i = kStemLayers + 1; i <= 13; ++i) {
    y = layer(head, y, i);
    if (i == 11) conv11 = y;
  }
  int feats[8];
  int f = y;
  for (int k = 0; k < 8; ++k) f = feats[k] = pointwise(head, f, absl::StrCat("Prediction/Conv2d_", k, "_pointwise"), k % 2 ? 2 : 1);
  const int inputs[6] = {conv11, y, feats[1], feats[3], feats[5], feats[7]};
  for (int k = 0; k < 6; ++k) {
    for (const char* kind : {"BoxEncodingPredictor", "ClassPredictor"}) {
      const std::string b = absl::StrCat("Prediction/BoxPredictor_", k, "/", kind);
      head.MarkOutput(head.Conv(inputs[k], {.name = b + "/weights", .weight = params_.Release(b + "/weights"), .bias = p[b + "/biases"]}));
    }
  }
  RETURN_IF_ERROR(params_.Adopt(std::move(stem).Build(3, kInputSize, kInputSize), &stem_));
  const int side = kInputSize / kStemStride;
  return params_.Adopt(std::move(head).Build(kBackbone[kStemLayers], side, side), &head_);
}

void SsdMobilenetV1::To(const c10::Device& device) { params_.To(device, {&stem_, &head_}); }

uint64_t SsdMobilenetV1::ResidentBytes() const {
  return params_.ResidentBytes({&stem_, &head_});
}

std::vector<at::Tensor> SsdMobilenetV1::BatchNormArgs(int first, int last) const {
  std::vector<at::Tensor> args;
  for (int i = first; i <= last; ++i) {
    const std::string d = absl::StrCat("MobilenetV1/Conv2d_", i, "_depthwise/BatchNorm/");
    const at::Tensor scale = params_[d + "gamma"] / at::sqrt(params_[d + "moving_variance"] + kBnEpsilon);
    args.push_back(scale);
    args.push_back(params_[d + "beta"] - params_[d + "moving_mean"] * scale);
  }
  return args;
}

absl::StatusOr<std::unique_ptr<SsdMobilenetV1>> SsdMobilenetV1::Load(const models::ModelCatalogue& catalogue,
                                                                     Options options) {
  ASSIGN_OR_RETURN(tfjs::WeightMap w, LoadCatalogueWeights(catalogue, kModelName));
  return Create(w, options);
}

at::Tensor SsdMobilenetV1::Pointwise(const at::Tensor& x, const std::string& prefix, int stride) const {
  return at::clamp(ops::Conv(x, params_[prefix + "/weights"], params_[prefix + "/convolution_bn_offset"], stride,
                             /*same=*/true), 0, 6);
}

at::Tensor SsdMobilenetV1::Depthwise(const at::Tensor& x, const std::string& d, int stride) const {
  const Params& p = params_;
  at::Tensor y = ops::Conv2d(ops::PadSame(x, 3, stride), p[d + "/depthwise_weights"], at::Tensor(), stride, x.size(1));
  const at::Tensor scale = p[d + "/BatchNorm/gamma"] / at::sqrt(p[d + "/BatchNorm/moving_variance"] + kBnEpsilon);
  const at::Tensor shift = p[d + "/BatchNorm/beta"] - p[d + "/BatchNorm/moving_mean"] * scale;
  return at::clamp(ops::ChannelAffine(y, scale, shift), 0, 6);
}

std::pair<at::Tensor, at::Tensor> SsdMobilenetV1::BoxPredictor(const at::Tensor& x, int k) const {
  const std::string b = absl::StrCat("Prediction/BoxPredictor_", k);
  const int64_t n = x.size(0);
  // TF reshapes NHWC outputs: location-major, then anchor, then coordinate/class.
  at::Tensor box = ops::Conv2d(x, params_[b + "/BoxEncodingPredictor/weights"], params_[b + "/BoxEncodingPredictor/biases"]);
  at::Tensor cls = ops::Conv2d(x, params_[b + "/ClassPredictor/weights"], params_[b + "/ClassPredictor/biases"]);
  return {box.permute({0, 2, 3, 1}).reshape({n, -1, 4}), cls.permute({0, 2, 3, 1}).reshape({n, -1, 3})};
}

// Conv2d_0 .. Conv2d_5: stride 8, where the activations are largest.
at::Tensor SsdMobilenetV1::Stem(const at::Tensor& input) const {
  if (stem_ && onednn::Usable(input)) return stem_->Run(input, BatchNormArgs(1, kStemLayers))[0];  // normalises too
  at::Tensor x = Pointwise(input / 127.5 - 1.0, "MobilenetV1/Conv2d_0_pointwise", 2);
  for (int i = 1; i <= kStemLayers; ++i) x = Layer(x, i);
  return x;
}

at::Tensor SsdMobilenetV1::Layer(const at::Tensor& x, int i) const {
  return Pointwise(Depthwise(x, absl::StrCat("MobilenetV1/Conv2d_", i, "_depthwise"), StrideTwo(i) ? 2 : 1),
                   absl::StrCat("MobilenetV1/Conv2d_", i, "_pointwise"), 1);
}

std::pair<at::Tensor, at::Tensor> SsdMobilenetV1::Forward(const at::Tensor& input, int tile_px) const {
  at::Tensor x = tile_px > 0 ? ops::TiledPrefix(input, [this](const at::Tensor& t) { return Stem(t); }, kStemStride,
                                                kStemHaloPx, tile_px)
                             : Stem(input);
  if (head_ && onednn::Usable(x)) {
    const std::vector<at::Tensor> outs = head_->Run(x, BatchNormArgs(kStemLayers + 1, 13));
    std::vector<at::Tensor> enc, cls;
    const int64_t n = x.size(0);
    for (int k = 0; k < 6; ++k) {  // TF reshapes NHWC outputs (see BoxPredictor)
      enc.push_back(outs[2 * k].permute({0, 2, 3, 1}).reshape({n, -1, 4}));
      cls.push_back(outs[2 * k + 1].permute({0, 2, 3, 1}).reshape({n, -1, 3}));
    }
    return Decode(enc, cls);
  }
  at::Tensor conv11;
  for (int i = kStemLayers + 1; i <= 13; ++i) {
    x = Layer(x, i);
    if (i == 11) conv11 = x;
  }
  at::Tensor feats[8];
  at::Tensor f = x;
  for (int k = 0; k < 8; ++k) f = feats[k] = Pointwise(f, absl::StrCat("Prediction/Conv2d_", k, "_pointwise"), k % 2 ? 2 : 1);
  const at::Tensor* inputs[6] = {&conv11, &x, &feats[1], &feats[3], &feats[5], &feats[7]};
  std::vector<at::Tensor> enc, cls;
  for (int k = 0; k < 6; ++k) {
    auto [e, c] = BoxPredictor(*inputs[k], k);
    enc.push_back(e);
    cls.push_back(c);
  }
  return Decode(enc, cls);
}

std::pair<at::Tensor, at::Tensor> SsdMobilenetV1::Decode(const std::vector<at::Tensor>& enc,
                                                         const std::vector<at::Tensor>& cls) const {
  const at::Tensor t = at::cat(enc, 1);                       // [N,5118,4]: ty, tx, th, tw
  const at::Tensor prior = params_["Output/extra_dim"];       // [1,5118,4]: ymin, xmin, ymax, xmax
  const at::Tensor ph = prior.select(2, 2) - prior.select(2, 0), pw = prior.select(2, 3) - prior.select(2, 1);
  const at::Tensor pcy = prior.select(2, 0) + ph / 2, pcx = prior.select(2, 1) + pw / 2;
  const at::Tensor cy = t.select(2, 0) / 10 * ph + pcy, cx = t.select(2, 1) / 10 * pw + pcx;
  const at::Tensor hh = at::exp(t.select(2, 2) / 5) * ph / 2, hw = at::exp(t.select(2, 3) / 5) * pw / 2;
  at::Tensor boxes = at::stack({cy - hh, cx - hw, cy + hh, cx + hw}, 2);
  at::Tensor scores = at::sigmoid(at::cat(cls, 1).select(2, 1));
  return {boxes, scores};
}

absl::StatusOr<std::vector<FaceBox>> SsdMobilenetV1::Detect(const cv::Mat& rgb, int input_size, int tile_px,
                                                            float min_score) const {
  if (rgb.empty() || rgb.type() != CV_8UC3) {
    return absl::InvalidArgumentError("ssd_mobilenetv1: input must be a non-empty CV_8UC3 RGB image");
  }
  if (input_size != 0 && input_size != kInputSize) {
    return absl::InvalidArgumentError(absl::StrCat("ssd_mobilenetv1: input size is fixed at 512, not ", input_size));
  }
  try {
    auto [boxes_d, scores_d] = Forward(ToBatchTensor(rgb, kInputSize, /*center=*/false).to(params_.device()), tile_px);
    const at::Tensor boxes = boxes_d[0].to(at::kCPU).contiguous(), scores = scores_d[0].to(at::kCPU).contiguous();
    const auto b = boxes.accessor<float, 2>();
    const auto s = scores.accessor<float, 1>();
    // Relative-to-square -> relative-to-image factors (face-api padX/padY), then pixels.
    const double scale = static_cast<double>(kInputSize) / std::max(rgb.cols, rgb.rows);
    const double fx = kInputSize / std::round(rgb.cols * scale) * rgb.cols;
    const double fy = kInputSize / std::round(rgb.rows * scale) * rgb.rows;
    const float threshold = min_score > 0 ? min_score : options_.min_confidence;
    std::vector<FaceBox> cand;
    for (int64_t i = 0; i < boxes.size(0); ++i) {
      if (s[i] <= threshold) continue;
      const double top = std::max(0.f, b[i][0]) * fy, bottom = std::min(1.f, b[i][2]) * fy;
      const double left = std::max(0.f, b[i][1]) * fx, right = std::min(1.f, b[i][3]) * fx;
      cand.push_back({static_cast<float>(left), static_cast<float>(top), static_cast<float>(right - left),
                      static_cast<float>(bottom - top), s[i]});
    }
    std::vector<FaceBox> kept = Nms(std::move(cand), options_.nms_iou);
    if (static_cast<int>(kept.size()) > options_.max_results) kept.resize(options_.max_results);
    return kept;
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat(
        "ssd_mobilenetv1", tile_px > 0 ? absl::StrCat(" in ", tile_px, "-px tiles") : "", ": ", ExceptionText(e)));
  }
}

}  // namespace fusion::faceapi
