// models/onednn for builds that link no oneDNN of their own: those against PyPI's LibTorch
// (scripts/build-cuda.sh; models/onednn/CMakeLists.txt says why). Available(), Enabled() and
// Bf16Native() are false, so every network builds no Program and runs its at:: path on the CPU
// (LibTorch's own, internal oneDNN). Builder records a graph as program.cc's does; Build refuses
// (UNAVAILABLE), so no Program ever exists in such a build and its members below are unreachable.
#include "models/onednn/program.h"

#include "absl/status/status.h"

namespace fusion::onednn {

bool Available() { return false; }
bool Usable(const at::Tensor&) { return false; }
bool Enabled() { return false; }
bool Bf16Native() { return false; }
bool AmxNative() { return false; }
bool CapIsa() { return false; }
Precision PrecisionFor(std::string_view, Precision) { return Precision::kF32; }

Fp32Scope::Fp32Scope() : was_(false) {}
Fp32Scope::~Fp32Scope() = default;

struct Program::Builder::Op {};
struct Program::Impl {};

int Program::Builder::Push(Op op) {
  ops_.push_back(std::make_shared<Op>(op));
  return static_cast<int>(ops_.size());
}
int Program::Builder::Conv(int, ConvSpec) { return Push({}); }
int Program::Builder::Pool(int, PoolSpec) { return Push({}); }
int Program::Builder::Relu(int) { return Push({}); }
int Program::Builder::Normalize(int, at::Tensor, float) { return Push({}); }
int Program::Builder::Concat(std::vector<int>) { return Push({}); }
int Program::Builder::Add(std::vector<int>) { return Push({}); }
int Program::Builder::Upsample(int, int) { return Push({}); }
int Program::Builder::DepthToSpace(int, int) { return Push({}); }
int Program::Builder::ResidualDown(int, int) { return Push({}); }
void Program::Builder::MarkOutput(int v) { outputs_.push_back(v); }

absl::StatusOr<std::unique_ptr<Program>> Program::Builder::Build(int, int, int) && {
  return absl::UnavailableError(
      "onednn: this build has no oneDNN fast path (built against PyPI's LibTorch); use the at:: path");
}

Program::~Program() = default;
std::vector<at::Tensor> Program::Run(const at::Tensor&, const std::vector<at::Tensor>&) const { return {}; }
std::vector<std::string> Program::packed_names() const { return {}; }
uint64_t Program::PackedBytes() const { return 0; }
Precision Program::precision() const { return Precision::kF32; }
std::vector<std::pair<std::string, at::Tensor>> Program::PlainWeights() const { return {}; }
std::string Program::Describe() const { return ""; }
std::string Program::Describe(at::IntArrayRef) const { return ""; }

}  // namespace fusion::onednn
