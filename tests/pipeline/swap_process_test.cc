// The main job through the real binaries: fusiond (with the pipeline) on a temporary socket and
// fusionctl swap/mem/models, including faults injected with FUSIOND_FAULTS (test builds).
#include <gtest/gtest.h>

#include <signal.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "absl/strings/str_cat.h"
#include "process.h"
#include "temp_dir.h"

namespace fusion {
namespace {

using testing::Process;
using testing::RunResult;

bool Exists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Width and height from a PNG's IHDR chunk (bytes 16..23, big-endian).
std::pair<uint32_t, uint32_t> PngSize(const std::string& png) {
  auto be = [&](size_t at) {
    return (uint32_t{static_cast<uint8_t>(png[at])} << 24) | (uint32_t{static_cast<uint8_t>(png[at + 1])} << 16) |
           (uint32_t{static_cast<uint8_t>(png[at + 2])} << 8) | uint32_t{static_cast<uint8_t>(png[at + 3])};
  };
  if (png.size() < 24 || png.compare(1, 3, "PNG") != 0) return {0, 0};
  return {be(16), be(20)};
}

class SwapProcessTest : public ::testing::Test {
 protected:
  std::unique_ptr<Process> StartDaemon(const std::string& faults = "", std::vector<std::string> extra = {},
                                       const std::string& device_limit = "1GiB") {
    const std::string state = dir_.File("state-" + std::to_string(++daemons_));
    std::vector<std::string> env;
    if (!faults.empty()) env.push_back("FUSIOND_FAULTS=" + faults);
    std::vector<std::string> argv = {FUSIOND_BIN,     "--socket",     socket_,           "--device",
                                     "cpu",           "--device-memory-limit", device_limit, "--state-dir",
                                     state,           "--models-dir", FUSION_MODELS_DIR};
    argv.insert(argv.end(), extra.begin(), extra.end());
    auto p = std::make_unique<Process>(argv, dir_.path(), -1, env);
    EXPECT_TRUE(testing::WaitFor([&] { return Exists(socket_) || !p->Running(); }, absl::Seconds(20)));
    return p;
  }
  void Stop(std::unique_ptr<Process> daemon) {
    daemon->Signal(SIGTERM);
    EXPECT_EQ(daemon->Wait(absl::Seconds(20)).exit_code, 0);
  }
  RunResult Ctl(std::vector<std::string> args) {
    args.insert(args.begin(), {FUSIONCTL_BIN, "--socket", socket_});
    return testing::RunProcess(args, dir_.path(), absl::Seconds(60));
  }
  RunResult SwapJson(const std::string& out, const std::string& ratio = "1", bool simple = false) {
    std::vector<std::string> args = {"swap", "--source", FUSION_TEST_DATA_DIR "/faces/astronaut_eileen_collins_512.png",
                                     "--target", FUSION_TEST_DATA_DIR "/faces/grace_hopper_512x600.jpg",
                                     "-o", out, "--ratio", ratio, "--json"};
    if (simple) args.push_back("--simple");
    return Ctl(args);
  }
  // No lease and nothing reserved, in the daemon's own words.
  void ExpectAtRest() {
    RunResult mem = Ctl({"mem", "--json"});
    ASSERT_EQ(mem.exit_code, 0) << mem.err;
    const nlohmann::json j = nlohmann::json::parse(mem.out);
    EXPECT_EQ(j["device"]["reserved_bytes"].get<uint64_t>(), 0u);
    for (const auto& m : j["models"]) EXPECT_EQ(m["leases"].get<int>(), 0) << m["name"];
  }
  static const nlohmann::json* Stage(const nlohmann::json& result, const std::string& name) {
    for (const auto& s : result["stages"]) {
      if (s["name"] == name) return &s;
    }
    return nullptr;
  }

