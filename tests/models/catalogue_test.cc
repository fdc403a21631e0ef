// The model catalogue: parsing models/manifest.json, and the integrity check of fetched files.
#include "models/catalogue/catalogue.h"

#include <gtest/gtest.h>

#include <fstream>
#include <set>

#include "temp_dir.h"
#include "test_paths.h"

namespace fusion::models {
namespace {

std::unique_ptr<ModelCatalogue> LoadProjectCatalogue(std::filesystem::path models_dir) {
  auto cat = ModelCatalogue::Create({.manifest = testing::CatalogueJson(), .models_dir = models_dir});
  EXPECT_TRUE(cat.ok()) << cat.status();
  return cat.ok() ? std::move(*cat) : nullptr;
}

TEST(ModelCatalogue, ProjectManifestListsTheFaceAndEnhanceNetworks) {
  auto cat = LoadProjectCatalogue(testing::ModelsDir());
  ASSERT_NE(cat, nullptr);
  std::set<std::string> names;
  for (const ModelSpec& m : cat->models()) names.insert(m.name);
  for (const char* n : {"tiny_face_detector", "ssd_mobilenetv1", "face_landmark_68", "face_recognition",
                        "esrgan-slim-x2", "esrgan-slim-x4", "esrgan-medium-x2", "esrgan-medium-x4"}) {
    EXPECT_TRUE(names.count(n)) << n;
  }
  // device_bytes are fp32 parameters + buffers, counted from the TF.js manifests.
  EXPECT_EQ((*cat->Get("tiny_face_detector"))->device_bytes, 773284u);
  EXPECT_EQ((*cat->Get("face_landmark_68"))->device_bytes, 1427360u);
  EXPECT_EQ((*cat->Get("face_recognition"))->device_bytes, 22458368u);
  // SSD: all 151 manifest tensors are 22,222,164 bytes; the net keeps 22,222,076 (it drops the
  // 22 int32 shape constants and preprocessor scalars that TF.js graphs carried).
  EXPECT_EQ((*cat->Get("ssd_mobilenetv1"))->device_bytes, 22222076u);
  EXPECT_EQ((*cat->Get("esrgan-slim-x4"))->device_bytes, 933804u);
  const ModelSpec* tiny = *cat->Get("tiny_face_detector");
  EXPECT_EQ(tiny->stage, "detect");
  EXPECT_TRUE(tiny->one_shot);
  EXPECT_EQ(tiny->files[1].sha256, "b7503ce7df31039b1c43316a9b865cab6a70dd748cc602d3fa28b551503c3871");
  EXPECT_EQ(tiny->TotalFileBytes(), 3219u + 193321u + 1067u);
  // bf16 on the CPU device (the bf16 fast path where the CPU has it natively) and fp16 on CUDA
  // for the enhancers, each within one 8-bit level of fp32.
  const ModelSpec* esrgan = *cat->Get("esrgan-slim-x4");
  EXPECT_EQ(esrgan->default_precision, "bf16");
  EXPECT_EQ(esrgan->cuda_precision, "fp16");
  EXPECT_EQ(esrgan->reduced_precision_tolerance, 1.0);
  EXPECT_EQ(tiny->cuda_precision, "fp32");
}

TEST(ModelCatalogue, FetchedFilesOfEveryModelVerify) {
  auto cat = LoadProjectCatalogue(testing::ModelsDir());
  ASSERT_NE(cat, nullptr);
  for (const ModelSpec& m : cat->models()) EXPECT_TRUE(cat->Verify(m.name).ok()) << cat->Verify(m.name);
}

TEST(ModelCatalogue, UnknownModelIsNotFoundAndListsKnownNames) {
  auto cat = LoadProjectCatalogue(testing::ModelsDir());
  ASSERT_NE(cat, nullptr);
  absl::StatusOr<const ModelSpec*> m = cat->Get("inswapper");
  EXPECT_EQ(m.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(m.status().message().find("tiny_face_detector"), std::string::npos);
}

constexpr char kOneModel[] = R"({"schema":1,"models":[{"name":"m","stage":"detect","format":"tfjs-weights",
  "files":[{"path":"d/w.bin","sha256":"2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824","file_bytes":5}],
  "device_bytes":20,"working_set_bytes_per_pixel":8,"default_precision":"fp32","pinned_by_default":true,
  "one_shot":false,"tileable":true,"license":"MIT","source":"test"}]})";

