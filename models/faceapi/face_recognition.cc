#include "models/faceapi/face_recognition.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include <opencv2/imgproc.hpp>

#include "models/common/exception_text.h"
#include "absl/strings/str_cat.h"
#include "models/faceapi/align.h"
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

struct Block {
  const char* name;
  int64_t cin, cout;
  bool down;
};
// The ResNet-29 sequence after conv32_down + max pool (face-api faceRecognitionNet).
constexpr Block kBlocks[] = {
    {"conv32_1", 32, 32, false},      {"conv32_2", 32, 32, false},     {"conv32_3", 32, 32, false},
    {"conv64_down", 32, 64, true},    {"conv64_1", 64, 64, false},     {"conv64_2", 64, 64, false},
    {"conv64_3", 64, 64, false},      {"conv128_down", 64, 128, true}, {"conv128_1", 128, 128, false},
    {"conv128_2", 128, 128, false},   {"conv256_down", 128, 256, true}, {"conv256_1", 256, 256, false},
    {"conv256_2", 256, 256, false},   {"conv256_down_out", 256, 256, true}};

absl::Status TakeConvLayer(Params& p, const tfjs::WeightMap& w, const std::string& prefix, int64_t k,
                           int64_t cin, int64_t cout) {
  absl::Status s;
  s.Update(p.Take(w, prefix + "/conv/filters", {k, k, cin, cout}, Layout::kConv));
  s.Update(p.Take(w, prefix + "/conv/bias", {cout}, Layout::kAsIs));
  s.Update(p.Take(w, prefix + "/scale/weights", {cout}, Layout::kAsIs));
  s.Update(p.Take(w, prefix + "/scale/biases", {cout}, Layout::kAsIs));
  return s;
}

}  // namespace

float DescriptorDistance(const Descriptor& a, const Descriptor& b) {
  double sum = 0;
  for (size_t i = 0; i < a.size(); ++i) sum += (a[i] - b[i]) * static_cast<double>(a[i] - b[i]);
  return static_cast<float>(std::sqrt(sum));
}

absl::StatusOr<std::unique_ptr<FaceRecognitionNet>> FaceRecognitionNet::Create(const tfjs::WeightMap& w) {
  std::unique_ptr<FaceRecognitionNet> net(new FaceRecognitionNet());
  Params& p = net->params_;
  const bool fast = onednn::Enabled();  // the CPU fast path packs the conv weights
  if (fast) p.KeepViews();
  absl::Status s = TakeConvLayer(p, w, "conv32_down", 7, 3, 32);
  for (const Block& b : kBlocks) {
    s.Update(TakeConvLayer(p, w, absl::StrCat(b.name, "/conv1"), 3, b.cin, b.cout));
    s.Update(TakeConvLayer(p, w, absl::StrCat(b.name, "/conv2"), 3, b.cout, b.cout));
  }
  s.Update(p.Take(w, "fc", {256, 128}, Layout::kAsIs));  // used as x @ fc
  if (!s.ok()) return s;
  net->param_bytes_ = p.DeviceBytes();
  if (fast) {
    RETURN_IF_ERROR(net->Compile());
    p.MakeContiguous();
  }
  return net;
}

FaceRecognitionNet::FaceRecognitionNet() = default;
FaceRecognitionNet::~FaceRecognitionNet() = default;