  testing::TempDir dir_;
  const std::string socket_ = dir_.File("f.sock");
  int daemons_ = 0;
};

TEST_F(SwapProcessTest, SwapThroughTheDaemonWritesATargetSizedPngWithTheSourceIdentity) {
  auto daemon = StartDaemon("", {"--pin-model", "face_recognition"});
  ASSERT_TRUE(daemon->Running());
  const RunResult swapped = SwapJson(dir_.File("out.png"));
  ASSERT_EQ(swapped.exit_code, 0) << swapped.err;
  const RunResult kept = SwapJson(dir_.File("kept.png"), "0");
  ASSERT_EQ(kept.exit_code, 0) << kept.err;
  const nlohmann::json r = nlohmann::json::parse(swapped.out), k = nlohmann::json::parse(kept.out);
  EXPECT_EQ(r["state"], "SUCCEEDED");
  EXPECT_EQ(r["device"], "cpu");
  EXPECT_EQ(r["faces_swapped"].get<int>(), 1);
  EXPECT_EQ(PngSize(ReadFile(dir_.File("out.png"))), (std::pair<uint32_t, uint32_t>{512, 600}));
  ASSERT_EQ(r["faces"].size(), 1u);
  ASSERT_EQ(k["faces"].size(), 1u);
  // Ratio 0 keeps the target face: its distance is the target's own distance to the source.
  EXPECT_LT(r["faces"][0]["identity_distance"].get<double>() + 0.1,
            k["faces"][0]["identity_distance"].get<double>());
  for (const char* name : {"detect", "landmarks", "encode", "generate", "blend", "score"}) {
    const nlohmann::json* s = Stage(r, name);
    ASSERT_NE(s, nullptr) << name;
    EXPECT_EQ((*s)["mode"], std::string(name) == "blend" ? "host" : "device") << name;
  }
  ExpectAtRest();
  const RunResult simple = SwapJson(dir_.File("simple.png"), "1", /*simple=*/true);
  ASSERT_EQ(simple.exit_code, 0) << simple.err;
  const nlohmann::json sr = nlohmann::json::parse(simple.out);
  const nlohmann::json* blend = Stage(sr, "blend");
  ASSERT_NE(blend, nullptr);
  EXPECT_EQ((*blend)["mode"], "device");  // --simple: the feather-blend model stage
  EXPECT_EQ((*blend)["model"], "feather-blend");
  ExpectAtRest();
  const RunResult models = Ctl({"models", "--json"});
  ASSERT_EQ(models.exit_code, 0) << models.err;
  const nlohmann::json listed = nlohmann::json::parse(models.out);
  EXPECT_EQ(listed.size(), 10u);  // every catalogue model
  for (const auto& m : listed) {
    EXPECT_EQ(m["pinned"].get<bool>(), m["name"] == "face_recognition") << m["name"];  // --pin-model
    if (m["name"] == "feather-blend") {
      EXPECT_EQ(m["stage"], "blend");  // the builtin simple blender: no weights
      EXPECT_EQ(m["state"], "DEVICE");
      EXPECT_EQ(m["bytes"].get<uint64_t>(), 0u);  // measured on upload (1 = the estimate before)
    }
  }
  // The output format follows OUT's extension unless --format says otherwise; a contradiction
  // or an unwritable OUT is a usage error before any job is submitted.
  const RunResult jpeg = SwapJson(dir_.File("out.jpg"));
  ASSERT_EQ(jpeg.exit_code, 0) << jpeg.err;
  EXPECT_EQ(ReadFile(dir_.File("out.jpg")).substr(0, 3), "\xFF\xD8\xFF");  // a JPEG
  const size_t jobs_before = nlohmann::json::parse(Ctl({"jobs", "--json"}).out).size();
  const RunResult clash = Ctl({"swap", "--source", FUSION_TEST_DATA_DIR "/faces/astronaut_eileen_collins_512.png", "--target",
               FUSION_TEST_DATA_DIR "/faces/grace_hopper_512x600.jpg", "-o", dir_.File("clash.jpg"), "--format", "png"});
  EXPECT_EQ(clash.exit_code, 2);
  EXPECT_NE(clash.err.find("--format png does not match the extension of"), std::string::npos) << clash.err;
  const RunResult nowhere = SwapJson("/nonexistent-fusiond-dir/x.png");
  EXPECT_EQ(nowhere.exit_code, 2);
  EXPECT_NE(nowhere.err.find("cannot write into '/nonexistent-fusiond-dir': No such file or directory"),
            std::string::npos) << nowhere.err;
  const RunResult into_dir = SwapJson(dir_.path());
  EXPECT_EQ(into_dir.exit_code, 2);
  EXPECT_NE(into_dir.err.find("is a directory"), std::string::npos) << into_dir.err;
  EXPECT_EQ(nlohmann::json::parse(Ctl({"jobs", "--json"}).out).size(), jobs_before) << "nothing was submitted";
  Stop(std::move(daemon));
}

// The host tier (weights in RAM) is a cache under --host-memory-limit: a budget smaller than
// the models of one swap drops host copies (also of models on the device) instead of growing past
// it, and a load still succeeds by re-reading storage.
TEST_F(SwapProcessTest, HostMemoryLimitSmallerThanTheModelsIsKeptAfterSwapAndLoad) {
  constexpr uint64_t kLimit = 10ull << 20;
  auto daemon = StartDaemon("", {"--host-memory-limit", "10MiB"});
  ASSERT_TRUE(daemon->Running());
  auto expect_within = [&](const char* after) {
    const RunResult mem = Ctl({"mem", "--json"});
    ASSERT_EQ(mem.exit_code, 0) << mem.err;
    const nlohmann::json j = nlohmann::json::parse(mem.out);
    EXPECT_EQ(j["host"]["budget_bytes"].get<uint64_t>(), kLimit) << after;
    EXPECT_LE(j["host"]["used_bytes"].get<uint64_t>(), kLimit) << after;
    EXPECT_FALSE(j["host"]["over_budget"].get<bool>()) << after;
    uint64_t copies = 0;
    for (const auto& m : j["models"]) copies += m["host_bytes"].get<uint64_t>();
    EXPECT_EQ(copies, j["host"]["used_bytes"].get<uint64_t>()) << after;
  };
  const RunResult swapped = SwapJson(dir_.File("out.png"));
  ASSERT_EQ(swapped.exit_code, 0) << swapped.err;
  EXPECT_EQ(nlohmann::json::parse(swapped.out)["state"], "SUCCEEDED");
  expect_within("swap");
  const RunResult load = Ctl({"load", "ssd_mobilenetv1"});
  ASSERT_EQ(load.exit_code, 0) << load.err;
  expect_within("load ssd_mobilenetv1");
  const nlohmann::json models = nlohmann::json::parse(Ctl({"models", "--json"}).out);
  for (const auto& m : models) {
    if (m["name"] == "ssd_mobilenetv1") EXPECT_EQ(m["state"], "DEVICE");
  }
  ExpectAtRest();
  Stop(std::move(daemon));
}

TEST_F(SwapProcessTest, InjectedFaultsDegradeReportAndReleaseEverything) {
  auto normal = StartDaemon();
  ASSERT_EQ(SwapJson(dir_.File("normal.png")).exit_code, 0);
  Stop(std::move(normal));

  auto faulty = StartDaemon("detect=fail_first_device,generate=fail_device,enhance=fail_all");
  const RunResult degraded = SwapJson(dir_.File("degraded.png"));
  ASSERT_EQ(degraded.exit_code, 0) << degraded.err;
  const nlohmann::json r = nlohmann::json::parse(degraded.out);
  EXPECT_EQ((*Stage(r, "detect"))["attempts"].get<int>(), 2);
  EXPECT_EQ((*Stage(r, "detect"))["mode"], "device");
  EXPECT_EQ((*Stage(r, "generate"))["mode"], "cpu_fallback");
  EXPECT_FALSE(r["degradations"].empty());
  // Retry and CPU fallback compute the same image.
  EXPECT_TRUE(ReadFile(dir_.File("degraded.png")) == ReadFile(dir_.File("normal.png")));
  ExpectAtRest();
  const nlohmann::json mem = nlohmann::json::parse(Ctl({"mem", "--json"}).out);
  EXPECT_EQ(mem["counters"]["oom_recovered"]["evict_retry"].get<int>(), 1);   // detect
  EXPECT_EQ(mem["counters"]["oom_recovered"]["cpu_fallback"].get<int>(), 1);  // generate

  const RunResult failed = Ctl({"swap", "--source", FUSION_TEST_DATA_DIR "/faces/astronaut_eileen_collins_512.png",
                                "--target", FUSION_TEST_DATA_DIR "/faces/grace_hopper_512x600.jpg", "-o",
                                dir_.File("failed.png"), "--enhance", "x2"});
  EXPECT_EQ(failed.exit_code, 1);
  EXPECT_NE(failed.err.find("RESOURCE_EXHAUSTED"), std::string::npos) << failed.err;
  EXPECT_NE(failed.err.find("stage 'enhance'"), std::string::npos) << failed.err;
  ExpectAtRest();
  Stop(std::move(faulty));
}

// A /proc/<pid>/status field in bytes ("VmRSS", "VmHWM"; the kernel gives kB), 0 if absent.
uint64_t ProcStatusBytes(pid_t pid, const std::string& field) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field + ":", 0) != 0) continue;
    std::istringstream fields(line.substr(field.size() + 1));
    uint64_t kb = 0;
    fields >> kb;
    return kb * 1024;
  }
  return 0;
}

