#include "models/faceapi/face_landmark_68.h"

#include <ATen/ATen.h>

#include <cmath>

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

absl::StatusOr<std::unique_ptr<FaceLandmark68Net>> FaceLandmark68Net::Create(const tfjs::WeightMap& w) {
  std::unique_ptr<FaceLandmark68Net> net(new FaceLandmark68Net());
  Params& p = net->params_;
  absl::Status s;
  const bool fast = onednn::Enabled();  // the CPU fast path packs the conv weights
  if (fast) p.KeepViews();
  const int64_t ch[5] = {3, 32, 64, 128, 256};
  for (int k = 0; k < 4; ++k) {
    const std::string d = absl::StrCat("dense", k);
    const int64_t cin = ch[k], cout = ch[k + 1];
    if (k == 0) {
      s.Update(p.Take(w, d + "/conv0/filters", {3, 3, cin, cout}, Layout::kConv));
      s.Update(p.Take(w, d + "/conv0/bias", {cout}, Layout::kAsIs));
    }
    for (int j = k == 0 ? 1 : 0; j < 4; ++j) {
      const std::string c = absl::StrCat(d, "/conv", j);
      const int64_t in = j == 0 ? cin : cout;
      s.Update(p.Take(w, c + "/depthwise_filter", {3, 3, in, 1}, Layout::kDepthwise));
      s.Update(p.Take(w, c + "/pointwise_filter", {1, 1, in, cout}, Layout::kConv));
      s.Update(p.Take(w, c + "/bias", {cout}, Layout::kAsIs));
    }
  }
  s.Update(p.Take(w, "fc/weights", {256, 136}, Layout::kLinear));
  s.Update(p.Take(w, "fc/bias", {136}, Layout::kAsIs));
  if (!s.ok()) return s;
  net->param_bytes_ = p.DeviceBytes();
  if (fast) {
    RETURN_IF_ERROR(net->Compile());
    p.MakeContiguous();
  }
  return net;
}

FaceLandmark68Net::FaceLandmark68Net() = default;
FaceLandmark68Net::~FaceLandmark68Net() = default;

absl::Status FaceLandmark68Net::Compile() {
  using onednn::Activation;
  using onednn::Padding;
  const Params& p = params_;
  onednn::Program::Builder b;
  b.SetPrecision(onednn::PrecisionFor(kModelName, kFastPathPrecision));
  // Separable conv (TF "SAME") + bias, [+ sum in the summand's buffer], [ReLU].
  auto sep = [&](int x, const std::string& c, int stride, bool relu, int sum) {
    x = b.Conv(x, {.name = c + "/depthwise_filter", .weight = params_.Release(c + "/depthwise_filter"), .stride = stride,
                   .depthwise = true, .padding = Padding::kSame});
    return b.Conv(x, {.name = c + "/pointwise_filter", .weight = params_.Release(c + "/pointwise_filter"), .bias = p[c + "/bias"],
                      .act = relu ? Activation::kRelu : Activation::kNone, .sum = sum});
  };
  // The input normalisation of Forward(), in the program: one pass instead of two at:: ops.
  int x = b.Normalize(b.input(), at::tensor({122.782f, 117.001f, 104.298f}), 255.f);
  for (int k = 0; k < 4; ++k) {
    const std::string d = absl::StrCat("dense", k);
    // o1 = relu(conv0); s2 = o1 + o2; s3 = s2 + o3; out = relu(s3 + o4), o_j = sep(relu(s_j)).
    const int o1 = k == 0 ? b.Conv(x, {.name = d + "/conv0/filters", .weight = params_.Release(d + "/conv0/filters"),
                                       .bias = p[d + "/conv0/bias"], .stride = 2, .padding = Padding::kSame,
                                       .act = Activation::kRelu})
                          : sep(x, d + "/conv0", 2, true, -1);
    const int s2 = sep(o1, d + "/conv1", 1, false, o1);
    const int s3 = sep(b.Relu(s2), d + "/conv2", 1, false, s2);
    x = sep(b.Relu(s3), d + "/conv3", 1, true, s3);
  }
  b.MarkOutput(b.Pool(x, {.max = false, .k = 7, .stride = 2}));  // VALID: 7x7 -> 1x1
  return params_.Adopt(std::move(b).Build(3, kInputSize, kInputSize), &program_);
}

