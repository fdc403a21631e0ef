// The CPU fast path (onednn::Program): each op against its at:: meaning on random data,
// the graph checks, the packed weights' round trip, and every face-api network's fast path
// against its at:: path (FUSION_ONEDNN=0) with the real weights.
#include "models/onednn/program.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <chrono>
#include <cstdlib>
#include <thread>
#include <vector>

#include "faceapi_fixture.h"
#include "models/faceapi/ops.h"
#include "models/faceapi/ssd_mobilenet_v1.h"

namespace fusion::onednn {
namespace {

double MaxDiff(const at::Tensor& a, const at::Tensor& b) {
  EXPECT_EQ(a.sizes(), b.sizes());
  return (a - b).abs().max().item<double>();
}

std::unique_ptr<Program> BuildOrDie(Program::Builder b, int c, int h, int w) {
  auto p = std::move(b).Build(c, h, w);
  if (!p.ok()) throw std::runtime_error(p.status().ToString());
  return *std::move(p);
}

TEST(OnednnProgram, SameStride2ConvWithAffineAndClipEqualsAtOpsOnOddAndEvenSides) {
  at::manual_seed(1);
  const at::Tensor w = at::randn({24, 8, 3, 3}), bias = at::randn({24}), scale = at::rand({24}) + 0.5,
                   shift = at::randn({24});
  Program::Builder b;
  b.MarkOutput(b.Conv(b.input(), {.name = "w", .weight = w, .bias = bias, .scale = scale, .shift = shift,
                                  .stride = 2, .padding = Padding::kSame, .act = Activation::kClip, .alpha = 0.5f}));
  auto prog = BuildOrDie(std::move(b), 8, 20, 20);
  for (int side : {20, 17, 9}) {  // the build shape, then new plans (TF padding differs on odd sides)
    const at::Tensor x = at::randn({1, 8, side, side + 2});
    const at::Tensor ref = at::clamp(
        faceapi::ops::ChannelAffine(faceapi::ops::Conv(x, w, bias, 2, /*same=*/true), scale, shift), 0, 0.5);
    EXPECT_LT(MaxDiff(prog->Run(x)[0], ref), 1e-4) << side;
  }
}

TEST(OnednnProgram, DepthwisePointwiseLeakyPoolsAndInPlaceSumEqualAtOps) {
  at::manual_seed(2);
  const at::Tensor dw = at::randn({16, 1, 3, 3}), pw = at::randn({16, 16, 1, 1}), pb = at::randn({16});
  Program::Builder b;
  const int d = b.Conv(b.input(), {.name = "dw", .weight = dw, .depthwise = true, .padding = Padding::kExplicit, .pad = 1});
  const int s = b.Conv(d, {.name = "pw", .weight = pw, .bias = pb, .act = Activation::kLeakyRelu, .alpha = 0.1f,
                           .sum = d});  // relu'(pw(d) + d), written over d
  b.MarkOutput(b.Pool(s, {.k = 2, .stride = 2, .ceil_mode = true}));
  b.MarkOutput(b.Pool(s, {.k = 2, .stride = 1, .same = true}));
  b.MarkOutput(b.Pool(b.Relu(s), {.max = false, .k = 2, .stride = 2}));
  auto prog = BuildOrDie(std::move(b), 16, 13, 13);
  const at::Tensor x = at::randn({1, 16, 13, 11});
  const at::Tensor dref = faceapi::ops::Conv2d(at::constant_pad_nd(x, {1, 1, 1, 1}), dw, at::Tensor(), 1, 16);
  const at::Tensor sref = at::leaky_relu(faceapi::ops::Conv2d(dref, pw, pb) + dref, 0.1);
  const std::vector<at::Tensor> out = prog->Run(x);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_LT(MaxDiff(out[0], faceapi::ops::MaxPool(sref, 2, 2, /*ceil_mode=*/true)), 1e-4);
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_LT(MaxDiff(out[1], faceapi::ops::MaxPool(faceapi::ops::PadSame(sref, 2, 1, -inf), 2, 1)), 1e-4);
  EXPECT_LT(MaxDiff(out[2], at::avg_pool2d(at::relu(sref), {2, 2}, {2, 2})), 1e-4);
}

TEST(OnednnProgram, ResidualDownPadsTheBranchAndWidensThePooledShortcut) {
  at::manual_seed(3);
  Program::Builder b;
  const at::Tensor w = at::randn({32, 16, 3, 3});
  const int o = b.Conv(b.input(), {.name = "w", .weight = w, .stride = 2});  // VALID: 8 -> 3
  b.MarkOutput(b.ResidualDown(o, b.Pool(b.input(), {.max = false, .k = 2, .stride = 2})));  // pool: 8 -> 4
  auto prog = BuildOrDie(std::move(b), 16, 8, 8);
  const at::Tensor x = at::rand({1, 16, 8, 8});  // >= 0, as the ReLU outputs it follows in the net
  at::Tensor branch = at::constant_pad_nd(faceapi::ops::Conv2d(x, w, at::Tensor(), 2), {0, 1, 0, 1}, 0.0);
  at::Tensor pooled = at::avg_pool2d(x, {2, 2}, {2, 2});
  pooled = at::cat({pooled, at::zeros_like(pooled)}, 1);
  EXPECT_LT(MaxDiff(prog->Run(x)[0], at::relu(branch + pooled)), 1e-4);
}

TEST(OnednnProgram, NormalizeEqualsAtOpsOnNchwAndChannelsLastInputs) {
  at::manual_seed(6);
  const at::Tensor mean = at::tensor({117.f, 114.5f, 97.25f});
  Program::Builder b;
  b.MarkOutput(b.Conv(b.Normalize(b.input(), mean, 255.f),
                      {.name = "w", .weight = at::randn({8, 3, 3, 3}), .padding = Padding::kSame}));
  b.MarkOutput(b.Normalize(b.input(), mean, 255.f));
  auto prog = BuildOrDie(std::move(b), 3, 12, 12);
  const at::Tensor x = at::rand({1, 3, 12, 10}) * 255;
  const at::Tensor ref = (x - mean.view({1, 3, 1, 1})) / 255.f;
  EXPECT_TRUE(at::equal(prog->Run(x)[1], ref));  // the same IEEE sub and div
  EXPECT_TRUE(at::equal(prog->Run(x.contiguous(at::MemoryFormat::ChannelsLast))[1], ref));
  EXPECT_EQ(prog->Describe().find("ref:"), std::string::npos) << prog->Describe();
}

TEST(OnednnProgram, SummingAValueReadLaterIsRefusedAtBuild) {
  Program::Builder b;
  const int a = b.Conv(b.input(), {.name = "a", .weight = at::randn({16, 16, 1, 1})});
  const int s = b.Conv(a, {.name = "b", .weight = at::randn({16, 16, 1, 1}), .sum = a});
  b.MarkOutput(s);
  b.MarkOutput(a);  // read after the sum overwrote it
  auto prog = std::move(b).Build(16, 4, 4);
  EXPECT_EQ(prog.status().code(), absl::StatusCode::kInvalidArgument) << prog.status();
}

TEST(OnednnProgram, PackedWeightsComeBackExactly) {
  at::manual_seed(4);
  const at::Tensor w = at::randn({40, 24, 3, 3}), dw = at::randn({40, 1, 5, 5});
  Program::Builder b;
  b.MarkOutput(b.Conv(b.Conv(b.input(), {.name = "w", .weight = w, .padding = Padding::kSame}),
                      {.name = "dw", .weight = dw, .depthwise = true, .padding = Padding::kSame}));
  auto prog = BuildOrDie(std::move(b), 24, 16, 16);
  EXPECT_EQ(prog->packed_names(), (std::vector<std::string>{"w", "dw"}));
  EXPECT_GE(prog->PackedBytes(), static_cast<uint64_t>(w.nbytes() + dw.nbytes()));
  for (const auto& [name, t] : prog->PlainWeights()) EXPECT_TRUE(at::equal(t, name == "w" ? w : dw)) << name;
}

// bf16 (program.h): the same graph built twice, fp32 and bf16. The bf16 program must differ from
// fp32 (it really rounds: a bf16 program that ran fp32 would fail here), stay within bf16's
// rounding of it, hold its weights in half the bytes, and run oneDNN's native bf16 kernels.
TEST(OnednnProgram, Bf16ProgramRoundsToBf16AndHoldsHalfTheWeightBytes) {
  if (!Bf16Native()) GTEST_SKIP() << "this CPU has no native bf16 (AVX512-BF16 or AMX)";
  at::manual_seed(7);
  const at::Tensor w1 = at::randn({32, 16, 3, 3}) * 0.1, b1 = at::randn({32}), w2 = at::randn({32, 1, 3, 3}),
                   w3 = at::randn({64, 32, 1, 1}) * 0.1, b3 = at::randn({64}), w4 = at::randn({32, 32, 3, 3}) * 0.1;
  auto build = [&](Precision precision) {
    Program::Builder b;
    b.SetPrecision(precision);
    const int c1 = b.Conv(b.input(), {.name = "w1", .weight = w1.clone(), .bias = b1, .padding = Padding::kSame,
                                      .act = Activation::kRelu});
    const int d = b.Conv(c1, {.name = "w2", .weight = w2.clone(), .stride = 2, .depthwise = true,
                              .padding = Padding::kSame, .act = Activation::kClip, .alpha = 6.f});
    const int p = b.Pool(d, {.k = 2, .stride = 2, .ceil_mode = true});
    b.MarkOutput(b.Conv(p, {.name = "w3", .weight = w3.clone(), .bias = b3, .act = Activation::kLeakyRelu, .alpha = 0.1f}));
    // ResidualDown (FaceRecognitionNet's shortcut) on bf16 values.
    const int o = b.Conv(c1, {.name = "w4", .weight = w4.clone(), .stride = 2});
    b.MarkOutput(b.ResidualDown(o, b.Pool(c1, {.max = false, .k = 2, .stride = 2})));
    return BuildOrDie(std::move(b), 16, 24, 24);
  };
  auto f32 = build(Precision::kF32), bf16 = build(Precision::kBf16);
  EXPECT_EQ(f32->precision(), Precision::kF32);
  EXPECT_EQ(bf16->precision(), Precision::kBf16);
  EXPECT_EQ(bf16->PackedBytes() * 2, f32->PackedBytes());
  EXPECT_EQ(bf16->Describe().find("ref:"), std::string::npos) << bf16->Describe();
  EXPECT_NE(bf16->Describe().find("bf16"), std::string::npos) << bf16->Describe();
  for (int side : {24, 19}) {
    const at::Tensor x = at::rand({1, 16, side, side});
    const std::vector<at::Tensor> a = f32->Run(x), b = bf16->Run(x);
    ASSERT_EQ(b.size(), 2u);
    for (int k = 0; k < 2; ++k) {
      EXPECT_EQ(b[k].scalar_type(), at::kFloat);
      const double scale = a[k].abs().max().item<double>(), diff = MaxDiff(a[k], b[k]);
      EXPECT_GT(diff, 1e-6 * scale) << side << " output " << k << ": bf16 equals fp32, so it did not round";
      EXPECT_LT(diff, 3e-2 * scale) << side << " output " << k;
    }
  }
  for (const auto& [name, t] : bf16->PlainWeights()) {  // the bf16 values, as fp32
    const at::Tensor& w = name == "w1" ? w1 : name == "w2" ? w2 : name == "w3" ? w3 : w4;
    EXPECT_TRUE(at::equal(t, w.to(at::kBFloat16).to(at::kFloat))) << name;
  }
}

TEST(OnednnProgram, PrecisionForReadsTheEnvironmentPerNetwork) {
  const Precision bf16 = Bf16Native() ? Precision::kBf16 : Precision::kF32;
  unsetenv("FUSION_ONEDNN_PRECISION");
  EXPECT_EQ(PrecisionFor("a", Precision::kF32), Precision::kF32);
  EXPECT_EQ(PrecisionFor("a", Precision::kBf16), bf16);
  setenv("FUSION_ONEDNN_PRECISION", "bf16", 1);
  EXPECT_EQ(PrecisionFor("a", Precision::kF32), bf16);
  setenv("FUSION_ONEDNN_PRECISION", "a=fp32,bf16", 1);
  EXPECT_EQ(PrecisionFor("a", Precision::kBf16), Precision::kF32);
  EXPECT_EQ(PrecisionFor("b", Precision::kF32), bf16);
  setenv("FUSION_ONEDNN_PRECISION", "b=bf16", 1);
  EXPECT_EQ(PrecisionFor("a", Precision::kBf16), bf16);
  EXPECT_EQ(PrecisionFor("b", Precision::kF32), bf16);
  unsetenv("FUSION_ONEDNN_PRECISION");
}

double CpuSeconds(int who) {
  rusage u{};
  getrusage(who, &u);
  return u.ru_utime.tv_sec + u.ru_stime.tv_sec + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

// CPU seconds that threads other than this one spent during fn (oneDNN's OpenMP team).
template <typename F>
double OtherThreadsCpu(F fn) {
  const double self0 = CpuSeconds(RUSAGE_SELF), me0 = CpuSeconds(RUSAGE_THREAD);
  fn();
  return (CpuSeconds(RUSAGE_SELF) - self0) - (CpuSeconds(RUSAGE_THREAD) - me0);
}

// oneDNN fixes a primitive's thread team when it is made: a Program built at 2 threads must
// still run on this thread alone after at::set_num_threads(1) (it did not before plans were
// keyed by the thread count), and on two again at 2.
TEST(OnednnProgram, RunFollowsTheCallersThreadCount) {
  const char* policy = std::getenv("OMP_WAIT_POLICY");
  if (std::thread::hardware_concurrency() < 2 || (policy && std::string(policy) == "ACTIVE")) {
    GTEST_SKIP() << "needs 2 cores and OpenMP threads that go to sleep";
  }
  const int before = at::get_num_threads();
  at::set_num_threads(2);
  at::manual_seed(5);
  Program::Builder b;
  b.MarkOutput(b.Conv(b.input(), {.name = "w", .weight = at::randn({64, 64, 3, 3}), .padding = Padding::kSame}));
  auto prog = BuildOrDie(std::move(b), 64, 96, 96);  // plan made at 2 threads
  const at::Tensor x = at::randn({1, 64, 96, 96});
  auto runs = [&] {
    for (int i = 0; i < 5; ++i) prog->Run(x);
  };
  const at::Tensor two = prog->Run(x)[0];
  const double at_two = OtherThreadsCpu(runs);
  at::set_num_threads(1);
  const at::Tensor one = prog->Run(x)[0];  // the 1-thread plan
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the team stops spinning
  const double me0 = CpuSeconds(RUSAGE_THREAD);
  const double at_one = OtherThreadsCpu(runs);
  const double mine = CpuSeconds(RUSAGE_THREAD) - me0;
  at::set_num_threads(before);
  EXPECT_LT(MaxDiff(one, two), 1e-4);
  EXPECT_LT(at_one, 0.05 * mine) << "other threads " << at_one << " s, this one " << mine << " s";
  EXPECT_GT(at_two, 0.1 * mine) << "other threads at 2: " << at_two << " s";
}

// The face-api networks built twice: the at:: path (FUSION_ONEDNN=0) and the fast path.
// The fast path in fp32 whatever the nets' defaults (these compare it with the at:: path to 1e-4).
template <typename Net, typename... Args>
std::unique_ptr<Net> LoadPath(bool fast, Args&&... args) {
  setenv("FUSION_ONEDNN", fast ? "1" : "0", 1);
  setenv("FUSION_ONEDNN_PRECISION", "fp32", 1);
  auto net = Net::Load(faceapi::Catalogue(), std::forward<Args>(args)...);
  unsetenv("FUSION_ONEDNN");
  unsetenv("FUSION_ONEDNN_PRECISION");
  if (!net.ok()) throw std::runtime_error(net.status().ToString());
  return *std::move(net);
}

// The fast path in `precision` ("fp32" | "bf16").
template <typename Net, typename... Args>
std::unique_ptr<Net> LoadAs(const char* precision, Args&&... args) {
  setenv("FUSION_ONEDNN_PRECISION", precision, 1);
  auto net = Net::Load(faceapi::Catalogue(), std::forward<Args>(args)...);
  unsetenv("FUSION_ONEDNN_PRECISION");
  if (!net.ok()) throw std::runtime_error(net.status().ToString());
  return *std::move(net);
}

TEST(FastPath, EveryFaceApiNetworkMatchesItsAtPath) {
  c10::NoGradGuard no_grad;
  const cv::Mat rgb = faceapi::Face("astronaut_eileen_collins_512.png");
  {
    auto a = LoadPath<faceapi::TinyFaceDetector>(false, faceapi::TinyFaceDetector::Options{});
    auto b = LoadPath<faceapi::TinyFaceDetector>(true, faceapi::TinyFaceDetector::Options{});
    for (int size : {416, 320, 608}) {  // 608: odd grids (19) below
      const at::Tensor x = faceapi::ToBatchTensor(rgb, size, false);
      const at::Tensor out = b->Forward(x);
      EXPECT_TRUE(out.is_contiguous());
      EXPECT_LT(MaxDiff(a->Forward(x), out), 1e-3) << size;
      EXPECT_LT(MaxDiff(a->Forward(x, 128), b->Forward(x, 128)), 1e-3) << size << " tiled";
    }
  }
  {
    auto a = LoadPath<faceapi::SsdMobilenetV1>(false, faceapi::SsdMobilenetV1::Options{});
    auto b = LoadPath<faceapi::SsdMobilenetV1>(true, faceapi::SsdMobilenetV1::Options{});
    const at::Tensor x = faceapi::ToBatchTensor(rgb, 512, false);
    const auto [ba, sa] = a->Forward(x);
    const auto [bb, sb] = b->Forward(x);
    EXPECT_LT(MaxDiff(ba, bb), 1e-4);
    EXPECT_LT(MaxDiff(sa, sb), 1e-4);
  }
  {
    auto a = LoadPath<faceapi::FaceLandmark68Net>(false);
    auto b = LoadPath<faceapi::FaceLandmark68Net>(true);
    const at::Tensor x = faceapi::ToBatchTensor(rgb, 112, true);
    EXPECT_LT(MaxDiff(a->Forward(x), b->Forward(x)), 1e-4);
    EXPECT_EQ(b->ResidentBytes(), a->ResidentBytes());  // packed in place, nothing padded
  }
  {
    auto a = LoadPath<faceapi::FaceRecognitionNet>(false);
    auto b = LoadPath<faceapi::FaceRecognitionNet>(true);
    const at::Tensor x = faceapi::ToBatchTensor(rgb, 150, true);
    EXPECT_LT(MaxDiff(a->Forward(x), b->Forward(x)), 1e-4);
    EXPECT_EQ(b->ResidentBytes(), a->ResidentBytes());
    EXPECT_EQ(a->ResidentBytes(), a->DeviceBytes());
  }
}

TEST(FastPath, ResidentBytesCountThePackedWeightsOnce) {
  auto a = LoadPath<faceapi::TinyFaceDetector>(false, faceapi::TinyFaceDetector::Options{});
  auto b = LoadPath<faceapi::TinyFaceDetector>(true, faceapi::TinyFaceDetector::Options{});
  EXPECT_EQ(a->ResidentBytes(), a->DeviceBytes());
  EXPECT_EQ(b->DeviceBytes(), a->DeviceBytes());
  // The packed copy replaces the plain one: never a second copy, nothing per call kept. It is
  // padded by at most 1/16 (program.h; conv8's 25 outputs are HWIO, brgemm's 48-row blocks of
  // 512 outputs add 3% to those layers): measured 789,668 against 773,284 bytes for the tiny
  // detector (+2.1%), 22,402,300 against 22,222,076 for SSD (+0.8%).
  EXPECT_GE(b->ResidentBytes(), b->DeviceBytes());
  EXPECT_LE(b->ResidentBytes(), b->DeviceBytes() + b->DeviceBytes() / 16);
  auto ssd = LoadPath<faceapi::SsdMobilenetV1>(true, faceapi::SsdMobilenetV1::Options{});
  EXPECT_GE(ssd->ResidentBytes(), ssd->DeviceBytes());
  EXPECT_LE(ssd->ResidentBytes(), ssd->DeviceBytes() + ssd->DeviceBytes() / 16);
}

// oneDNN's brgemm kernels block weights by shape; a packed layout another shape's kernel does
// not take must be re-packed for it, not left to the reference kernel (1000x slower: the
// multi-scale detector's 1024-px passes took minutes).
TEST(FastPath, NoInputSizeFallsToAReferenceKernel) {
  for (int size : {416, 160, 640, 1024, 1280}) {
    const std::string kernels = faceapi::Tiny().FastPathKernels(size);
    EXPECT_FALSE(kernels.empty());
    EXPECT_EQ(kernels.find("ref:"), std::string::npos) << size << ": " << kernels;
  }
}

TEST(FastPath, ConcurrentForwardsOfOneNetworkAgreeWithASerialRun) {
  c10::NoGradGuard no_grad;
  const faceapi::TinyFaceDetector& net = faceapi::Tiny();
  const cv::Mat rgb = faceapi::Face("grace_hopper_512x600.jpg");
  const at::Tensor x416 = faceapi::ToBatchTensor(rgb, 416, false), x288 = faceapi::ToBatchTensor(rgb, 288, false);
  const at::Tensor r416 = net.Forward(x416), r288 = net.Forward(x288);
  std::vector<double> worst(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      c10::NoGradGuard g;
      for (int i = 0; i < 4; ++i) {
        const bool big = (i + t) % 2 == 0;
        worst[t] = std::max(worst[t], MaxDiff(net.Forward(big ? x416 : x288), big ? r416 : r288));
      }
    });
  }
  for (auto& th : threads) th.join();
  for (double w : worst) EXPECT_LT(w, 1e-4);
}

// bf16 fast path (program.h) against the numpy reference's goldens, with the tolerances of
// faceapi_test.cc (box IoU > 0.9 and score within 0.02, landmarks within 2 px, descriptor L2 <
// 0.05), whatever each net's default; and its resident bytes: the conv weights held as bf16 (half
// their fp32 bytes as packed), biases and scales fp32.
TEST(Bf16FastPath, FaceApiGoldensHoldWithTheSameTolerances) {
  if (!Bf16Native()) GTEST_SKIP() << "this CPU has no native bf16 (AVX512-BF16 or AMX)";
  c10::NoGradGuard no_grad;
  auto tiny = LoadAs<faceapi::TinyFaceDetector>("bf16", faceapi::TinyFaceDetector::Options{});
  auto marks = LoadAs<faceapi::FaceLandmark68Net>("bf16");
  auto rec = LoadAs<faceapi::FaceRecognitionNet>("bf16");
  auto tiny32 = LoadAs<faceapi::TinyFaceDetector>("fp32", faceapi::TinyFaceDetector::Options{});
  constexpr int kPoints[8] = {0, 8, 16, 30, 36, 45, 48, 54};
  for (const auto& [file, key] : {std::pair{"astronaut_eileen_collins_512.png", "astronaut.png"},
                                  std::pair{"grace_hopper_512x600.jpg", "grace_hopper.jpg"}}) {
    const cv::Mat rgb = faceapi::Face(file);
    const at::Tensor x = faceapi::ToBatchTensor(rgb, 416, false);
    EXPECT_GT(MaxDiff(tiny->Forward(x), tiny32->Forward(x)), 1e-4) << file << ": bf16 equals fp32";
    auto boxes = tiny->Detect(rgb, 416);
    ASSERT_TRUE(boxes.ok()) << boxes.status();
    ASSERT_EQ(boxes->size(), 1u) << file;
    const faceapi::FaceBox& b = boxes->at(0);
    const auto& g = faceapi::Golden()[key];
    EXPECT_GT(faceapi::IoU(b, faceapi::GoldenBox(key)), 0.9f) << file;
    EXPECT_NEAR(b.score, g["det_score"].get<float>(), 0.02) << file;
    auto pts = marks->Detect(rgb, b);
    ASSERT_TRUE(pts.ok()) << pts.status();
    double worst_px = 0;
    for (int i = 0; i < 8; ++i) {
      const faceapi::Point p = (*pts)[kPoints[i]];
      worst_px = std::max<double>(worst_px, std::hypot(p.x - g["landmarks_px_0_8_16_30_36_45_48_54"][i][0].get<float>(),
                                                       p.y - g["landmarks_px_0_8_16_30_36_45_48_54"][i][1].get<float>()));
    }
    EXPECT_LT(worst_px, 2.0) << file;
    auto desc = rec->Compute(rgb, *pts);
    ASSERT_TRUE(desc.ok()) << desc.status();
    faceapi::Descriptor golden;
    for (int i = 0; i < 128; ++i) golden[i] = faceapi::Golden()[std::string(key) + "_descriptor"][i].get<float>();
    const float l2 = faceapi::DescriptorDistance(*desc, golden);
    EXPECT_LT(l2, 0.05f) << file;
    std::printf("%s bf16: box IoU %.4f score %.4f (golden %.4f), worst landmark %.3f px, descriptor L2 %.4f\n", file,
                faceapi::IoU(b, faceapi::GoldenBox(key)), b.score, g["det_score"].get<float>(), worst_px, l2);
  }
}

// SSD has no numpy golden: its bf16 detections against its fp32 ones on the astronaut photo
// (the same faces, box IoU > 0.95, scores within 0.02).
TEST(Bf16FastPath, SsdFindsTheFp32BoxesWithin002Score) {
  if (!Bf16Native()) GTEST_SKIP() << "this CPU has no native bf16 (AVX512-BF16 or AMX)";
  auto a = LoadAs<faceapi::SsdMobilenetV1>("fp32", faceapi::SsdMobilenetV1::Options{});
  auto b = LoadAs<faceapi::SsdMobilenetV1>("bf16", faceapi::SsdMobilenetV1::Options{});
  for (const char* file : {"astronaut_eileen_collins_512.png", "grace_hopper_512x600.jpg"}) {
    const cv::Mat rgb = faceapi::Face(file);
    auto da = a->Detect(rgb), db = b->Detect(rgb);
    ASSERT_TRUE(da.ok() && db.ok());
    ASSERT_EQ(da->size(), db->size()) << file;
    ASSERT_GE(da->size(), 1u) << file;
    for (size_t i = 0; i < da->size(); ++i) {
      EXPECT_GT(faceapi::IoU(da->at(i), db->at(i)), 0.95f) << file << " box " << i;
      EXPECT_NEAR(da->at(i).score, db->at(i).score, 0.02) << file << " box " << i;
      std::printf("%s ssd box %zu: IoU bf16 vs fp32 %.4f, score %.4f vs %.4f\n", file, i,
                  faceapi::IoU(da->at(i), db->at(i)), db->at(i).score, da->at(i).score);
    }
  }
}

TEST(Bf16FastPath, ResidentBytesHoldTheConvWeightsInBf16) {
  if (!Bf16Native()) GTEST_SKIP() << "this CPU has no native bf16 (AVX512-BF16 or AMX)";
  auto t32 = LoadAs<faceapi::TinyFaceDetector>("fp32", faceapi::TinyFaceDetector::Options{});
  auto t16 = LoadAs<faceapi::TinyFaceDetector>("bf16", faceapi::TinyFaceDetector::Options{});
  auto s32 = LoadAs<faceapi::SsdMobilenetV1>("fp32", faceapi::SsdMobilenetV1::Options{});
  auto s16 = LoadAs<faceapi::SsdMobilenetV1>("bf16", faceapi::SsdMobilenetV1::Options{});
  auto l32 = LoadAs<faceapi::FaceLandmark68Net>("fp32"), l16 = LoadAs<faceapi::FaceLandmark68Net>("bf16");
  auto r32 = LoadAs<faceapi::FaceRecognitionNet>("fp32"), r16 = LoadAs<faceapi::FaceRecognitionNet>("bf16");
  std::printf("resident bytes fp32 -> bf16: tiny %llu -> %llu, ssd %llu -> %llu, landmarks %llu -> %llu, recognition %llu -> %llu\n",
              (unsigned long long)t32->ResidentBytes(), (unsigned long long)t16->ResidentBytes(),
              (unsigned long long)s32->ResidentBytes(), (unsigned long long)s16->ResidentBytes(),
              (unsigned long long)l32->ResidentBytes(), (unsigned long long)l16->ResidentBytes(),
              (unsigned long long)r32->ResidentBytes(), (unsigned long long)r16->ResidentBytes());
  // DeviceBytes() stays the catalogue's fp32 parameter bytes (the residency prior).
  EXPECT_EQ(t16->DeviceBytes(), t32->DeviceBytes());
  // Every conv weight of the detectors is bf16 (biases fp32): measured 396,164 of 789,668 bytes
  // (tiny) and 11,315,132 of 22,402,300 (SSD). The landmark net's and the recogniser's fc layer
  // is not a conv (fp32), and two of the recogniser's 256x256 3x3 convs (at 4x4 and 1x1) have no
  // bf16 JIT kernel in oneDNN 2.6 and stay fp32: 788,000 of 1,427,360 and 13,678,464 of 22,458,368.
  auto between = [](uint64_t bf16, uint64_t fp32, double lo, double hi) {
    EXPECT_GE(bf16, static_cast<uint64_t>(lo * fp32)) << bf16 << " of " << fp32;
    EXPECT_LE(bf16, static_cast<uint64_t>(hi * fp32)) << bf16 << " of " << fp32;
  };
  between(t16->ResidentBytes(), t32->ResidentBytes(), 0.5, 0.51);
  between(s16->ResidentBytes(), s32->ResidentBytes(), 0.5, 0.51);
  between(l16->ResidentBytes(), l32->ResidentBytes(), 0.5, 0.56);
  between(r16->ResidentBytes(), r32->ResidentBytes(), 0.5, 0.62);
}

}  // namespace
}  // namespace fusion::onednn