TEST(ModelCatalogue, MissingFileErrorNamesTheFileAndTheFetchCommand) {
  fusion::testing::TempDir dir;
  auto cat = ModelCatalogue::FromJson(kOneModel, "inline", std::filesystem::path(dir.path()));
  ASSERT_TRUE(cat.ok()) << cat.status();
  absl::Status s = (*cat)->Verify("m");
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_NE(s.message().find((std::filesystem::path(dir.path()) / "d/w.bin").string()), std::string::npos) << s;
  EXPECT_NE(s.message().find("scripts/fetch-models.sh"), std::string::npos) << s;
}

TEST(ModelCatalogue, CorruptFileIsDataLossNamingBothHashes) {
  fusion::testing::TempDir dir;
  std::filesystem::create_directories(std::filesystem::path(dir.path()) / "d");
  auto cat = ModelCatalogue::FromJson(kOneModel, "inline", std::filesystem::path(dir.path()));
  ASSERT_TRUE(cat.ok());
  std::ofstream(std::filesystem::path(dir.path()) / "d/w.bin") << "hello";
  EXPECT_TRUE((*cat)->Verify("m").ok()) << (*cat)->Verify("m");  // sha256("hello")
  std::ofstream(std::filesystem::path(dir.path()) / "d/w.bin") << "jello";
  absl::Status s = (*cat)->Verify("m");
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"),
            std::string::npos) << s;
  EXPECT_NE(s.message().find("scripts/fetch-models.sh"), std::string::npos) << s;
  std::ofstream(std::filesystem::path(dir.path()) / "d/w.bin") << "hello!";
  EXPECT_EQ((*cat)->Verify("m").code(), absl::StatusCode::kDataLoss);  // size differs
}

TEST(ModelCatalogue, ParsedFlagsAndSizesAreKept) {
  auto cat = ModelCatalogue::FromJson(kOneModel, "inline", "/nonexistent");
  ASSERT_TRUE(cat.ok());
  const ModelSpec* m = *(*cat)->Get("m");
  EXPECT_TRUE(m->pinned_by_default);
  EXPECT_TRUE(m->tileable);
  EXPECT_FALSE(m->one_shot);
  EXPECT_EQ(m->device_bytes, 20u);
  EXPECT_EQ(m->working_set_bytes_per_pixel, 8u);
  EXPECT_EQ((*cat)->PathOf(m->files[0]), std::filesystem::path("/nonexistent/d/w.bin"));
}

// keep_alive (docs/MEMORY.md#keep-alive) is optional: absent = the daemon's; a duration, "0" or
// "forever"; anything else names the model and the key.
TEST(ModelCatalogue, KeepAliveOverrideIsOptionalDurationOrForever) {
  auto with = [](const std::string& value) {
    std::string json = kOneModel;
    json.insert(json.find("\"license\""), "\"keep_alive\":" + value + ",");
    return ModelCatalogue::FromJson(json, "inline", "/nonexistent");
  };
  auto absent = ModelCatalogue::FromJson(kOneModel, "inline", "/nonexistent");
  ASSERT_TRUE(absent.ok());
  EXPECT_FALSE((*absent)->models()[0].keep_alive.has_value());
  auto ten = with("\"10m\"");
  ASSERT_TRUE(ten.ok()) << ten.status();
  EXPECT_EQ((*ten)->models()[0].keep_alive, absl::Minutes(10));
  auto zero = with("\"0\"");
  ASSERT_TRUE(zero.ok()) << zero.status();
  EXPECT_EQ((*zero)->models()[0].keep_alive, absl::ZeroDuration());
  auto forever = with("\"forever\"");
  ASSERT_TRUE(forever.ok()) << forever.status();
  EXPECT_EQ((*forever)->models()[0].keep_alive, absl::InfiniteDuration());
  for (const char* bad : {"\"later\"", "\"-1s\"", "300"}) {
    auto r = with(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("model 'm'"), std::string::npos) << r.status();
    EXPECT_NE(r.status().message().find("keep_alive"), std::string::npos) << r.status();
  }
}