void FaceLandmark68Net::To(const c10::Device& device) { params_.To(device, {&program_}); }

uint64_t FaceLandmark68Net::ResidentBytes() const {
  return params_.ResidentBytes({&program_});
}

absl::StatusOr<std::unique_ptr<FaceLandmark68Net>> FaceLandmark68Net::Load(
    const models::ModelCatalogue& catalogue) {
  ASSIGN_OR_RETURN(tfjs::WeightMap w, LoadCatalogueWeights(catalogue, kModelName));
  return Create(w);
}

at::Tensor FaceLandmark68Net::DenseBlock(const at::Tensor& x, const std::string& d, bool first) const {
  const Params& p = params_;
  auto sep = [&](const at::Tensor& in, const std::string& c, int stride) {
    return ops::SeparableConv(in, p[d + c + "/depthwise_filter"], p[d + c + "/pointwise_filter"],
                              p[d + c + "/bias"], stride);
  };
  at::Tensor o1 = at::relu(first ? ops::Conv(x, p[d + "/conv0/filters"], p[d + "/conv0/bias"], 2, true)
                                 : sep(x, "/conv0", 2));
  at::Tensor o2 = sep(o1, "/conv1", 1);
  at::Tensor o3 = sep(at::relu(o1 + o2), "/conv2", 1);
  at::Tensor o4 = sep(at::relu(o1 + o2 + o3), "/conv3", 1);
  return at::relu(o1 + o2 + o3 + o4);
}

at::Tensor FaceLandmark68Net::Forward(const at::Tensor& input) const {
  if (program_ && onednn::Usable(input)) {  // normalises too (Compile)
    return at::linear(program_->Run(input)[0].flatten(1), params_["fc/weights"], params_["fc/bias"]);
  }
  const at::Tensor mean = at::tensor({122.782f, 117.001f, 104.298f}, input.options()).view({1, 3, 1, 1});
  at::Tensor x = (input - mean) / 255.f;
  x = DenseBlock(x, "dense0", true);
  for (int k = 1; k < 4; ++k) x = DenseBlock(x, absl::StrCat("dense", k), false);
  x = at::avg_pool2d(x, {7, 7}, {2, 2});  // VALID: 7x7 -> 1x1
  return at::linear(x.flatten(1), params_["fc/weights"], params_["fc/bias"]);
}

absl::StatusOr<Landmarks68> FaceLandmark68Net::Detect(const cv::Mat& rgb, const FaceBox& box) const {
  Point origin;
  cv::Mat face = CropBox(rgb, box, &origin);
  if (face.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("face_landmark_68: box (", box.x, ",", box.y, " ",
                                                   box.w, "x", box.h, ") lies outside the image"));
  }
  at::Tensor out;
  try {
    out = Forward(ToBatchTensor(face, kInputSize, /*center=*/true).to(params_.device())).to(at::kCPU);
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("face_landmark_68: ", ExceptionText(e)));
  }
  // postProcess: undo the centred padding of the crop, then scale to crop pixels.
  const double w = face.cols, h = face.rows, s = kInputSize / std::max(w, h);
  const double iw = w * s, ih = h * s;
  const double pad_x = iw < ih ? std::abs(iw - ih) / 2 : 0, pad_y = ih < iw ? std::abs(iw - ih) / 2 : 0;
  const auto a = out.accessor<float, 2>();
  Landmarks68 pts;
  for (int i = 0; i < 68; ++i) {
    pts[i].x = static_cast<float>((a[0][2 * i] * kInputSize - pad_x) / iw * w + origin.x);
    pts[i].y = static_cast<float>((a[0][2 * i + 1] * kInputSize - pad_y) / ih * h + origin.y);
  }
  return pts;
}

}  // namespace fusion::faceapi
