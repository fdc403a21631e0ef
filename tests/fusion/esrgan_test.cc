// Keras interpreter + ESRGAN: goldens from scripts/make-esrgan-goldens.py (numpy reference),
// tiling, and parse errors that name the layer.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "fusion_fixture.h"
#include "models/keras/enhancer.h"
#include "models/keras/keras_model.h"
#include "models/onednn/program.h"
#include "models/tfjs/weights.h"

namespace fusion::keras {
namespace {

using json = nlohmann::json;

const json& Goldens() {
  static const json j = [] {
    std::ifstream f(testing::TestDataPath("fusion/esrgan_goldens.json"));
    return json::parse(f);
  }();
  return j;
}

// The golden 32x32 crop as [1,3,32,32] float32 RGB 0-255.
at::Tensor GoldenCrop() {
  std::vector<float> hwc = Goldens().at("crop_hwc_rgb_u8").get<std::vector<float>>();
  return at::from_blob(hwc.data(), {1, 32, 32, 3}, at::kFloat).permute({0, 3, 1, 2}).contiguous();
}

std::unique_ptr<KerasModel> LoadModel(const std::string& rel) {
  auto m = KerasModel::Load(testing::ModelsDir() + "/" + rel + "/model.json");
  EXPECT_TRUE(m.ok()) << m.status() << " (run scripts/fetch-models.sh)";
  return m.ok() ? std::move(*m) : nullptr;
}

struct EsrganCase {
  std::string key, rel;
};

void PrintTo(const EsrganCase& c, std::ostream* os) { *os << c.rel; }

class EsrganGolden : public ::testing::TestWithParam<EsrganCase> {};

TEST_P(EsrganGolden, MatchesTheNumpyReferenceWithinATenthOfALevel) {
  auto model = LoadModel(GetParam().rel);
  ASSERT_NE(model, nullptr);
  const json& g = Goldens().at("models").at(GetParam().key);
  const int s = g.at("scale");
  EXPECT_EQ(model->scale(), s);
  auto y = model->Forward(GoldenCrop());
  ASSERT_TRUE(y.ok()) << y.status();
  ASSERT_EQ(y->sizes(), (at::IntArrayRef{1, 3, 32 * s, 32 * s}));
  const auto ys = g.at("sample_ys").get<std::vector<int64_t>>(), xs = g.at("sample_xs").get<std::vector<int64_t>>();
  const at::Tensor picked = y->index_select(2, at::tensor(ys)).index_select(3, at::tensor(xs));  // [1,3,32,32]
  std::vector<float> want = g.at("samples_hwc").get<std::vector<float>>();
  const at::Tensor golden = at::from_blob(want.data(), {1, 32, 32, 3}, at::kFloat).permute({0, 3, 1, 2});
  const float max_diff = (picked - golden).abs().max().item<float>();
  const auto mean = g.at("channel_mean").get<std::vector<float>>();
  const at::Tensor channel_mean = y->mean({0, 2, 3});
  std::printf("%s: max |diff| %.5f over %d samples; halo %d px, tileable %d, %zu layers, %llu parameter bytes\n",
              GetParam().key.c_str(), max_diff, 32 * 32 * 3, model->halo_px(), model->tileable(),
              model->num_layers(), static_cast<unsigned long long>(model->parameter_bytes()));
  EXPECT_LE(max_diff, 0.1f);
  for (int c = 0; c < 3; ++c) EXPECT_NEAR(channel_mean[c].item<float>(), mean[c], 0.01f) << "channel " << c;
  EXPECT_TRUE(model->tileable());
}

// The oneDNN fast path in bf16 (FUSION_ONEDNN_PRECISION=bf16 here; the daemon's default for
// ESRGAN where the CPU has native bf16, ModelStore; its last two convs fp32): it must really
// round (differ from fp32), stay within
// the catalogue's reduced_precision_tolerance (1.0 level, 0..255) of fp32 and of the golden
// (+0.1, the golden's own tolerance), and hold its weights in fewer bytes.
TEST_P(EsrganGolden, Bf16FastPathStaysWithinTheCataloguesToleranceOfFp32) {
  if (!onednn::Bf16Native()) GTEST_SKIP() << "this CPU has no native bf16";
  setenv("FUSION_ONEDNN_PRECISION", "fp32", 1);
  auto fp32 = LoadModel(GetParam().rel);
  setenv("FUSION_ONEDNN_PRECISION", "bf16", 1);
  auto bf16 = LoadModel(GetParam().rel);
  unsetenv("FUSION_ONEDNN_PRECISION");
  ASSERT_TRUE(fp32 && bf16 && fp32->compiled() && bf16->compiled());
  auto a = fp32->Forward(GoldenCrop()), b = bf16->Forward(GoldenCrop());
  ASSERT_TRUE(a.ok() && b.ok());
  const float diff = (*a - *b).abs().max().item<float>();
  const json& g = Goldens().at("models").at(GetParam().key);
  const auto ys = g.at("sample_ys").get<std::vector<int64_t>>(), xs = g.at("sample_xs").get<std::vector<int64_t>>();
  std::vector<float> want = g.at("samples_hwc").get<std::vector<float>>();
  const at::Tensor golden = at::from_blob(want.data(), {1, 32, 32, 3}, at::kFloat).permute({0, 3, 1, 2});
  const float golden_diff =
      (b->index_select(2, at::tensor(ys)).index_select(3, at::tensor(xs)) - golden).abs().max().item<float>();
  std::printf("%s bf16: max |diff| %.3f levels vs fp32, %.3f vs the golden samples; resident %llu -> %llu bytes\n",
              GetParam().key.c_str(), diff, golden_diff, static_cast<unsigned long long>(fp32->resident_bytes()),
              static_cast<unsigned long long>(bf16->resident_bytes()));
  EXPECT_GT(diff, 0.01f) << "bf16 equals fp32: it did not round";
  EXPECT_LE(diff, 1.0f);
  EXPECT_LE(golden_diff, 1.1f);
  EXPECT_LT(bf16->resident_bytes(), fp32->resident_bytes() * 7 / 10);
}

// FromJson's bf16 request (what ModelStore passes for default_precision "bf16"): granted where
// the CPU has native bf16, and FUSION_ONEDNN_PRECISION=fp32 (this net's name) overrides it.
TEST(KerasModel, Bf16RequestCompilesTheBf16FastPathWhereTheCpuHasIt) {
  const std::string json_path = testing::ModelsDir() + "/esrgan-slim/x2/model.json";
  std::ifstream f(json_path);
  ASSERT_TRUE(f) << "run scripts/fetch-models.sh";
  const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  auto weights = tfjs::LoadWeights(json_path);
  ASSERT_TRUE(weights.ok()) << weights.status();
  auto fp32 = KerasModel::FromJson(text, *weights, "esrgan-slim-x2");
  auto bf16 = KerasModel::FromJson(text, *weights, "esrgan-slim-x2", /*bf16=*/true);
  setenv("FUSION_ONEDNN_PRECISION", "esrgan-slim-x2=fp32", 1);
  auto overridden = KerasModel::FromJson(text, *weights, "esrgan-slim-x2", /*bf16=*/true);
  unsetenv("FUSION_ONEDNN_PRECISION");
  ASSERT_TRUE(fp32.ok() && bf16.ok() && overridden.ok());
  EXPECT_FALSE((*fp32)->bf16());
  EXPECT_EQ((*bf16)->bf16(), onednn::Bf16Native());
  EXPECT_FALSE((*overridden)->bf16());
  EXPECT_EQ((*bf16)->compiled(), onednn::Available());
}

// The fast path runs ESRGAN's nearest upsample + SR conv as one conv on the low-resolution side
// and a depthToSpace (keras_model.h): the same sums as the at:: path's upsample then conv
// (FUSION_ONEDNN=0), also at the borders of an odd, non-square input (zero padding), for x2 and
// x4. Measured max abs difference: 0.00020 (slim-x2), 0.00023 (slim-x4) of 0..255.
TEST(KerasModel, UpsampleAndSrConvAsOneLowResolutionConvMatchTheAtPath) {
  if (!onednn::Available()) GTEST_SKIP() << "this build has no oneDNN fast path (models/onednn/CMakeLists.txt)";
  for (const char* rel : {"esrgan-slim/x2", "esrgan-slim/x4"}) {
    auto fast = LoadModel(rel);
    setenv("FUSION_ONEDNN", "0", 1);
    auto plain = LoadModel(rel);
    unsetenv("FUSION_ONEDNN");
    ASSERT_TRUE(fast && plain);
    ASSERT_TRUE(fast->compiled());
    ASSERT_FALSE(plain->compiled());
    const at::Tensor x = GoldenCrop().slice(2, 0, 29).slice(3, 3, 30).contiguous();  // 29x27
    auto a = fast->Forward(x), b = plain->Forward(x);
    ASSERT_TRUE(a.ok() && b.ok());
    ASSERT_EQ(a->sizes(), b->sizes());
    const float diff = (*a - *b).abs().max().item<float>();
    std::printf("%s: fused upsample + SR vs the at:: path: max |diff| %.5f\n", rel, diff);
    EXPECT_LT(diff, 0.01f) << rel;
    // The borders too: the last output row and column (the zero padding of both forms).
    const int64_t h = a->size(2), w = a->size(3);
    EXPECT_LT((a->slice(2, h - 4, h) - b->slice(2, h - 4, h)).abs().max().item<float>(), 0.01f) << rel;
    EXPECT_LT((a->slice(3, w - 4, w) - b->slice(3, w - 4, w)).abs().max().item<float>(), 0.01f) << rel;
  }
}

INSTANTIATE_TEST_SUITE_P(UpscalerJs, EsrganGolden,
                         ::testing::Values(EsrganCase{"esrgan-slim-x2", "esrgan-slim/x2"},
                                           EsrganCase{"esrgan-slim-x4", "esrgan-slim/x4"},
                                           EsrganCase{"esrgan-medium-x4", "esrgan-medium/x4"}),
                         [](const auto& info) {
                           std::string n = info.param.key;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

TEST(Enhancer, TiledRunEqualsTheWholeImageRun) {
  auto model = LoadModel("esrgan-slim/x4");
  ASSERT_NE(model, nullptr);
  auto whole = Enhancer::Create(LoadModel("esrgan-slim/x4"), {});
  auto tiled = Enhancer::Create(std::move(model), {.tile_px = 12});
  ASSERT_TRUE(whole.ok() && tiled.ok());
  const at::Tensor x = GoldenCrop() / 255.0;
  auto a = (*whole)->Run(x);
  auto b = (*tiled)->Run(x);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->sizes(), (at::IntArrayRef{1, 3, 128, 128}));
  EXPECT_GE(a->min().item<float>(), 0.0f);
  EXPECT_LE(a->max().item<float>(), 1.0f);
  EXPECT_LT((*a - *b).abs().max().item<float>(), 1e-5f);
}

// A two-layer model.json around `layer` (a JSON object), input named "in" with 4 channels.
std::string TinyModel(const std::string& layer) {
  return R"({"modelTopology":{"model_config":{"class_name":"Functional","config":{"layers":[
    {"class_name":"InputLayer","name":"in","config":{"batch_input_shape":[null,null,null,4]},"inbound_nodes":[]},
    )" + layer + R"(],"input_layers":[["in",0,0]],"output_layers":[["out",0,0]]}}}})";
}