TEST(ModelCatalogue, MalformedEntriesAreRejectedNamingModelAndKey) {
  std::string bad_hash = kOneModel;
  bad_hash.replace(bad_hash.find("2cf24d"), 6, "XYZ");
  auto a = ModelCatalogue::FromJson(bad_hash, "inline", "/x");
  EXPECT_EQ(a.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(a.status().message().find("d/w.bin"), std::string::npos) << a.status();

  std::string no_stage = kOneModel;
  no_stage.replace(no_stage.find("\"stage\""), 7, "\"stag\"");
  auto b = ModelCatalogue::FromJson(no_stage, "inline", "/x");
  EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(b.status().message().find("model 'm'"), std::string::npos) << b.status();
  EXPECT_NE(b.status().message().find("stage"), std::string::npos) << b.status();

  std::string escape = kOneModel;
  escape.replace(escape.find("d/w.bin"), 7, "../w.bin");
  EXPECT_EQ(ModelCatalogue::FromJson(escape, "inline", "/x").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ModelCatalogue::FromJson("{", "inline", "/x").status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ModelCatalogue, PrecisionsTheDeviceCannotRunOrWithoutAToleranceAreRejected) {
  const std::string fp32 = "\"default_precision\":\"fp32\"";
  auto with = [&](const std::string& fields) {
    std::string j = kOneModel;
    j.replace(j.find(fp32), fp32.size(), fields);
    return ModelCatalogue::FromJson(j, "inline", "/x").status();
  };
  ASSERT_TRUE(with("\"default_precision\":\"fp32\"").ok());
  const absl::Status fp16_on_cpu = with("\"default_precision\":\"fp16\"");
  EXPECT_EQ(fp16_on_cpu.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(fp16_on_cpu.message().find("default_precision (the CPU device's) must be fp32 or bf16"), std::string::npos)
      << fp16_on_cpu;
  EXPECT_NE(with("\"default_precision\":\"fp32\",\"cuda_precision\":\"bf16\"").message().find("cuda_precision must be"),
            std::string::npos);
  // m is a tfjs-weights detector: nothing there applies a reduced precision.
  EXPECT_NE(with("\"default_precision\":\"fp32\",\"cuda_precision\":\"fp16\",\"reduced_precision_tolerance\":1")
                .message()
                .find("only to keras-layers-model"),
            std::string::npos);
  std::string keras = kOneModel;
  keras.replace(keras.find("tfjs-weights"), 12, "keras-layers-model");
  keras.replace(keras.find(fp32), fp32.size(), "\"default_precision\":\"bf16\"");
  const absl::Status no_tolerance = ModelCatalogue::FromJson(keras, "inline", "/x").status();
  EXPECT_NE(no_tolerance.message().find("needs reduced_precision_tolerance > 0"), std::string::npos) << no_tolerance;
  keras.replace(keras.find("\"default_precision\""), 0, "\"reduced_precision_tolerance\":0.5,");
  auto ok = ModelCatalogue::FromJson(keras, "inline", "/x");
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ((*(*ok)->Get("m"))->reduced_precision_tolerance, 0.5);
  EXPECT_EQ((*(*ok)->Get("m"))->default_precision, "bf16");
}

TEST(Sha256OfFile, MatchesKnownDigestAndReportsMissingFile) {
  fusion::testing::TempDir dir;
  std::ofstream(std::filesystem::path(dir.path()) / "abc") << "abc";
  EXPECT_EQ(*Sha256OfFile(std::filesystem::path(dir.path()) / "abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(Sha256OfFile(std::filesystem::path(dir.path()) / "none").status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace fusion::models
