// Per-model reduced precision against fp32 on the same device: every stage network fusiond can
// place on a device, its Forward() on one real input at fp32 and under autocast
// (loader/precision.h's PrecisionScope, the daemon's own switch), compared with
// models/common/precision_check.h against the tolerance stated in the model's header
// (kFp16Tolerance / kBf16Tolerance) or, for ESRGAN, the manifest's reduced_precision_tolerance.
//
// One source, two binaries:
//   gpu_tests (label gpu, CUDA LibTorch only, FUSION_RP_FP16=1): cuda:0 at fp16; skips when no
//       CUDA device is visible. scripts/gpu-check runs it.
//   reduced_precision_cpu_tests (label models, CI, FUSION_RP_FP16=0): the CPU twin, bf16 CPU
//       autocast on the at:: path (FUSION_ONEDNN=0, as autocast never takes the oneDNN path).
// Each test prints the measured max abs difference, the figure the tolerance was set from.
// The TorchScript generator and enhancers are not here: fusiond runs them at fp32 always (their
// precision is their author's, saved in the file) and ships none with weights to compare.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/Context.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "models/catalogue/catalogue.h"
#include "models/common/precision_check.h"
#include "models/faceapi/face_landmark_68.h"
#include "models/faceapi/face_recognition.h"
#include "models/faceapi/image.h"
#include "models/faceapi/ssd_mobilenet_v1.h"
#include "models/faceapi/tiny_face_detector.h"
#include "models/keras/keras_model.h"
#include "loader/precision.h"
#include "test_paths.h"
#if FUSION_RP_FP16
#include "no_cuda_reason.h"
#endif

#if FUSION_RP_FP16
#include <cuda_runtime_api.h>
#endif

namespace fusion {
namespace {

#if FUSION_RP_FP16
constexpr char kDevice[] = "cuda:0";
constexpr char kPrecision[] = "fp16";
template <typename Net>
constexpr double Tolerance() {
  return Net::kFp16Tolerance;
}
#else
constexpr char kDevice[] = "cpu";
constexpr char kPrecision[] = "bf16";
template <typename Net>
constexpr double Tolerance() {
  return Net::kBf16Tolerance;
}
#endif

// The tolerances hold where bf16 runs in hardware (fp16 on CUDA; AVX512-BF16 dot products on the
// CPU, which AMX CPUs have too). Where the CPU only emulates bf16 (AVX2, AVX-512 without BF16) the
// error can be several times larger, and the daemon's own probe (ReducedPrecisionError) then runs
// the net at fp32: there the comparison must say so (OUT_OF_RANGE) or pass.
bool HardwareReducedPrecision() {
#if FUSION_RP_FP16
  return true;
#else
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512bf16");
#endif
}

// grace_hopper_512x600.jpg (committed) and its golden face-api boxes (golden_faceapi.json).
const faceapi::FaceBox kDetBox{163.5f, 75.8f, 115.4f, 110.5f};
const faceapi::FaceBox kAlignBox{170.0f, 70.0f, 106.0f, 106.0f};

class ReducedPrecisionTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
#if !FUSION_RP_FP16
    setenv("FUSION_ONEDNN", "0", 1);  // before any network is built: the at:: path, as under autocast
#endif
  }
  void SetUp() override {
#if FUSION_RP_FP16
    if (const std::string why = fusion::testing::NoCudaReason(); !why.empty()) GTEST_SKIP() << why;
    // LibTorch's default lets cuDNN run fp32 convolutions as TF32 (10-bit mantissa): the daemon's
    // "fp32" on CUDA, and so the reference here. Said in the log, beside each figure.
    std::printf("cuDNN TF32 for fp32 convolutions: %s\n", at::globalContext().allowTF32CuDNN() ? "on" : "off");
#endif
    auto c = models::ModelCatalogue::Create(
        {.manifest = testing::CatalogueJson(), .models_dir = testing::ModelsDir()});
    ASSERT_TRUE(c.ok()) << c.status();
    catalogue_ = std::move(*c);
    auto rgb = faceapi::LoadRgb(testing::CommittedFaces() / "grace_hopper_512x600.jpg");
    ASSERT_TRUE(rgb.ok()) << rgb.status();
    rgb_ = *rgb;
  }

  at::Tensor OnDevice(const at::Tensor& x) const { return x.to(at::Device(kDevice)); }
  at::Tensor Crop(const faceapi::FaceBox& box, int size) const {
    faceapi::Point origin;
    return faceapi::ToBatchTensor(faceapi::CropBox(rgb_, box, &origin), size, /*center=*/true);
  }

