// onednn::Program: a small convolutional network compiled for oneDNN on the CPU.
//
// Why: calling at::mkldnn_convolution per layer re-lays out every activation (NCHW -> blocked
// -> NCHW) and every weight (OIHW -> blocked) on each call, with no fusion. A Program keeps the
// activations in NHWC (what oneDNN 2.6's AVX-512 kernels want) from the input to the outputs, holds each weight
// reordered once (at Build) into the layout its convolution wants, fuses bias, a per-channel
// affine, a residual sum and the activation into the convolution (oneDNN post-ops), writes a
// residual sum in place, and packs every activation of one run into one arena by liveness.
// The oneDNN used is the one Debian's LibTorch links (libdnnl2 2.6); builds against PyPI's
// LibTorch have none (Available()).
//
// Tensors: Run takes x [N,C,H,W] float32 CPU, NCHW-contiguous or channels-last (another
// Program's output; anything else is made contiguous) and returns the marked outputs as dense
// float32 [N,C',H',W'] CPU tensors in channels-last memory format (oneDNN's NHWC, which the
// activations use throughout), in MarkOutput order.
// Weights are packed in the layout oneDNN picks, unless that is more than 1/16 larger than the
// plain weight (output channels padded to its vector width): then HWIO (its JIT GEMM kernel),
// so that the packed bytes stay within 1/16 of the fp32 parameters (the meter measures them; a
// brgemm layout of 512 outputs in 48-row blocks, +3%, runs 1.7x the GEMM's speed);
// Builder::AllowPadding() keeps any padded layout instead. In bf16 (Builder::SetPrecision) a
// padded layout is kept while it stays within the weight's fp32 bytes (3 input channels padded
// to the kernel's pairs: oneDNN 2.6's bf16 GEMM convolution is ~30x slower than its brgemm), and
// a convolution that has only oneDNN's reference kernel in bf16 at the Build shape is kept fp32
// (its input reordered to fp32, its output fp32 where it goes; FaceRecognitionNet's last two).
// Plans are per (input shape, layout, at::get_num_threads()): oneDNN's OpenMP kernels fix their
// thread count when they are made, so each thread count gets its own primitives.
// Arenas of 4 MiB and more are advised as transparent huge pages (fewer page faults per run).
// Memory (DESIGN §3): the packed weights, the arena (activations of one run) and oneDNN's
// scratchpad (user mode) are c10 CPU allocations, so the budget allocator charges them to the
// caller's device scope: the weights to the model's scope at Build (a packed weight replaces
// the plain one: the network drops it, see packed_names()), a run's buffers to the stage that
// runs it (freed when Run returns). Not charged: oneDNN's primitive objects and JIT code
// (library heap, tens of KB per layer and input shape; at most kMaxPlans shapes are kept).
// Shapes: the convolution/pool geometry is computed per input shape (TF "SAME" padding depends
// on the side); each new shape (and thread count) builds a plan (primitive descriptors, arena
// layout) once.
// Errors: Build returns INVALID_ARGUMENT for an inconsistent graph; Run throws dnnl::error or
// c10::Error (callers catch at their edge, as for LibTorch ops).
// Thread-safety: Run is const and may run concurrently (plans are built under a mutex and
// immutable after; each run has its own arena and scratchpad).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace fusion::onednn {

// This build has the fast path: false in builds against PyPI's LibTorch, which link no oneDNN of
// their own (program_without_onednn.cc; models/onednn/CMakeLists.txt says why). There Enabled(),
// Bf16Native() and Usable() are false too and every network runs its at:: path.
bool Available();
// The CPU fast path is usable: fp32 input on the CPU, no CPU autocast active.
bool Usable(const at::Tensor& x);
// Networks compile Programs at Create unless the environment sets FUSION_ONEDNN=0 (the at::
// path then: for A/B measurements in one process, and as a way out should oneDNN misbehave).
bool Enabled();

// The data type a Program computes in. kBf16: weights packed as bf16 at Build (the resident
// copy: half the fp32 bytes, as laid out), activations bf16 between layers; Run still takes and
// returns fp32 (the first convolution reads the input through a reorder, the outputs are
// reordered back); bias, per-channel affines and accumulation stay fp32 (oneDNN's bf16
// convolutions accumulate in fp32). Not exact: each layer's input and weights are rounded to
// 8 significant bits, so a network uses it only where its output stays within its tolerance.
enum class Precision { kF32, kBf16 };
// This CPU runs bf16 natively (oneDNN's effective ISA includes avx512_core_bf16, i.e.
// AVX512-BF16 dot products, or AMX; oneDNN 2.6 asks Linux for the AMX tile state itself,
// arch_prctl(ARCH_REQ_XCOMP_PERM)). Elsewhere oneDNN would emulate bf16, slower than fp32.
bool Bf16Native();
// Caps oneDNN's ISA for the process at AVX512-BF16 (no AMX), once, before its first primitive,
// unless ONEDNN_MAX_CPU_ISA or DNNL_MAX_CPU_ISA is set (the user's choice). Reason: Debian 12's
// oneDNN 2.7 crashed (SIGSEGV in its JIT code generation, creating FaceRecognitionNet's
// convolutions) in about 1 of 14 daemon runs of the video process tests on a Sapphire Rapids CPU
// with AMX; CPUs without AMX are not changed. The functions here call it first; fusiond's backend
// calls it at start (LibTorch shares this libdnnl). False when not capped (the variable is set,
// or oneDNN had already fixed its ISA).
bool CapIsa();
// This CPU has AMX tiles for bf16 (oneDNN's effective ISA includes avx512_core_amx): its bf16
// kernels pack weights in other layouts, so a network's resident bytes differ (tests name both).
bool AmxNative();
// The precision network `net` (its catalogue name) compiles in: `fallback` (the network's
// measured default) unless FUSION_ONEDNN_PRECISION says otherwise, as "bf16" or "fp32" for
// every net, or per net "ssd_mobilenetv1=bf16,tiny_face_detector=fp32" (a net's own entry wins
// over a bare value). kBf16 only where Bf16Native(), else kF32.
Precision PrecisionFor(std::string_view net, Precision fallback);
// While one lives, PrecisionFor on this thread answers kF32 whatever the defaults and the
// environment: for a network built on the CPU to be moved to another device (its weights go
// there through PlainWeights(), which would carry a bf16 program's rounding).
class Fp32Scope {
 public:
  Fp32Scope();
  ~Fp32Scope();
  Fp32Scope(const Fp32Scope&) = delete;
  Fp32Scope& operator=(const Fp32Scope&) = delete;