// Issue 11's small repro: a 640x427 target (sample1.jpg, 1920x1280, resized) upscaled x4 on a
// 64 MiB device with a 256 MiB host tier. Before, every tile was refused, the CPU fallback ran
// the whole frame unadmitted and the daemon peaked at 3.3 GB. Now the upscale's images are
// admitted on the host tier and the network runs in 32-px tiles on the device (or, failing
// that, in tiles on the host tier): it succeeds (tiled) or is RESOURCE_EXHAUSTED, and the
// daemon's peak RSS from the warmed-up state stays within RSS after warm-up + 64 MiB (device)
// + 256 MiB (host) + 200 MiB of slack (what no tier counts: oneDNN scratch, allocations on
// LibTorch's worker threads, the PNG encoder, the gRPC messages carrying the result).
TEST_F(SwapProcessTest, UpscaleX4OnASmallDeviceIsTiledAndPeakRssStaysWithinBothTiers) {
  constexpr uint64_t MiB = 1ull << 20;
  cv::Mat sample = cv::imread(FUSION_FETCHED_TESTDATA_DIR "/faces/sample1.jpg", cv::IMREAD_COLOR);
  ASSERT_FALSE(sample.empty());
  cv::Mat small;
  cv::resize(sample, small, cv::Size(640, 427), 0, 0, cv::INTER_AREA);
  const std::string target = dir_.File("target_640x427.png");
  ASSERT_TRUE(cv::imwrite(target, small));
  auto daemon = StartDaemon("", {"--host-memory-limit", "256MiB"}, "64MiB");
  ASSERT_TRUE(daemon->Running());
  auto swap = [&](const std::string& out, std::vector<std::string> more) {
    std::vector<std::string> args = {"swap", "--source", FUSION_TEST_DATA_DIR "/faces/astronaut_eileen_collins_512.png",
                                     "--target", target, "-o", out, "--json"};
    args.insert(args.end(), more.begin(), more.end());
    return Ctl(args);
  };
  // Warm-up: the same swap without the upscale (models loaded, allocator pools grown).
  const RunResult warm = swap(dir_.File("warm.png"), {});
  ASSERT_EQ(warm.exit_code, 0) << warm.err;
  const uint64_t rss = ProcStatusBytes(daemon->pid(), "VmRSS");
  ASSERT_GT(rss, 0u);
  // Reset the peak (VmHWM) to the current RSS: from here on it measures the upscale job.
  std::ofstream(absl::StrCat("/proc/", daemon->pid(), "/clear_refs")) << "5";
  const absl::Time start = absl::Now();
  const RunResult up = swap(dir_.File("up.png"), {"--upscale", "x4"});
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  const uint64_t hwm = ProcStatusBytes(daemon->pid(), "VmHWM");
  const uint64_t bound = rss + 64 * MiB + 256 * MiB + 200 * MiB;
  std::printf("upscale x4 of 640x427 at 64 MiB/256 MiB: exit %d in %.1f s, RSS after warm-up %llu MiB, "
              "peak %llu MiB (bound %llu MiB)\n%s\n",
              up.exit_code, seconds, static_cast<unsigned long long>(rss / MiB),
              static_cast<unsigned long long>(hwm / MiB), static_cast<unsigned long long>(bound / MiB),
              up.exit_code == 0 ? up.out.c_str() : up.err.c_str());
  EXPECT_LE(hwm, bound);
  if (up.exit_code == 0) {
    const nlohmann::json r = nlohmann::json::parse(up.out);
    EXPECT_EQ(r["state"], "SUCCEEDED");
    const nlohmann::json* s = Stage(r, "upscale");
    ASSERT_NE(s, nullptr);
    EXPECT_TRUE((*s)["mode"] == "tiled" || (*s)["mode"] == "cpu_fallback") << *s;
    EXPECT_GT((*s)["tile"].get<int>(), 0) << "never the whole frame at once";
    EXPECT_EQ(PngSize(ReadFile(dir_.File("up.png"))), (std::pair<uint32_t, uint32_t>{2560, 1708}));
  } else {
    EXPECT_NE(up.err.find("RESOURCE_EXHAUSTED"), std::string::npos) << up.err;
    EXPECT_NE(up.err.find("stage 'upscale'"), std::string::npos) << up.err;
  }
  ExpectAtRest();
  const nlohmann::json mem = nlohmann::json::parse(Ctl({"mem", "--json"}).out);
  EXPECT_EQ(mem["host"]["reserved_bytes"].get<uint64_t>(), 0u) << "the host working sets were returned";
  Stop(std::move(daemon));
}