absl::Status FaceRecognitionNet::Compile() {
  using onednn::Activation;
  using onednn::Padding;
  const Params& p = params_;
  onednn::Program::Builder b;
  b.SetPrecision(onednn::PrecisionFor(kModelName, kFastPathPrecision));
  // ConvLayer: conv + bias, then * scale + shift (the scale layer), [+ sum], [ReLU].
  auto conv = [&](int x, const std::string& prefix, int stride, bool relu, bool same, int sum = -1) {
    return b.Conv(x, {.name = prefix + "/conv/filters", .weight = params_.Release(prefix + "/conv/filters"),
                      .bias = p[prefix + "/conv/bias"], .scale = p[prefix + "/scale/weights"],
                      .shift = p[prefix + "/scale/biases"], .stride = stride,
                      .padding = same ? Padding::kSame : Padding::kValid,
                      .act = relu ? Activation::kRelu : Activation::kNone, .sum = sum});
  };
  int x = conv(b.input(), "conv32_down", 2, true, false);
  x = b.Pool(x, {.k = 3, .stride = 2});
  for (const Block& blk : kBlocks) {
    const std::string n = blk.name;
    if (!blk.down) {  // relu(conv2(conv1(x)) + x): conv2 adds x in x's buffer
      x = conv(conv(x, n + "/conv1", 1, true, true), n + "/conv2", 1, true, true, /*sum=*/x);
    } else {
      const int o = conv(conv(x, n + "/conv1", 2, true, false), n + "/conv2", 1, false, true);
      x = b.ResidualDown(o, b.Pool(x, {.max = false, .k = 2, .stride = 2}));
    }
  }
  b.MarkOutput(x);
  return params_.Adopt(std::move(b).Build(3, kInputSize, kInputSize), &program_);
}

void FaceRecognitionNet::To(const c10::Device& device) { params_.To(device, {&program_}); }

uint64_t FaceRecognitionNet::ResidentBytes() const {
  return params_.ResidentBytes({&program_});
}

absl::StatusOr<std::unique_ptr<FaceRecognitionNet>> FaceRecognitionNet::Load(
    const models::ModelCatalogue& catalogue) {
  ASSIGN_OR_RETURN(tfjs::WeightMap w, LoadCatalogueWeights(catalogue, kModelName));
  return Create(w);
}

at::Tensor FaceRecognitionNet::ConvLayer(const at::Tensor& x, const std::string& prefix, int stride,
                                         bool relu, bool same) const {
  const Params& p = params_;
  at::Tensor y = ops::Conv(x, p[prefix + "/conv/filters"], p[prefix + "/conv/bias"], stride, same);
  y = ops::ChannelAffine(y, p[prefix + "/scale/weights"], p[prefix + "/scale/biases"]);
  return relu ? at::relu(y) : y;
}

at::Tensor FaceRecognitionNet::Residual(const at::Tensor& x, const std::string& prefix) const {
  at::Tensor o = ConvLayer(x, prefix + "/conv1", 1, true, true);
  o = ConvLayer(o, prefix + "/conv2", 1, false, true);
  return at::relu(o + x);
}

at::Tensor FaceRecognitionNet::ResidualDown(const at::Tensor& x, const std::string& prefix) const {
  at::Tensor o = ConvLayer(x, prefix + "/conv1", 2, true, /*same=*/false);
  o = ConvLayer(o, prefix + "/conv2", 1, false, true);
  at::Tensor pooled = at::avg_pool2d(x, {2, 2}, {2, 2});
  // dlib's shortcut: the pooled input can be one larger than the strided-VALID branch; the
  // branch then gets a zero row at the bottom and a zero column at the right.
  if (pooled.size(2) != o.size(2)) o = at::constant_pad_nd(o, {0, 1, 0, 1}, 0.0);
  if (pooled.size(1) != o.size(1)) pooled = at::cat({pooled, at::zeros_like(pooled)}, 1);
  return at::relu(pooled + o);
}

at::Tensor FaceRecognitionNet::Forward(const at::Tensor& input) const {
  const at::Tensor mean = at::tensor({122.782f, 117.001f, 104.298f}, input.options()).view({1, 3, 1, 1});
  at::Tensor x = (input - mean) / 255.f;
  if (program_ && onednn::Usable(x)) return at::matmul(program_->Run(x)[0].mean({2, 3}), params_["fc"]);
  x = ConvLayer(x, "conv32_down", 2, true, /*same=*/false);
  x = ops::MaxPool(x, 3, 2);
  for (const Block& b : kBlocks) x = b.down ? ResidualDown(x, b.name) : Residual(x, b.name);
  return at::matmul(x.mean({2, 3}), params_["fc"]);
}