 private:
  bool was_;
};

enum class Activation { kNone, kRelu, kLeakyRelu, kClip };  // kClip: min(max(x, 0), alpha)
enum class Padding { kValid, kSame, kExplicit };            // kSame: TensorFlow's (asymmetric)

struct ConvSpec {
  std::string name;       // the weight's name (packed_names(), PlainWeights())
  at::Tensor weight;      // OIHW fp32 contiguous CPU; depthwise: [C,1,k,k]
  at::Tensor bias;        // [O] or undefined
  at::Tensor scale;       // optional [O]: y = (conv + bias) * scale + shift
  at::Tensor shift;       // optional [O] (with scale)
  int stride = 1;
  bool depthwise = false;
  Padding padding = Padding::kValid;
  int pad = 0;            // kExplicit: on every side
  Activation act = Activation::kNone;
  float alpha = 0;        // kLeakyRelu: slope; kClip: upper bound
  int sum = -1;           // a value added before the activation; the conv writes into its buffer,
                          // so this must be that value's last use (and not the input)
  bool fp32 = false;      // kept fp32 in a bf16 program (a network's precision-sensitive tail)
  int affine_arg = -1;    // instead of scale/shift: Run's args[affine_arg], args[affine_arg + 1]
                          // (computed per call, e.g. from batch-norm statistics: nothing resident)
};

struct PoolSpec {
  bool max = true;        // else average (no padding)
  int k = 2, stride = 2;
  bool ceil_mode = false; // max: a last window starting inside the input (torch ceil_mode)
  bool same = false;      // max: TF "SAME" (padded windows ignore the outside)
};

class Program {
 public:
  class Builder {
   public:
    int input() const { return 0; }
    int Conv(int x, ConvSpec spec);
    int Pool(int x, PoolSpec spec);
    int Relu(int x);
    // (x - mean[c]) / divisor, in x's layout: a network's input normalisation in one pass, the
    // same IEEE operations as at::'s (x - mean) / divisor. mean: [C] fp32 (held by the program,
    // a few bytes, not packed).
    int Normalize(int x, at::Tensor mean, float divisor);
    int Concat(std::vector<int> xs);  // along channels
    int Add(std::vector<int> xs);     // elementwise sum of equal shapes
    int Upsample(int x, int factor);  // nearest, as at::upsample_nearest2d by an integer factor
    // TF depthToSpace (DCR): out[c, h*s+i, w*s+j] = x[(i*s+j)*C' + c, h, w], C' = C/(s*s); x must
    // be NHWC (a convolution's output). With a conv on the low-resolution side it replaces a
    // nearest upsample followed by a conv (keras_model.cc), exactly, without the upsampled tensor.
    int DepthToSpace(int x, int factor);
    // dlib's strided shortcut (FaceRecognitionNet ResidualDown): relu(o' + p') where o' is o
    // zero-padded at the bottom/right to p's size and p' is p zero-extended to o's channels.
    int ResidualDown(int o, int pooled);
    void MarkOutput(int v);
    // Keeps oneDNN's padded layouts (faster for convolutions with few output channels, e.g.
    // ESRGAN's 64->4 and 48->3; measured 1.2-1.3x for the whole net): the packed bytes then
    // exceed the parameters' (PackedBytes() says by how much; the budget's meter measures it).
    void AllowPadding() { allow_padding_ = true; }
    void SetPrecision(Precision p) { precision_ = p; }
    // Packs every convolution's weight for an input [1,c,h,w] (the network's usual size).
    absl::StatusOr<std::unique_ptr<Program>> Build(int c, int h, int w) &&;

    struct Op;  // program.cc

   private:
    int Push(Op op);
    std::vector<std::shared_ptr<Op>> ops_;  // ops_[v - 1] produces value v
    std::vector<int> outputs_;
    bool allow_padding_ = false;
    Precision precision_ = Precision::kF32;
  };

  ~Program();
  // args: the per-call [O] fp32 contiguous tensors that ConvSpec::affine_arg names.
  std::vector<at::Tensor> Run(const at::Tensor& x, const std::vector<at::Tensor>& args = {}) const;

  // Names of the weights held packed (no longer needed in their plain form), and their bytes.
  std::vector<std::string> packed_names() const;
  uint64_t PackedBytes() const;
  Precision precision() const;
  // The packed weights back in OIHW fp32, by name: for moving a network off the CPU (exact for
  // kF32; for kBf16 the bf16 values, which is all the program holds).
  std::vector<std::pair<std::string, at::Tensor>> PlainWeights() const;
  // A one-line summary of the implementations oneDNN chose at the Build shape (tests, bench).
  std::string Describe() const;
  // The same for the plan of an NCHW input of `sizes` (built if new): tests check that no
  // shape falls to oneDNN's reference kernels ("ref:").
  std::string Describe(at::IntArrayRef sizes) const;

  static constexpr int kMaxPlans = 16;

 private:
  struct Impl;
  explicit Program(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace fusion::onednn