// The upscale's images are admitted on the host tier before they exist: a 640x427 frame
// upscaled x4 needs 96 MB of images (input, float output, conversions), more than a 64 MiB
// host budget, so the job ends RESOURCE_EXHAUSTED naming the stage, the tier and the bytes at
// once (never INTERNAL, never an unadmitted allocation); the daemon stays up and the next job
// without the upscale succeeds.
TEST_F(SwapProcessTest, UpscaleWhoseImagesExceedTheHostBudgetIsResourceExhaustedNamingStageTierAndBytes) {
  cv::Mat sample = cv::imread(FUSION_FETCHED_TESTDATA_DIR "/faces/sample1.jpg", cv::IMREAD_COLOR);
  ASSERT_FALSE(sample.empty());
  cv::Mat small;
  cv::resize(sample, small, cv::Size(640, 427), 0, 0, cv::INTER_AREA);
  const std::string target = dir_.File("target_640x427.png");
  ASSERT_TRUE(cv::imwrite(target, small));
  auto daemon = StartDaemon("", {"--host-memory-limit", "64MiB"}, "64MiB");
  ASSERT_TRUE(daemon->Running());
  std::vector<std::string> args = {"swap", "--source", FUSION_TEST_DATA_DIR "/faces/astronaut_eileen_collins_512.png",
                                   "--target", target, "-o", dir_.File("up.png")};
  args.push_back("--upscale");
  args.push_back("x4");
  const RunResult up = Ctl(args);
  EXPECT_EQ(up.exit_code, 1);
  EXPECT_NE(up.err.find("RESOURCE_EXHAUSTED"), std::string::npos) << up.err;
  // 273,280 px * 15 + 4,372,480 px * 21 bytes.
  EXPECT_NE(up.err.find("host tier: stage 'upscale' (model 'esrgan-slim-x4'): the images of the x4 upscale of a "
                        "640x427 frame needs 91.5 MiB (95921280 bytes), host budget 64.0 MiB"),
            std::string::npos) << up.err;
  args.resize(args.size() - 2);
  const RunResult next = Ctl(args);
  EXPECT_EQ(next.exit_code, 0) << next.err;
  ExpectAtRest();
  Stop(std::move(daemon));
}

}  // namespace
}  // namespace fusion
