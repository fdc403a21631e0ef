// TF.js weights-manifest reader: dequantization of each encoding, shards, and errors that name
// the tensor; then the real face-api manifests.
#include "models/tfjs/weights.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstring>

#include "models/catalogue/catalogue.h"
#include "models/common/exception_text.h"
#include "test_paths.h"

namespace fusion::tfjs {
namespace {

std::string Floats(std::initializer_list<float> v) {
  std::string s(v.size() * 4, '\0');
  std::memcpy(s.data(), v.begin(), s.size());
  return s;
}

constexpr char kManifest[] = R"([
  {"paths": ["a.bin", "b.bin"], "weights": [
    {"name": "q8", "shape": [2, 2], "dtype": "float32", "quantization": {"dtype": "uint8", "scale": 0.5, "min": -1.0}},
    {"name": "f32", "shape": [3], "dtype": "float32"},
    {"name": "h", "shape": [2], "dtype": "float32", "quantization": {"dtype": "float16"}}]},
  {"paths": ["c.bin"], "weights": [
    {"name": "q16", "shape": [1], "dtype": "float32", "quantization": {"dtype": "uint16", "scale": 0.25, "min": 2.0}}]}
])";

std::vector<std::string> Buffers() {
  std::string g0 = std::string("\x00\x01\x02\xff", 4) + Floats({1.5f, -2.0f, 3.25f}) +
                   std::string("\x00\x3c\x00\xc0", 4);  // fp16 1.0, -2.0
  std::string g1("\x04\x00", 2);                        // uint16 4
  return {g0, g1};
}

TEST(TfjsWeights, DequantizesUint8Uint16Float16AndReadsFloat32AcrossGroups) {
  auto parsed = ParseManifest(kManifest, "test");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->groups[0].bytes, 4u + 12u + 4u);
  EXPECT_EQ(parsed->tensors[1].offset, 4u);
  auto w = DecodeWeights(*parsed, Buffers(), "test");
  ASSERT_TRUE(w.ok()) << w.status();
  at::Tensor q8 = *w->Get("q8", {2, 2});
  EXPECT_TRUE(at::equal(q8, at::tensor({-1.0f, -0.5f, 0.0f, 126.5f}).reshape({2, 2})));
  EXPECT_TRUE(at::equal(*w->Get("f32"), at::tensor({1.5f, -2.0f, 3.25f})));
  EXPECT_TRUE(at::equal(*w->Get("h"), at::tensor({1.0f, -2.0f})));
  EXPECT_FLOAT_EQ((*w->Get("q16")).item<float>(), 3.0f);
  EXPECT_EQ((*w->Get("q16")).scalar_type(), at::kFloat);
  EXPECT_EQ(w->Fp32Bytes(), (4u + 3u + 2u + 1u) * 4u);
}

TEST(TfjsWeights, ShortShardErrorNamesTheTensorThatDoesNotFit) {
  auto parsed = ParseManifest(kManifest, "m.json");
  ASSERT_TRUE(parsed.ok());
  std::vector<std::string> b = Buffers();
  b[0].resize(b[0].size() - 1);
  absl::Status s = DecodeWeights(*parsed, b, "m.json").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("tensor 'h'"), std::string::npos) << s;
  EXPECT_NE(s.message().find("a.bin, b.bin"), std::string::npos) << s;
  b = Buffers();
  b[1] += "x";  // trailing bytes are as wrong as missing ones
  EXPECT_EQ(DecodeWeights(*parsed, b, "m.json").status().code(), absl::StatusCode::kDataLoss);
}

TEST(TfjsWeights, UnsupportedEncodingsAndShapeMismatchNameTheTensor) {
  absl::Status s = ParseManifest(
      R"([{"paths":["a"],"weights":[{"name":"idx","shape":[2],"dtype":"complex64"}]}])", "m").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("'idx'"), std::string::npos) << s;
  s = ParseManifest(R"([{"paths":["a"],"weights":[{"name":"k","shape":[2],"dtype":"float32",
      "quantization":{"dtype":"int4"}}]}])", "m").status();
  EXPECT_NE(s.message().find("'k'"), std::string::npos) << s;
  auto w = DecodeWeights(*ParseManifest(kManifest, "t"), Buffers(), "t");
  EXPECT_EQ(w->Get("q8", {4}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(w->Get("q8", {4}).status().message().find("[2,2]"), std::string::npos);
  EXPECT_EQ(w->Get("nope").status().code(), absl::StatusCode::kNotFound);
}

TEST(TfjsWeights, Int32TensorsStayExactIntegers) {
  auto parsed = ParseManifest(R"([{"paths":["s"],"weights":[
      {"name":"n","shape":[],"dtype":"int32","quantization":{"dtype":"uint8","scale":1,"min":3072}},
      {"name":"r","shape":[2],"dtype":"int32"}]}])", "m");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  std::string raw("\x05", 1);
  int32_t v[2] = {-7, 123456789};
  raw.append(reinterpret_cast<const char*>(v), 8);
  auto w = DecodeWeights(*parsed, {raw}, "m");
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ((*w->Get("n")).scalar_type(), at::kInt);
  EXPECT_EQ((*w->Get("n")).item<int>(), 3077);
  EXPECT_EQ((*w->Get("r"))[1].item<int>(), 123456789);
}

