#include "models/faceapi/tiny_face_detector.h"

#include <ATen/ATen.h>

#include <cmath>
#include <limits>

#include "models/common/exception_text.h"
#include "absl/strings/str_cat.h"
#include "models/faceapi/image.h"
#include "models/faceapi/ops.h"
#include "models/onednn/program.h"
#include "base/status_macros.h"

namespace fusion::faceapi {
namespace {
// The fast path's precision unless FUSION_ONEDNN_PRECISION says otherwise (program.h): bf16,
// the faster of fp32 and bf16 here, within the goldens' tolerances (docs/PERFORMANCE.md;
// tests/models/onednn_test.cc Bf16FastPath). fp32 where the CPU has no native bf16.
constexpr onednn::Precision kFastPathPrecision = onednn::Precision::kBf16;
}  // namespace
namespace {

constexpr float kAnchors[5][2] = {{1.603231f, 2.094468f}, {6.041143f, 7.080126f}, {2.882459f, 3.518061f},
                                  {4.266906f, 5.178857f}, {9.041765f, 10.66308f}};
constexpr int kChannels[6] = {16, 32, 64, 128, 256, 512};

float Sigmoid(float v) { return 1.f / (1.f + std::exp(-v)); }

}  // namespace

absl::StatusOr<std::unique_ptr<TinyFaceDetector>> TinyFaceDetector::Create(const tfjs::WeightMap& w,
                                                                           Options options) {
  if (options.input_size <= 0 || options.input_size % 32 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("tiny_face_detector: input_size ", options.input_size, " is not a multiple of 32"));
  }
  std::unique_ptr<TinyFaceDetector> net(new TinyFaceDetector(options));
  Params& p = net->params_;
  absl::Status s;
  const bool fast = onednn::Enabled();  // the CPU fast path packs the conv weights
  if (fast) p.KeepViews();
  s.Update(p.Take(w, "conv0/filters", {3, 3, 3, 16}, Layout::kConv));
  s.Update(p.Take(w, "conv0/bias", {16}, Layout::kAsIs));
  for (int i = 1; i <= 5; ++i) {
    const int64_t cin = kChannels[i - 1], cout = kChannels[i];
    const std::string c = absl::StrCat("conv", i);
    s.Update(p.Take(w, c + "/depthwise_filter", {3, 3, cin, 1}, Layout::kDepthwise));
    s.Update(p.Take(w, c + "/pointwise_filter", {1, 1, cin, cout}, Layout::kConv));
    s.Update(p.Take(w, c + "/bias", {cout}, Layout::kAsIs));
  }
  s.Update(p.Take(w, "conv8/filters", {1, 1, 512, 25}, Layout::kConv));
  s.Update(p.Take(w, "conv8/bias", {25}, Layout::kAsIs));
  if (!s.ok()) return s;
  net->param_bytes_ = p.DeviceBytes();
  if (fast) {
    RETURN_IF_ERROR(net->Compile());
    p.MakeContiguous();
  }
  return net;
}

TinyFaceDetector::TinyFaceDetector(Options options) : options_(options) {}
TinyFaceDetector::~TinyFaceDetector() = default;

