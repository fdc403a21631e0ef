// A TorchScript generator built in C++ (torch::jit::Module + define(), saved and loaded), registered
// in a catalogue, serves the generator contract in place of the classical one.
#include <gtest/gtest.h>
#include <torch/script.h>

#include <fstream>

#include "absl/strings/str_cat.h"
#include "models/catalogue/catalogue.h"
#include "models/generator/generator_factory.h"
#include "models/generator/torchscript_generator.h"
#include "temp_dir.h"

namespace fusion::models {
namespace {

// Saves a module whose forward has the generator signature and `body` as its return expression.
std::string SaveGenerator(const testing::TempDir& dir, const std::string& file, const std::string& body) {
  torch::jit::Module m("TestGenerator");
  m.register_buffer("gain", torch::ones({1}));
  m.define("def forward(self, source, source_landmarks, target, target_landmarks, ratio: float):\n"
           "    return " + body + "\n");
  const std::string path = dir.File(file);
  m.save(path);
  return path;
}

GeneratorInputs RandomInputs(double ratio) {
  torch::manual_seed(7);
  return {torch::rand({1, 3, 64, 64}), torch::rand({1, 68, 2}) * 63, torch::rand({1, 3, 64, 64}),
          torch::rand({1, 68, 2}) * 63, ratio};
}

std::string CatalogueJson(const std::string& name, const std::string& file) {
  const auto sha = Sha256OfFile(file);
  EXPECT_TRUE(sha.ok());
  return absl::StrCat(R"({"schema":1,"models":[{"name":")", name,
                      R"(","stage":"generate","format":"torchscript","files":[{"path":")",
                      std::filesystem::path(file).filename().string(), R"(","sha256":")", *sha,
                      R"(","file_bytes":)", std::filesystem::file_size(file),
                      R"(}],"device_bytes":4,"working_set_bytes_per_pixel":64,"default_precision":"fp32",)"
                      R"("pinned_by_default":false,"one_shot":false,"tileable":false,"license":"test","source":"test"}]})");
}

TEST(TorchScriptGenerator, RegisteredInTheCatalogueItReplacesTheClassicalGenerator) {
  testing::TempDir dir;
  const std::string path = SaveGenerator(dir, "crossfade.pt", "target + (source - target) * ratio * self.gain");
  auto cat = ModelCatalogue::FromJson(CatalogueJson("crossfade", path), "test catalogue", dir.path());
  ASSERT_TRUE(cat.ok()) << cat.status();
  auto gen = CreateGenerator(**cat, "crossfade");
  ASSERT_TRUE(gen.ok()) << gen.status();
  const GeneratorInputs in = RandomInputs(0.25);
  auto out = (*gen)->Fuse(in);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(torch::allclose(*out, in.target + (in.source - in.target) * 0.25));
  EXPECT_EQ((*gen)->name(), "torchscript:" + path);
}

TEST(TorchScriptGenerator, TheProjectCatalogueServesTheClassicalGenerator) {
  auto cat = ModelCatalogue::Create({FUSION_SOURCE_DIR "/models/manifest.json", "/nonexistent"});
  ASSERT_TRUE(cat.ok()) << cat.status();
  auto gen = CreateGenerator(**cat, "classical-fusion");
  ASSERT_TRUE(gen.ok()) << gen.status();
  EXPECT_EQ((*gen)->name(), "classical-fusion");
  EXPECT_EQ(CreateGenerator(**cat, "esrgan-slim-x4").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(TorchScriptGenerator, OutputsThatBreakTheContractAreErrors) {
  testing::TempDir dir;
  auto narrow = TorchScriptGenerator::Load(SaveGenerator(dir, "narrow.pt", "target[:, :, :8]"));
  ASSERT_TRUE(narrow.ok()) << narrow.status();
  auto r = (*narrow)->Fuse(RandomInputs(1.0));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInternal);
  EXPECT_NE(r.status().message().find("returned [1, 3, 8, 64]"), std::string::npos) << r.status();
  auto pair = TorchScriptGenerator::Load(SaveGenerator(dir, "pair.pt", "(target, source)"));
  ASSERT_TRUE(pair.ok());
  EXPECT_NE((*pair)->Fuse(RandomInputs(1.0)).status().message().find("not a Tensor"), std::string::npos);
}

TEST(TorchScriptGenerator, MissingOrCorruptFilesAreNamed) {
  testing::TempDir dir;
  EXPECT_EQ(TorchScriptGenerator::Load(dir.File("none.pt")).status().code(), absl::StatusCode::kNotFound);
  std::ofstream(dir.File("junk.pt")) << "not a zip archive";
  auto junk = TorchScriptGenerator::Load(dir.File("junk.pt"));
  EXPECT_EQ(junk.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(junk.status().message().find("junk.pt"), std::string::npos);
  // Registered, then damaged on disk: the catalogue's sha256 check refuses it.
  const std::string path = SaveGenerator(dir, "g.pt", "target");
  auto cat = ModelCatalogue::FromJson(CatalogueJson("g", path), "test catalogue", dir.path());
  ASSERT_TRUE(cat.ok());
  std::ofstream(path, std::ios::app) << "x";
  EXPECT_EQ(CreateGenerator(**cat, "g").status().code(), absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace fusion::models