TEST(TfjsWeights, ModelJsonFormIsAccepted) {
  auto parsed = ParseManifest(R"({"format":"layers-model","weightsManifest":[{"paths":["s"],
      "weights":[{"name":"conv/kernel","shape":[1,1,1,2],"dtype":"float32"}]}]})", "model.json");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->tensors[0].bytes, 8u);
}

// The real face-api manifests: every tensor decodes, the totals equal the catalogue's
// device_bytes, and one value is checked against numpy (uint8 q*scale+min).
TEST(TfjsWeights, FaceApiManifestsDecodeToTheCataloguedDeviceBytes) {
  auto cat = models::ModelCatalogue::Create(
      {.manifest = testing::CatalogueJson(), .models_dir = testing::ModelsDir()});
  ASSERT_TRUE(cat.ok()) << cat.status();
  struct Case { const char* model; size_t tensors; uint64_t extra_bytes; };
  // ssd_mobilenetv1's manifest also holds 22 int32/scalar graph constants (88 bytes) that the
  // network does not keep, so they are not part of its device bytes.
  for (Case c : {Case{"tiny_face_detector", 19, 0}, Case{"face_landmark_68", 49, 0},
                 Case{"face_recognition", 117, 0}, Case{"ssd_mobilenetv1", 151, 88}}) {
    const models::ModelSpec* spec = *(*cat)->Get(c.model);
    auto w = LoadWeights((*cat)->PathOf(spec->files[0]));
    ASSERT_TRUE(w.ok()) << w.status();
    EXPECT_EQ(w->size(), c.tensors) << c.model;
    EXPECT_EQ(w->Fp32Bytes(), spec->device_bytes + c.extra_bytes) << c.model;
  }
  auto tiny = LoadWeights(testing::ModelsDir() / "face-api/tiny_face_detector_model-weights_manifest.json");
  ASSERT_TRUE(tiny.ok());
  at::Tensor f = *tiny->Get("conv0/filters", {3, 3, 3, 16});
  // Every value is min + k*scale for an integer k in [0,255].
  const double scale = 0.009007044399485869, min = -1.2069439495311063;
  at::Tensor k = (f.to(at::kDouble) - min) / scale;
  EXPECT_LT((k - k.round()).abs().max().item<double>(), 1e-3);
  EXPECT_GE(k.min().item<double>(), -1e-3);
  EXPECT_LE(k.max().item<double>(), 255.001);
}

}  // namespace
}  // namespace fusion::tfjs

namespace fusion::tfjs {
namespace {

// UpscalerJS layers-model files: model.json's weightsManifest (float32, alphabetical order).
TEST(TfjsWeights, UpscalerJsModelJsonWeightsDecodeToTheCataloguedDeviceBytes) {
  auto cat = models::ModelCatalogue::Create(
      {.manifest = testing::CatalogueJson(), .models_dir = testing::ModelsDir()});
  ASSERT_TRUE(cat.ok()) << cat.status();
  for (const char* name : {"esrgan-slim-x2", "esrgan-slim-x4", "esrgan-medium-x2", "esrgan-medium-x4"}) {
    const models::ModelSpec* spec = *(*cat)->Get(name);
    auto w = LoadWeights((*cat)->PathOf(spec->files[0]));
    ASSERT_TRUE(w.ok()) << w.status();
    EXPECT_EQ(w->Fp32Bytes(), spec->device_bytes) << name;
    EXPECT_TRUE(w->Contains("F_m1/kernel")) << name;
  }
  auto slim4 = LoadWeights(testing::ModelsDir() / "esrgan-slim/x4/model.json");
  ASSERT_TRUE(slim4.ok());
  EXPECT_TRUE(slim4->Get("UPN3/kernel", {3, 3, 32, 48}).ok()) << slim4->Get("UPN3/kernel", {3, 3, 32, 48}).status();
}

// Errors at a LibTorch edge reach clients as the message, without c10's C++ backtrace.
TEST(ExceptionText, DropsTheBacktraceOfAc10Error) {
  try {
    C10_THROW_ERROR(OutOfMemoryError, "device budget exceeded: 1179648 bytes");  // as the allocator throws
  } catch (const std::exception& e) {
    const std::string full = e.what(), text = ExceptionText(e);
    EXPECT_NE(full.find("Exception raised from"), std::string::npos) << "c10 appends a backtrace";
    EXPECT_EQ(text, "device budget exceeded: 1179648 bytes");
  }
  EXPECT_EQ(ExceptionText(std::runtime_error("plain")), "plain");
}

}  // namespace
}  // namespace fusion::tfjs