absl::Status TinyFaceDetector::Compile() {
  using onednn::Activation;
  const Params& p = params_;
  auto block = [&](onednn::Program::Builder& b, int x, int i) {
    const std::string c = absl::StrCat("conv", i);
    x = b.Conv(x, {.name = c + "/depthwise_filter", .weight = params_.Release(c + "/depthwise_filter"), .depthwise = true,
                   .padding = onednn::Padding::kExplicit, .pad = 1});
    x = b.Conv(x, {.name = c + "/pointwise_filter", .weight = params_.Release(c + "/pointwise_filter"), .bias = p[c + "/bias"],
                   .act = Activation::kLeakyRelu, .alpha = 0.1f});
    // i < 5: 2x2/2 "SAME" (ceil_mode); 5: 2x2/1 "SAME" (a -inf row/column at the bottom/right).
    return b.Pool(x, i < 5 ? onednn::PoolSpec{.k = 2, .stride = 2, .ceil_mode = true}
                           : onednn::PoolSpec{.k = 2, .stride = 1, .same = true});
  };
  onednn::Program::Builder stem, head;
  const onednn::Precision precision = onednn::PrecisionFor(kModelName, kFastPathPrecision);
  stem.SetPrecision(precision);
  head.SetPrecision(precision);
  // The input normalisation of Stem(), in the program: one pass instead of two at:: ops.
  const int normalized = stem.Normalize(stem.input(), at::tensor({117.001f, 114.697f, 97.404f}), 255.f);
  int x = stem.Conv(normalized, {.name = "conv0/filters", .weight = params_.Release("conv0/filters"), .bias = p["conv0/bias"],
                                   .act = Activation::kLeakyRelu, .alpha = 0.1f});
  x = stem.Pool(x, {.k = 2, .stride = 2, .ceil_mode = true});
  for (int i = 1; i <= 2; ++i) x = block(stem, x, i);
  stem.MarkOutput(x);
  int y = head.input();
  for (int i = 3; i <= 5; ++i) y = block(head, y, i);
  head.MarkOutput(head.Conv(y, {.name = "conv8/filters", .weight = params_.Release("conv8/filters"), .bias = p["conv8/bias"]}));
  const int s = options_.input_size;
  RETURN_IF_ERROR(params_.Adopt(std::move(stem).Build(3, s, s), &stem_));
  return params_.Adopt(std::move(head).Build(kChannels[2], s / kStemStride, s / kStemStride), &head_);
}

void TinyFaceDetector::To(const c10::Device& device) { params_.To(device, {&stem_, &head_}); }

std::string TinyFaceDetector::FastPathKernels(int s) const {
  if (!stem_) return "";
  return stem_->Describe({1, 3, s, s}) + " | " + head_->Describe({1, kChannels[2], s / kStemStride, s / kStemStride});
}

uint64_t TinyFaceDetector::ResidentBytes() const {
  return params_.ResidentBytes({&stem_, &head_});
}

absl::StatusOr<std::unique_ptr<TinyFaceDetector>> TinyFaceDetector::Load(
    const models::ModelCatalogue& catalogue, Options options) {
  ASSIGN_OR_RETURN(tfjs::WeightMap w, LoadCatalogueWeights(catalogue, kModelName));
  return Create(w, options);
}

at::Tensor TinyFaceDetector::Block(const at::Tensor& x, int i) const {
  const Params& p = params_;
  const std::string c = absl::StrCat("conv", i);
  at::Tensor y = at::constant_pad_nd(x, {1, 1, 1, 1}, 0.0);
  y = ops::Conv2d(y, p[c + "/depthwise_filter"], at::Tensor(), 1, y.size(1));
  y = at::leaky_relu(ops::Conv2d(y, p[c + "/pointwise_filter"], p[c + "/bias"]), 0.1);
  if (i < 5) return ops::MaxPool(y, 2, 2, /*ceil_mode=*/true);
  // 2x2 stride 1 "SAME": one -inf row/column at the bottom/right
  return ops::MaxPool(ops::PadSame(y, 2, 1, -std::numeric_limits<double>::infinity()), 2, 1);
}

// conv0 .. conv2 with their pools: stride 8, where the activations are largest.
at::Tensor TinyFaceDetector::Stem(const at::Tensor& input) const {
  if (stem_ && onednn::Usable(input)) return stem_->Run(input)[0];  // normalises too (Compile)
  const at::Tensor mean = at::tensor({117.001f, 114.697f, 97.404f}, input.options()).view({1, 3, 1, 1});
  at::Tensor x = (input - mean) / 255.f;
  x = at::leaky_relu(ops::Conv(x, params_["conv0/filters"], params_["conv0/bias"], 1, /*same=*/false), 0.1);
  // 2x2/2 "SAME" max pool: pads bottom/right with -inf on odd sizes, which ceil_mode reproduces.
  x = ops::MaxPool(x, 2, 2, /*ceil_mode=*/true);
  for (int i = 1; i <= 2; ++i) x = Block(x, i);
  return x;
}