TEST(KerasModel, ParseErrorsNameTheLayer) {
  const tfjs::WeightMap none({}, "test");
  auto r = KerasModel::FromJson(TinyModel(R"({"class_name":"Lambda","name":"out","config":{},"inbound_nodes":[[["in",0,0,{}]]]})"), none, "tiny");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("layer 'out'"), std::string::npos) << r.status();
  EXPECT_NE(r.status().message().find("Lambda"), std::string::npos) << r.status();
  r = KerasModel::FromJson(TinyModel(R"({"class_name":"Conv2D","name":"out","config":{"filters":2,"kernel_size":[3,3],"strides":[1,1],"padding":"same","activation":"linear"},"inbound_nodes":[[["in",0,0,{}]]]})"), none, "tiny");
  EXPECT_NE(r.status().message().find("layer 'out'"), std::string::npos) << r.status();
  EXPECT_NE(r.status().message().find("out/kernel"), std::string::npos) << r.status();
  r = KerasModel::FromJson(TinyModel(R"({"class_name":"Add","name":"out","config":{},"inbound_nodes":[[["nowhere",0,0,{}]]]})"), none, "tiny");
  EXPECT_NE(r.status().message().find("unknown inbound layer 'nowhere'"), std::string::npos) << r.status();
}

TEST(KerasModel, PixelShuffleUsesDepthToSpaceOrder) {
  const tfjs::WeightMap none({}, "test");
  auto m = KerasModel::FromJson(TinyModel(R"({"class_name":"PixelShuffle2x","name":"out","config":{"scale":2},"inbound_nodes":[[["in",0,0,{}]]]})"), none, "tiny");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ((*m)->scale(), 2);
  auto y = (*m)->Forward(at::arange(4, at::kFloat).view({1, 4, 1, 1}));
  ASSERT_TRUE(y.ok());
  EXPECT_TRUE(at::equal(*y, at::arange(4, at::kFloat).view({1, 1, 2, 2})));
}

}  // namespace
}  // namespace fusion::keras