  // Runs `forward` at fp32 and under autocast; checks the flattened outputs against `tolerance`.
  template <typename F>
  void Compare(const std::string& model, F forward, double tolerance) {
    auto needed = PrecisionScope::Needed(kPrecision, kDevice);
    ASSERT_TRUE(needed.ok() && *needed) << needed.status();
    at::Tensor full, reduced;
    full = Flat(forward());
    {
      PrecisionScope scope(true, kDevice);
      reduced = Flat(forward());
    }
    const models::OutputDifference d = models::CompareOutputs(Span(full), Span(reduced));
    std::printf("%s on %s: %s vs fp32 max abs difference %.6g (tolerance %.6g, %zu values, %zu not finite)\n",
                model.c_str(), kDevice, kPrecision, d.max_abs, tolerance, d.count, d.non_finite);
    RecordProperty("max_abs_difference", std::to_string(d.max_abs));
    const absl::Status s = models::CheckReducedPrecision(model, kPrecision, Span(full), Span(reduced), tolerance);
    if (HardwareReducedPrecision()) {
      EXPECT_TRUE(s.ok()) << s;
    } else {
      EXPECT_TRUE(s.ok() || absl::IsOutOfRange(s)) << s;
    }
    // The reduced run really ran reduced: an identical output means autocast did not apply.
    EXPECT_GT(d.max_abs, 0.0) << model << ": " << kPrecision << " output equals fp32's";
  }

  static at::Tensor Flat(const at::Tensor& t) { return t.detach().to(at::kCPU, at::kFloat).contiguous().view({-1}); }
  static std::span<const float> Span(const at::Tensor& t) {
    return {t.data_ptr<float>(), static_cast<size_t>(t.numel())};
  }

  std::unique_ptr<models::ModelCatalogue> catalogue_;
  cv::Mat rgb_;
};

TEST_F(ReducedPrecisionTest, TinyFaceDetectorLogits) {
  auto net = faceapi::TinyFaceDetector::Load(*catalogue_, {});
  ASSERT_TRUE(net.ok()) << net.status();
  (*net)->To(at::Device(kDevice));
  const at::Tensor x = OnDevice(faceapi::ToBatchTensor(rgb_, 416, /*center=*/false));
  Compare("tiny_face_detector", [&] { return (*net)->Forward(x); }, Tolerance<faceapi::TinyFaceDetector>());
}

TEST_F(ReducedPrecisionTest, SsdMobilenetV1BoxesAndScores) {
  auto net = faceapi::SsdMobilenetV1::Load(*catalogue_, {});
  ASSERT_TRUE(net.ok()) << net.status();
  (*net)->To(at::Device(kDevice));
  const at::Tensor x = OnDevice(faceapi::ToBatchTensor(rgb_, faceapi::SsdMobilenetV1::kInputSize, false));
  Compare("ssd_mobilenetv1", [&] {
    auto [boxes, scores] = (*net)->Forward(x);
    return at::cat({boxes.reshape({-1}).to(at::kFloat), scores.reshape({-1}).to(at::kFloat)});
  }, Tolerance<faceapi::SsdMobilenetV1>());
}

TEST_F(ReducedPrecisionTest, FaceLandmark68Points) {
  auto net = faceapi::FaceLandmark68Net::Load(*catalogue_);
  ASSERT_TRUE(net.ok()) << net.status();
  (*net)->To(at::Device(kDevice));
  const at::Tensor x = OnDevice(Crop(kDetBox, faceapi::FaceLandmark68Net::kInputSize));
  Compare("face_landmark_68", [&] { return (*net)->Forward(x); }, Tolerance<faceapi::FaceLandmark68Net>());
}

TEST_F(ReducedPrecisionTest, FaceRecognitionDescriptor) {
  auto net = faceapi::FaceRecognitionNet::Load(*catalogue_);
  ASSERT_TRUE(net.ok()) << net.status();
  (*net)->To(at::Device(kDevice));
  const at::Tensor x = OnDevice(Crop(kAlignBox, faceapi::FaceRecognitionNet::kInputSize));
  Compare("face_recognition", [&] { return (*net)->Forward(x); }, Tolerance<faceapi::FaceRecognitionNet>());
}

// The ESRGAN enhancers, the models the daemon does run at fp16 on CUDA (manifest cuda_precision),
// on a 48x48 face crop (0..255), against the manifest's tolerance in 0..255 output units. (The
// daemon's own gate, ReducedPrecisionError's 32x32 probe, is the same comparison on a pattern.)
// bf16 CPU autocast on the at:: path is not what the daemon runs on the CPU (default_precision
// bf16 there is the oneDNN fast path compiled in bf16 with an fp32 tail, probed within the
// manifest's 1.0: pipeline_torch_tests Precision.*): its bound is the header's
// keras::KerasModel::kBf16Tolerance.
TEST_F(ReducedPrecisionTest, EsrganEnhancers) {
  for (const char* name : {"esrgan-slim-x2", "esrgan-slim-x4", "esrgan-medium-x2", "esrgan-medium-x4"}) {
    SCOPED_TRACE(name);
    auto spec = catalogue_->Get(name);
    ASSERT_TRUE(spec.ok()) << spec.status();
    auto m = keras::KerasModel::Load(catalogue_->PathOf((*spec)->files.front()));
    ASSERT_TRUE(m.ok()) << m.status();
    ASSERT_TRUE((*m)->MoveTo(at::Device(kDevice)).ok());
    const at::Tensor x = OnDevice(Crop(kAlignBox, 48));
#if FUSION_RP_FP16
    const double tolerance = (*spec)->reduced_precision_tolerance;
#else
    const double tolerance = keras::KerasModel::kBf16Tolerance;
#endif
    Compare(name, [&] {
      auto y = (*m)->Forward(x);
      if (!y.ok()) throw std::runtime_error(y.status().ToString());
      return *y;
    }, tolerance);
  }
}

}  // namespace
}  // namespace fusion