at::Tensor TinyFaceDetector::Forward(const at::Tensor& input, int tile_px) const {
  at::Tensor x = tile_px > 0 ? ops::TiledPrefix(input, [this](const at::Tensor& t) { return Stem(t); }, kStemStride,
                                                kStemHaloPx, tile_px)
                             : Stem(input);
  if (head_ && onednn::Usable(x)) return head_->Run(x)[0].contiguous();
  for (int i = 3; i <= 5; ++i) x = Block(x, i);
  return ops::Conv2d(x, params_["conv8/filters"], params_["conv8/bias"]);
}

std::vector<FaceBox> DecodeTinyYolo(const at::Tensor& out_any, int image_w, int image_h, int input_size,
                                    float score_threshold) {
  const at::Tensor out = out_any.to(at::kCPU).contiguous();
  const int64_t g = out.size(2);
  const auto a = out.accessor<float, 4>();
  const double scale = static_cast<double>(input_size) / std::max(image_w, image_h);
  const double cfx = input_size / std::round(image_w * scale);
  const double cfy = input_size / std::round(image_h * scale);
  std::vector<FaceBox> boxes;
  for (int64_t r = 0; r < g; ++r) {
    for (int64_t c = 0; c < g; ++c) {
      for (int k = 0; k < 5; ++k) {
        const float score = Sigmoid(a[0][k * 5 + 4][r][c]);
        if (score <= score_threshold) continue;
        const double cx = (c + Sigmoid(a[0][k * 5 + 0][r][c])) / g * cfx;
        const double cy = (r + Sigmoid(a[0][k * 5 + 1][r][c])) / g * cfy;
        const double bw = std::exp(a[0][k * 5 + 2][r][c]) * kAnchors[k][0] / g * cfx;
        const double bh = std::exp(a[0][k * 5 + 3][r][c]) * kAnchors[k][1] / g * cfy;
        boxes.push_back({static_cast<float>(cx - bw / 2), static_cast<float>(cy - bh / 2),
                         static_cast<float>(bw), static_cast<float>(bh), score});
      }
    }
  }
  return boxes;
}

absl::StatusOr<std::vector<FaceBox>> TinyFaceDetector::Detect(const cv::Mat& rgb, int input_size, int tile_px,
                                                              float min_score) const {
  const int size = input_size == 0 ? options_.input_size : input_size;
  if (rgb.empty() || rgb.type() != CV_8UC3) {
    return absl::InvalidArgumentError("tiny_face_detector: input must be a non-empty CV_8UC3 RGB image");
  }
  if (size <= 0 || size % 32 != 0) {
    return absl::InvalidArgumentError(absl::StrCat("tiny_face_detector: input size ", size,
                                                   " is not a positive multiple of 32"));
  }
  try {
    at::Tensor out = Forward(ToBatchTensor(rgb, size, /*center=*/false).to(params_.device()), tile_px);
    std::vector<FaceBox> rel = DecodeTinyYolo(out, rgb.cols, rgb.rows, size,
                                                min_score > 0 ? min_score : options_.score_threshold);
    std::vector<FaceBox> kept = Nms(std::move(rel), options_.nms_iou);
    for (FaceBox& b : kept) {
      b.x *= rgb.cols; b.w *= rgb.cols;
      b.y *= rgb.rows; b.h *= rgb.rows;
    }
    return kept;
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("tiny_face_detector at input ", size,
                                            tile_px > 0 ? absl::StrCat(" in ", tile_px, "-px tiles") : "", ": ",
                                            ExceptionText(e)));
  }
}

InputContract TinyFaceDetector::Input() { return {{-1, 3, -1, -1}, "float32", "0..255", "RGB"}; }

}  // namespace fusion::faceapi