namespace {

// The net was trained on dlib's axis-aligned crops of upright faces: a head rolled by more than
// kMaxUprightRollDeg is first rotated upright about its eye midpoint (bilinear; black beyond the
// image, as the axis-aligned crop is clipped). Below it the crop is face-api's own, so the
// descriptors of near-upright faces stay equal to the numpy reference's. Measured on Grace
// rolled by -30 / +30 deg: distance to her upright descriptor 0.536 / 0.550 -> 0.124 / 0.124
// (faceapi_test RolledHeadIsTheSamePersonAsUpright).
constexpr double kMaxUprightRollDeg = 10.0;

// `pts` with the eye line horizontal and the window of `rgb` they now index, or the inputs
// unchanged when the roll is under kMaxUprightRollDeg.
std::pair<cv::Mat, Landmarks68> Upright(const cv::Mat& rgb, const Landmarks68& pts) {
  Point l{0, 0}, r{0, 0};
  for (int i = 0; i < 6; ++i) {
    l = {l.x + pts[36 + i].x / 6, l.y + pts[36 + i].y / 6};
    r = {r.x + pts[42 + i].x / 6, r.y + pts[42 + i].y / 6};
  }
  const double deg = std::atan2(r.y - l.y, r.x - l.x) * 180.0 / M_PI;
  if (std::abs(deg) <= kMaxUprightRollDeg) return {rgb, pts};
  const FaceBox box = DlibAlignBox(pts);
  const cv::Point2f mid((l.x + r.x) / 2, (l.y + r.y) / 2);
  const float half = 1.5f * std::max(box.w, box.h);  // the rotated crop stays inside
  const cv::Rect window = cv::Rect(cv::Point(mid.x - half, mid.y - half), cv::Point(mid.x + half, mid.y + half)) &
                          cv::Rect(0, 0, rgb.cols, rgb.rows);
  if (window.empty()) return {rgb, pts};
  // Positive angles turn counter-clockwise on screen: that levels an eye line at +deg.
  const cv::Mat m = cv::getRotationMatrix2D(mid - cv::Point2f(window.tl()), deg, 1.0);
  cv::Mat out;
  cv::warpAffine(rgb(window), out, m, window.size(), cv::INTER_LINEAR, cv::BORDER_CONSTANT);
  Landmarks68 turned;
  for (size_t i = 0; i < pts.size(); ++i) {
    const double x = pts[i].x - window.x, y = pts[i].y - window.y;
    turned[i] = {static_cast<float>(m.at<double>(0, 0) * x + m.at<double>(0, 1) * y + m.at<double>(0, 2)),
                 static_cast<float>(m.at<double>(1, 0) * x + m.at<double>(1, 1) * y + m.at<double>(1, 2))};
  }
  return {out, turned};
}

}  // namespace

absl::StatusOr<Descriptor> FaceRecognitionNet::Compute(const cv::Mat& image, const Landmarks68& landmarks) const {
  const auto [rgb, pts] = Upright(image, landmarks);
  const FaceBox box = DlibAlignBox(pts);
  Point origin;
  cv::Mat face = CropBox(rgb, box, &origin);
  if (face.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("face_recognition: aligned box (", box.x, ",", box.y,
                                                   " ", box.w, "x", box.h, ") lies outside the image"));
  }
  at::Tensor out;
  try {
    out = Forward(ToBatchTensor(face, kInputSize, /*center=*/true).to(params_.device())).to(at::kCPU);
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("face_recognition: ", ExceptionText(e)));
  }
  Descriptor d;
  const auto a = out.accessor<float, 2>();
  for (int i = 0; i < 128; ++i) d[i] = a[0][i];
  return d;
}

}  // namespace fusion::faceapi
