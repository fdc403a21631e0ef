// A TorchScript enhancer built in C++ (torch::jit::Module + define(), saved and loaded): its
// scale attribute, the output-shape check, and clear errors for files that break the contract.
#include <gtest/gtest.h>
#include <torch/script.h>

#include <fstream>

#include "models/generator/torchscript_enhancer.h"
#include "temp_dir.h"

namespace fusion::models {
namespace {

// Saves a module with an int attribute `scale` (unless scale < 0) and `body` as forward's return.
std::string SaveEnhancer(const testing::TempDir& dir, const std::string& file, int scale, const std::string& body) {
  torch::jit::Module m("TestEnhancer");
  if (scale >= 0) m.register_attribute("scale", c10::IntType::get(), scale);
  m.register_buffer("gain", torch::full({1}, 2.0));
  m.define("def forward(self, x):\n    return " + body + "\n");
  const std::string path = dir.File(file);
  m.save(path);
  return path;
}

TEST(TorchScriptEnhancer, RunsItsForwardAtItsScale) {
  testing::TempDir dir;
  auto e = TorchScriptEnhancer::Load(SaveEnhancer(
      dir, "x2.pt", 2, "x.repeat_interleave(2, 2).repeat_interleave(2, 3) * self.gain"));
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ((*e)->scale(), 2);
  ASSERT_TRUE((*e)->MoveTo("cpu").ok());
  const at::Tensor x = torch::rand({1, 3, 8, 6}) * 255;
  auto y = (*e)->Forward(x);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->sizes(), (std::vector<int64_t>{1, 3, 16, 12}));
  EXPECT_FLOAT_EQ((*y)[0][1][5][3].item<float>(), 2 * x[0][1][2][1].item<float>());
}

TEST(TorchScriptEnhancer, BrokenContractsAreNamedErrors) {
  testing::TempDir dir;
  EXPECT_EQ(TorchScriptEnhancer::Load(dir.File("none.pt")).status().code(), absl::StatusCode::kNotFound);
  auto no_scale = TorchScriptEnhancer::Load(SaveEnhancer(dir, "noscale.pt", -1, "x"));
  EXPECT_EQ(no_scale.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(no_scale.status().message().find("'scale' of 2 or 4"), std::string::npos) << no_scale.status();
  EXPECT_EQ(TorchScriptEnhancer::Load(SaveEnhancer(dir, "x3.pt", 3, "x")).status().code(),
            absl::StatusCode::kInvalidArgument);
  // Claims x4 but returns its input: the output check names the file and the shape it wanted.
  auto same = TorchScriptEnhancer::Load(SaveEnhancer(dir, "same.pt", 4, "x"));
  ASSERT_TRUE(same.ok()) << same.status();
  auto out = (*same)->Forward(torch::rand({1, 3, 4, 4}));
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInternal);
  EXPECT_NE(out.status().message().find("same.pt"), std::string::npos);
  EXPECT_NE(out.status().message().find("[1,3,16,16]"), std::string::npos) << out.status();
  EXPECT_EQ((*same)->Forward(torch::rand({3, 4, 4})).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*same)->MoveTo("nodevice").code(), absl::StatusCode::kInternal);
  // A failure inside forward: the error's own line, not the interpreter's tracebacks.
  auto bad = TorchScriptEnhancer::Load(SaveEnhancer(dir, "bad.pt", 2, "x.view(7, -1)"));
  ASSERT_TRUE(bad.ok()) << bad.status();
  auto failed = (*bad)->Forward(torch::rand({1, 3, 4, 4}));
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kInternal);
  EXPECT_NE(failed.status().message().find("bad.pt' forward failed: RuntimeError: shape '[7, -1]'"), std::string::npos)
      << failed.status();
  EXPECT_EQ(failed.status().message().find("Traceback"), std::string::npos) << failed.status();
}

}  // namespace
}  // namespace fusion::models
