// The main job through the real binaries: fusiond (with the pipeline) on a temporary socket and
// fusionctl swap/mem/models, including faults injected with FUSIOND_FAULTS (test builds).
#include <gtest/gtest.h>

#include <httplib.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <functional>
#include <future>
#include <sstream>
#include <regex>
#include <thread>

#include <nlohmann/json.hpp>

#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "notify_socket.h"
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
  // fusionctl swap --json of the astronaut onto `target`, written to `out`, with `more` flags.
  RunResult AstronautOnto(const std::string& target, const std::string& out, std::vector<std::string> more) {
    std::vector<std::string> args = {"swap", "--source", FUSION_TEST_DATA_DIR "/faces/astronaut_eileen_collins_512.png",
                                     "--target", target, "-o", out, "--json"};
    args.insert(args.end(), more.begin(), more.end());
    args.insert(args.begin(), {FUSIONCTL_BIN, "--socket", socket_});
    return testing::RunProcess(args, dir_.path(), absl::Seconds(150));
  }
  RunResult SwapJson(const std::string& out, const std::string& ratio = "1", bool simple = false) {
    std::vector<std::string> args = {"swap", "--source", FUSION_TEST_DATA_DIR "/faces/astronaut_eileen_collins_512.png",
                                     "--target", FUSION_TEST_DATA_DIR "/faces/grace_hopper_512x600.jpg",
                                     "-o", out, "--ratio", ratio, "--json"};
    if (simple) args.push_back("--simple");
    return Ctl(args);
  }
  // sample1 (3 faces) reduced to 640x427 and written as PNG in the test's directory; "" if the
  // fetched photo is missing or cannot be written.
  std::string Sample1At640() {
    const cv::Mat sample = cv::imread(FUSION_FETCHED_TESTDATA_DIR "/faces/sample1.jpg", cv::IMREAD_COLOR);
    if (sample.empty()) return "";
    cv::Mat small;
    cv::resize(sample, small, cv::Size(640, 427), 0, 0, cv::INTER_AREA);
    const std::string path = dir_.File("target_640x427.png");
    return cv::imwrite(path, small) ? path : "";
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

// A 64x64 RGB PNG whose chunks are all valid (lengths, CRCs, an IDAT zlib stream with a good
// Adler-32) but whose row 32 has filter type 7: libpng's "bad adaptive filter value".
std::string PngWithDamagedRows() {
  auto crc32 = [](const std::string& bytes) {
    uint32_t c = 0xffffffffu;
    for (unsigned char b : bytes) {
      c ^= b;
      for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1u)));
    }
    return c ^ 0xffffffffu;
  };
  auto be32 = [](uint32_t v) {
    return std::string{static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8),
                       static_cast<char>(v)};
  };
  auto chunk = [&](const std::string& type, const std::string& data) {
    return be32(static_cast<uint32_t>(data.size())) + type + data + be32(crc32(type + data));
  };
  const int side = 64;
  std::string raw;
  for (int y = 0; y < side; ++y) raw += static_cast<char>(y == 32 ? 7 : 0) + std::string(side * 3, '\x80');
  uint32_t a = 1, b = 0;  // Adler-32
  for (unsigned char c : raw) {
    a = (a + c) % 65521;
    b = (b + a) % 65521;
  }
  const auto n = static_cast<uint16_t>(raw.size());  // one stored block (12352 bytes)
  std::string zlib = std::string("\x78\x01\x01", 3) + static_cast<char>(n & 0xff) + static_cast<char>(n >> 8) +
                     static_cast<char>(~n & 0xff) + static_cast<char>((~n >> 8) & 0xff) + raw + be32((b << 16) | a);
  const std::string ihdr = be32(side) + be32(side) + std::string("\x08\x02\x00\x00\x00", 5);
  return std::string("\x89PNG\r\n\x1a\n", 8) + chunk("IHDR", ihdr) + chunk("IDAT", zlib) + chunk("IEND", "");
}

// A PNG whose pixel data is damaged fails in stage "decode" in swap --json (not "stage": "").
TEST_F(SwapProcessTest, DamagedPngPixelDataFailsInStageDecode) {
  auto daemon = StartDaemon("");
  ASSERT_TRUE(daemon->Running());
  const std::string damaged = dir_.File("damaged.png");
  std::ofstream(damaged, std::ios::binary) << PngWithDamagedRows();
  const RunResult r = AstronautOnto(damaged, dir_.File("out.png"), {});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out, nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(j.is_discarded()) << "stdout: " << r.out;
  EXPECT_EQ(j["state"], "FAILED") << j;
  EXPECT_EQ(j["error"]["code"], "INVALID_ARGUMENT") << j;
  EXPECT_EQ(j["error"]["stage"], "decode") << j;
  EXPECT_NE(j["error"]["message"].get<std::string>().find("target image"), std::string::npos) << j;
  // The job's error is what `fusionctl result` says too, not only that there is no result.
  const RunResult result = Ctl({"result", j["job_id"].get<std::string>(), "-o", dir_.File("r.png")});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_NE(result.err.find("is FAILED, not SUCCEEDED: " + j["error"]["message"].get<std::string>()), std::string::npos)
      << result.err;
  // libpng's own words reach the daemon's log with time and level, not raw on stderr.
  daemon->Signal(SIGTERM);
  const RunResult stopped = daemon->Wait(absl::Seconds(20));
  EXPECT_EQ(stopped.exit_code, 0);
  EXPECT_NE(stopped.err.find(" warning libpng error (the image is refused): bad adaptive filter value"),
            std::string::npos)
      << stopped.err;
  EXPECT_EQ(stopped.err.find("libpng error: "), std::string::npos) << stopped.err;
}

// An admin lists every uid's jobs with their owner and cancels any of them (a runaway job stops
// without a restart of the daemon), and the daemon logs it with the admin's uid.
TEST_F(SwapProcessTest, AnOperatorListsAndCancelsAnotherUidsJobs) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to run a client as another uid";
  constexpr int kNobody = 65534;
  const std::string toml = dir_.File("operator.toml");
  std::ofstream(toml) << "socket_group = \"nogroup\"\nallowed_uids = [65534]\nmax_concurrent_jobs = 1\n";
  auto daemon = StartDaemon("", {"--config", toml});
  ASSERT_TRUE(daemon->Running());
  auto as_nobody = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {FUSIONCTL_BIN, "--socket", socket_});
    return testing::RunProcess(args, dir_.path(), absl::Seconds(60), kNobody);
  };
  std::vector<std::string> ids;
  for (int i = 0; i < 3; ++i) {
    const RunResult r = as_nobody({"swap", "--source", FUSION_TEST_DATA_DIR "/faces/astronaut_eileen_collins_512.png",
                                   "--target", FUSION_TEST_DATA_DIR "/faces/grace_hopper_512x600.jpg", "--no-wait"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    ids.push_back(std::string(absl::StripAsciiWhitespace(r.out)));
  }
  // The third waits behind the others (one job at a time): root cancels it.
  const RunResult cancel = Ctl({"cancel", ids[2], "--json"});
  ASSERT_EQ(cancel.exit_code, 0) << cancel.err;
  const nlohmann::json c = nlohmann::json::parse(cancel.out);
  EXPECT_EQ(c["state"], "CANCELLED") << c;
  EXPECT_EQ(c["owner_uid"], kNobody);
  const RunResult all = Ctl({"jobs", "--all"});
  ASSERT_EQ(all.exit_code, 0) << all.err;
  for (const std::string& id : ids) EXPECT_NE(all.out.find("uid 65534  " + id), std::string::npos) << all.out;
  EXPECT_EQ(Ctl({"jobs"}).out, "");  // root's own: none
  const RunResult refused = as_nobody({"jobs", "--all"});
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_NE(refused.err.find("PERMISSION_DENIED"), std::string::npos) << refused.err;
  EXPECT_EQ(as_nobody({"jobs"}).out.find(ids[0]) != std::string::npos, true);
  daemon->Signal(SIGTERM);
  const RunResult stopped = daemon->Wait(absl::Seconds(30));
  EXPECT_NE(stopped.err.find("(admin) cancelled job " + ids[2] + " of uid 65534 (now CANCELLED)"), std::string::npos)
      << stopped.err;
  EXPECT_NE(stopped.err.find("uid 0 pid"), std::string::npos) << stopped.err;
  EXPECT_NE(stopped.err.find("(admin) listed every uid's jobs: 3"), std::string::npos) << stopped.err;
}

// swap --json printed nothing on a failed job (new-user trial): now the error as JSON on stdout,
// the exit code and the stderr line unchanged.
TEST_F(SwapProcessTest, SwapJsonOfAFailedJobPrintsTheErrorAsJson) {
  auto daemon = StartDaemon("");
  ASSERT_TRUE(daemon->Running());
  const std::string grey = dir_.File("grey.png");
  ASSERT_TRUE(cv::imwrite(grey, cv::Mat(200, 240, CV_8UC3, cv::Scalar::all(128))));
  const RunResult r = AstronautOnto(grey, dir_.File("out.png"), {});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("FAILED_PRECONDITION"), std::string::npos) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out, nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(j.is_discarded()) << "stdout: " << r.out;
  EXPECT_EQ(j["state"], "FAILED");
  EXPECT_EQ(j["job_id"].get<std::string>().rfind("j-", 0), 0u) << j;
  EXPECT_EQ(j["error"]["code"], "FAILED_PRECONDITION");
  EXPECT_EQ(j["error"]["message"], "no face in the target image");
  EXPECT_EQ(j["error"]["stage"], "detect");
  // Refused at submit (a target that is no image): the same object, no job.
  const std::string junk = dir_.File("junk.png");
  std::ofstream(junk) << "this is not an image at all";
  const RunResult bad = AstronautOnto(junk, dir_.File("out2.png"), {});
  EXPECT_EQ(bad.exit_code, 1) << bad.err;
  const nlohmann::json b = nlohmann::json::parse(bad.out, nullptr, false);
  ASSERT_FALSE(b.is_discarded()) << "stdout: " << bad.out;
  EXPECT_EQ(b["error"]["code"], "INVALID_ARGUMENT") << b;
  // An image's own fault found at submit is the decode's, as in a job.
  EXPECT_EQ(b["error"]["stage"], "decode");
  EXPECT_EQ(b["state"], "NOT_SUBMITTED");
  // A cut PNG (no IEND), refused from its bytes at submit: stage "decode" too.
  const std::string grey_png = ReadFile(grey);
  const std::string cut = dir_.File("cut.png");
  std::ofstream(cut, std::ios::binary) << grey_png.substr(0, grey_png.size() - 12);
  const RunResult c = AstronautOnto(cut, dir_.File("out3.png"), {});
  const nlohmann::json cj = nlohmann::json::parse(c.out, nullptr, false);
  ASSERT_FALSE(cj.is_discarded()) << "stdout: " << c.out;
  EXPECT_EQ(cj["error"]["stage"], "decode") << cj;
  EXPECT_NE(cj["error"]["message"].get<std::string>().find("target image truncated"), std::string::npos) << cj;
  Stop(std::move(daemon));
}

// --timeout-ms: a call that gets no answer in time is exit 2 "no answer within N ms", as the
// README says, on a connected channel too (it was exit 1, gRPC's bare "Deadline Exceeded").
TEST_F(SwapProcessTest, ACallPastTimeoutMsIsExit2NamingTheWait) {
  auto daemon = StartDaemon("");
  ASSERT_TRUE(daemon->Running());
  int timed_out = 0;
  for (int i = 0; i < 5; ++i) {
    const RunResult r = Ctl({"--timeout-ms", "1", "health"});
    if (r.exit_code == 0) continue;  // answered within 1 ms
    ++timed_out;
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find("no answer within 1 ms"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("Deadline Exceeded"), std::string::npos) << r.err;
  }
  std::printf("--timeout-ms 1 health: %d of 5 timed out\n", timed_out);
  Stop(std::move(daemon));
}

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
  // The detector's confidence in Grace's box (SSD: 0.99).
  EXPECT_GT(r["faces"][0]["score"].get<double>(), 0.9);
  EXPECT_LE(r["faces"][0]["score"].get<double>(), 1.0);
  for (const char* name : {"detect", "landmarks", "encode", "generate", "blend", "score"}) {
    const nlohmann::json* s = Stage(r, name);
    ASSERT_NE(s, nullptr) << name;
    EXPECT_EQ((*s)["mode"], std::string(name) == "blend" ? "host" : "device") << name;
  }
  // The second job's source (the same astronaut) came from the source-face cache (on by
  // default, 1 MiB): no encode stage; the cache holds one 64-KiB host slab, reported apart.
  EXPECT_EQ(Stage(k, "encode"), nullptr) << k.dump();
  {
    const nlohmann::json mem = nlohmann::json::parse(Ctl({"mem", "--json"}).out);
    EXPECT_EQ(mem["host"]["cache_bytes"].get<uint64_t>(), 64u << 10) << mem.dump();
    EXPECT_EQ(mem["host"]["reserved_bytes"].get<uint64_t>(), 64u << 10) << mem.dump();
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
  // An input that cannot be read is a usage error too, naming the flag, the path and why.
  const RunResult no_target = Ctl({"swap", "--source", FUSION_TEST_DATA_DIR "/faces/astronaut_eileen_collins_512.png",
                                   "--target", dir_.File("absent.png"), "-o", dir_.File("never.png")});
  EXPECT_EQ(no_target.exit_code, 2);
  EXPECT_NE(no_target.err.find("--target: cannot read '" + dir_.File("absent.png") + "': No such file or directory"),
            std::string::npos) << no_target.err;
  const RunResult dir_source = Ctl({"swap", "--source", dir_.path(), "--target",
                                    FUSION_TEST_DATA_DIR "/faces/grace_hopper_512x600.jpg", "-o", dir_.File("never.png")});
  EXPECT_EQ(dir_source.exit_code, 2);
  EXPECT_NE(dir_source.err.find("--source: '" + dir_.path() + "' is a directory"), std::string::npos) << dir_source.err;
  EXPECT_EQ(nlohmann::json::parse(Ctl({"jobs", "--json"}).out).size(), jobs_before) << "nothing was submitted";
  Stop(std::move(daemon));
}

// The host tier (weights in RAM) is a cache under --host-memory-limit: a budget smaller than
// the models of one swap drops host copies (also of models on the device) instead of growing past
// it, and a load still succeeds by re-reading storage.
// The health check behind systemd's watchdog is the job loop's: a running job that gives no
// sign of life (no stage event, no checkpoint) for watchdog_stall_ms fails it, so fusiond stops
// pinging (the service manager then restarts it) and says why in STATUS=. A stage made to hang
// (FUSIOND_FAULTS=generate=hang: an hour in one call, as a stuck device call) is that job.
TEST_F(SwapProcessTest, AJobThatStopsMakingProgressStopsTheWatchdogPingsAndSaysWhy) {
  testing::NotifySocket notify(dir_.File("notify"));
  ASSERT_TRUE(notify.ok());
  {
    std::ofstream toml(dir_.File("watchdog.toml"));
    toml << "watchdog_stall_ms = 1500\n";
  }
  Process daemon({FUSIOND_BIN, "--config", dir_.File("watchdog.toml"), "--socket", socket_, "--device", "cpu",
                  "--device-memory-limit", "1GiB", "--state-dir", dir_.File("state-watchdog"), "--models-dir",
                  FUSION_MODELS_DIR},
                 dir_.path(), -1, {notify.Env(), "WATCHDOG_USEC=600000", "FUSIOND_FAULTS=generate=hang"});
  ASSERT_FALSE(notify.Receive(absl::Seconds(30), "READY=1").empty());
  const RunResult submitted = Ctl({"swap", "--no-wait", "--source",
                                   FUSION_TEST_DATA_DIR "/faces/astronaut_eileen_collins_512.png", "--target",
                                   FUSION_TEST_DATA_DIR "/faces/grace_hopper_512x600.jpg"});
  ASSERT_EQ(submitted.exit_code, 0) << submitted.err;
  const std::string id = submitted.out.substr(0, submitted.out.find('\n'));
  // Healthy while the job runs its first stages; then the hang: within the stall limit and a
  // probe period the pings stop and STATUS= names the job and its stage.
  std::vector<std::string> got = notify.Receive(absl::Seconds(60), "STATUS=unhealthy");
  ASSERT_FALSE(got.empty());
  EXPECT_EQ(got.back().rfind("STATUS=unhealthy: job " + id + " made no progress for ", 0), 0u) << got.back();
  EXPECT_NE(got.back().find("in stage 'generate' (limit 1.5s)"), std::string::npos) << got.back();
  EXPECT_TRUE(std::any_of(got.begin(), got.end(), [](const std::string& m) {
    return m.rfind("WATCHDOG=1\nSTATUS=0 jobs queued, 1 running; device cpu: ", 0) == 0;
  })) << "healthy pings while the job ran";
  got = notify.Receive(absl::Seconds(2));
  ASSERT_GE(got.size(), 2u) << "STATUS= goes on every probe period (300 ms)";
  for (const std::string& m : got) EXPECT_EQ(m.find("WATCHDOG=1"), std::string::npos) << m;
  daemon.Signal(SIGKILL);  // the hang ends only with the process, as under systemd's watchdog
  daemon.Wait(absl::Seconds(10));
}

// A loopback TCP port free right now (bound to port 0, read back, closed).
int FreeLoopbackPort() {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  const bool ok = bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
                  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0;
  close(fd);
  return ok ? ntohs(a.sin_port) : -1;
}

// The value of the exposition line that starts with `series` ("name{labels}"), or -1.
double Sample(const std::string& text, const std::string& series) {
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(series + " ", 0) == 0) return std::stod(line.substr(series.size() + 1));
  }
  return -1;
}

// --metrics-listen: after a swap, a scrape of /metrics passes `promtool check metrics` and
// shows the job, the uploads and the stage histogram; other paths are 404.
TEST_F(SwapProcessTest, MetricsScrapeAfterASwapPassesPromtoolAndShowsTheJobUploadsAndStages) {
  const int port = FreeLoopbackPort();
  ASSERT_GT(port, 0);
  auto daemon = StartDaemon("", {"--metrics-listen", absl::StrCat("127.0.0.1:", port)});
  ASSERT_TRUE(daemon->Running());
  const RunResult swap = Ctl({"swap", "--source", FUSION_TEST_DATA_DIR "/faces/astronaut_eileen_collins_512.png",
                              "--target", FUSION_TEST_DATA_DIR "/faces/grace_hopper_512x600.jpg", "-o",
                              dir_.File("m.png")});
  ASSERT_EQ(swap.exit_code, 0) << swap.err;
  httplib::Client http("127.0.0.1", port);
  auto res = http.Get("/metrics");
  ASSERT_TRUE(res) << httplib::to_string(res.error());
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->get_header_value("Content-Type"), "text/plain; version=0.0.4; charset=utf-8");
  const std::string& text = res->body;
  {
    std::ofstream out(dir_.File("metrics.txt"));
    out << text;
  }
  const RunResult lint = testing::RunProcess(
      {"/bin/sh", "-c", absl::StrCat("promtool check metrics < ", dir_.File("metrics.txt"))}, dir_.path());
  EXPECT_EQ(lint.exit_code, 0) << lint.out << lint.err;
  EXPECT_EQ(lint.out + lint.err, "") << "promtool's lint findings";
  EXPECT_EQ(Sample(text, "fusiond_jobs_total{state=\"SUCCEEDED\"}"), 1) << text;
  EXPECT_EQ(Sample(text, "fusiond_jobs_total{state=\"FAILED\"}"), 0);
  EXPECT_GT(Sample(text, "fusiond_bytes_uploaded_total"), 1e6) << "the stage models were uploaded";
  EXPECT_EQ(Sample(text, "fusiond_device_budget_bytes"), 1073741824);
  EXPECT_EQ(Sample(text, "fusiond_stage_seconds_count{stage=\"detect\",mode=\"device\"}"), 1) << text;
  EXPECT_EQ(Sample(text, "fusiond_stage_seconds_count{stage=\"blend\",mode=\"host\"}"), 1) << text;
  EXPECT_EQ(Sample(text, "fusiond_stage_seconds_bucket{stage=\"detect\",mode=\"device\",le=\"+Inf\"}"), 1);
  EXPECT_GT(Sample(text, "fusiond_stage_seconds_sum{stage=\"detect\",mode=\"device\"}"), 0);
  EXPECT_EQ(Sample(text, "fusiond_oom_recovered_total{step=\"cpu_fallback\"}"), 0);
  auto other = http.Get("/");
  ASSERT_TRUE(other);
  EXPECT_EQ(other->status, 404);
  Stop(std::move(daemon));
}

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

// On a 64 MiB device with a 256 MiB host tier, no request raises the
// daemon's peak RSS (VmHWM, reset to the current RSS with clear_refs 5 before each case) above
// its RSS after one warm-up swap + 64 MiB (device) + 256 MiB (host) + 200 MiB of slack (what
// no tier counts: oneDNN scratch, allocations on LibTorch's worker threads, the gRPC messages
// carrying images and results, the allocator's retained pages). The cases, one after another:
//  - upscale x4 of a 640x427 target (sample1.jpg resized; a CPU fallback of the whole frame,
//    unadmitted, would peak at 3.3 GB): tiled, on the device or the host tier, or
//    RESOURCE_EXHAUSTED;
//  - upscale x4 of the 11-MP mosaic (3840x2896): its images alone (3.9 GB) can never fit the
//    host tier, so it is RESOURCE_EXHAUSTED naming the stage, the tier and the bytes, before
//    any stage runs (not an INTERNAL error after the RSS has grown by gigabytes);
//  - --enhance x4 of the 640x427 target's largest face in 3 concurrent jobs (a 3-job daemon).
// ~45 s: the first case is most of it (its 32-px tiles on 2 cores).
TEST_F(SwapProcessTest, PeakRssStaysWithinBothTiersForUpscalesOfSmallAndElevenMegapixelTargetsAndThreeEnhances) {
  constexpr uint64_t MiB = 1ull << 20;
  const std::string target = Sample1At640();
  ASSERT_FALSE(target.empty());
  const std::string mosaic = FUSION_FETCHED_TESTDATA_DIR "/faces/mosaic_3840x2896.jpg";
  auto daemon = StartDaemon("", {"--host-memory-limit", "256MiB", "--max-concurrent-jobs", "3"}, "64MiB");
  ASSERT_TRUE(daemon->Running());
  // Warm-up: the swap without options (models loaded, allocator pools grown).
  const RunResult warm = AstronautOnto(target, dir_.File("warm.png"), {});
  ASSERT_EQ(warm.exit_code, 0) << warm.err;
  const uint64_t rss = ProcStatusBytes(daemon->pid(), "VmRSS");
  ASSERT_GT(rss, 0u);
  const uint64_t bound = rss + 64 * MiB + 256 * MiB + 200 * MiB;
  // Runs `jobs` (each a RunResult producer) at once from a reset peak; returns the peak.
  auto measure = [&](const char* name, std::vector<std::function<RunResult()>> jobs) {
    std::ofstream(absl::StrCat("/proc/", daemon->pid(), "/clear_refs")) << "5";
    const absl::Time start = absl::Now();
    std::vector<std::future<RunResult>> running;
    for (auto& job : jobs) running.push_back(std::async(std::launch::async, job));
    std::vector<RunResult> results;
    for (auto& r : running) results.push_back(r.get());
    const uint64_t hwm = ProcStatusBytes(daemon->pid(), "VmHWM");
    std::printf("%s at 64 MiB/256 MiB: %.1f s, RSS after warm-up %llu MiB, peak %llu MiB (bound %llu MiB)\n", name,
                absl::ToDoubleSeconds(absl::Now() - start), static_cast<unsigned long long>(rss / MiB),
                static_cast<unsigned long long>(hwm / MiB), static_cast<unsigned long long>(bound / MiB));
    EXPECT_LE(hwm, bound) << name;
    return results;
  };

  const RunResult up = measure("upscale x4 of 640x427", {[&] {
                                 return AstronautOnto(target, dir_.File("up.png"), {"--upscale", "x4"});
                               }})[0];
  std::printf("%s\n", up.exit_code == 0 ? up.out.c_str() : up.err.c_str());
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

  const RunResult big = measure("upscale x4 of 3840x2896", {[&] {
                                  return AstronautOnto(mosaic, dir_.File("big.png"), {"--upscale", "x4"});
                                }})[0];
  EXPECT_EQ(big.exit_code, 1) << big.out;
  // 11,120,640 px * 15 + 177,930,240 px * 21 bytes (UpscaleHostBytes).
  EXPECT_NE(big.err.find("RESOURCE_EXHAUSTED"), std::string::npos) << big.err;
  EXPECT_NE(big.err.find("host tier: stage 'upscale' (model 'esrgan-slim-x4'): the images of the x4 upscale of a "
                         "3840x2896 frame needs 3.6 GiB (3903344640 bytes), host budget 256.0 MiB"),
            std::string::npos) << big.err;
  EXPECT_EQ(big.err.find("stage detect started"), std::string::npos) << "refused before any stage ran";

  std::vector<std::function<RunResult()>> enhances;
  for (int i = 0; i < 3; ++i) {
    enhances.push_back([&, i] {
      return AstronautOnto(target, dir_.File(absl::StrCat("enh", i, ".png")), {"--enhance", "x4", "--faces", "largest"});
    });
  }
  for (const RunResult& e : measure("3 concurrent --enhance x4 of 640x427", enhances)) {
    ASSERT_EQ(e.exit_code, 0) << e.err;
    const nlohmann::json r = nlohmann::json::parse(e.out);
    EXPECT_EQ(r["state"], "SUCCEEDED");
    const nlohmann::json* s = Stage(r, "enhance");
    ASSERT_NE(s, nullptr);
    EXPECT_EQ((*s)["mode"], "tiled") << *s;
  }
  ExpectAtRest();
  const nlohmann::json mem = nlohmann::json::parse(Ctl({"mem", "--json"}).out);
  // What may stay reserved is the source-face cache's slab, reported apart as the host tier's
  // cache bytes (none here: at these budgets the source's stages ran tiled, so nothing is cached).
  EXPECT_EQ(mem["host"]["reserved_bytes"].get<uint64_t>(), mem["host"]["cache_bytes"].get<uint64_t>())
      << "the host working sets were returned";
  Stop(std::move(daemon));
}

// The mosaic with --enhance x4 on 64 MiB gives byte-identical output alone and beside three
// running jobs. A 1024x640 crop of the mosaic with two of its faces, not the
// whole 11 MP: the enhance works on each face's 256-px crop whatever the frame (at 64 MiB in
// 32-px tiles: 705 MiB untiled), so two faces take the same ladder path as thirteen, in 12 s
// instead of 87 s alone. On a 4-job daemon: the crop alone, then again while three normal swaps
// run in a loop beside it; the PNG bytes, every stage's mode and tile, and the degradations
// are the same. ~40 s.
TEST_F(SwapProcessTest, MosaicCropWithEnhanceX4OnSixtyFourMiBGivesTheSameBytesAloneAndBesideThreeRunningJobs) {
  cv::Mat mosaic = cv::imread(FUSION_FETCHED_TESTDATA_DIR "/faces/mosaic_3840x2896.jpg", cv::IMREAD_COLOR);
  ASSERT_FALSE(mosaic.empty());
  const std::string crop = dir_.File("mosaic_crop_1024x640.png");
  ASSERT_TRUE(cv::imwrite(crop, mosaic(cv::Rect(256, 320, 1024, 640))));
  const std::string neighbour_target = Sample1At640();
  ASSERT_FALSE(neighbour_target.empty());
  auto daemon = StartDaemon("", {"--max-concurrent-jobs", "4"}, "64MiB");
  ASSERT_TRUE(daemon->Running());
  const RunResult alone = AstronautOnto(crop, dir_.File("alone.png"), {"--enhance", "x4"});
  ASSERT_EQ(alone.exit_code, 0) << alone.err;

  // Three neighbours swapping in a loop from before the crop's job starts until after it ends.
  std::atomic<bool> stop{false};
  std::atomic<int> started{0};
  struct Neighbour {
    int swaps = 0;
    std::vector<std::string> failures;
    absl::Time first_start = absl::InfiniteFuture(), last_end = absl::InfinitePast();
  };
  std::vector<Neighbour> neighbours(3);
  std::vector<std::thread> threads;
  for (int i = 0; i < 3; ++i) {
    threads.emplace_back([&, i] {
      Neighbour& n = neighbours[i];
      for (int k = 0; !stop.load(); ++k) {
        const absl::Time start = absl::Now();
        if (k == 0) {
          n.first_start = start;
          ++started;
        }
        const RunResult r = AstronautOnto(neighbour_target, dir_.File(absl::StrCat("n", i, "-", k, ".png")), {});
        n.last_end = absl::Now();
        if (r.exit_code != 0) n.failures.push_back(r.err);
        ++n.swaps;
      }
    });
  }
  ASSERT_TRUE(testing::WaitFor([&] { return started.load() == 3; }, absl::Seconds(10)));
  absl::SleepFor(absl::Seconds(1));  // their jobs are submitted and running
  const absl::Time start = absl::Now();
  const RunResult beside = AstronautOnto(crop, dir_.File("beside.png"), {"--enhance", "x4"});
  const absl::Time end = absl::Now();
  stop = true;
  for (std::thread& t : threads) t.join();
  ASSERT_EQ(beside.exit_code, 0) << beside.err;
  std::printf("alone:  %s\nbeside: %s\n", alone.out.c_str(), beside.out.c_str());
  for (const Neighbour& n : neighbours) {
    EXPECT_TRUE(n.failures.empty()) << n.failures.front();
    EXPECT_GE(n.swaps, 1);
    EXPECT_LT(n.first_start, start) << "running before the crop's job";
    EXPECT_GT(n.last_end, end) << "still running after it";
  }

  EXPECT_TRUE(ReadFile(dir_.File("alone.png")) == ReadFile(dir_.File("beside.png"))) << "the PNG bytes differ";
  const nlohmann::json a = nlohmann::json::parse(alone.out), b = nlohmann::json::parse(beside.out);
  EXPECT_EQ(a["faces_swapped"].get<int>(), 2);
  const nlohmann::json* enhance = Stage(a, "enhance");
  ASSERT_NE(enhance, nullptr);
  EXPECT_EQ((*enhance)["mode"], "tiled") << "the crop needs tiles at 64 MiB";
  ASSERT_EQ(a["stages"].size(), b["stages"].size());
  for (size_t i = 0; i < a["stages"].size(); ++i) {
    const nlohmann::json &x = a["stages"][i], &y = b["stages"][i];
    EXPECT_EQ(x["name"], y["name"]);
    EXPECT_EQ(x["mode"], y["mode"]) << x["name"];
    EXPECT_EQ(x["tile"], y["tile"]) << x["name"];
  }
  // The same degradations, up to the byte figures of a refusal: before the model's first upload
  // the residency manager knows the catalogue's prior (SSD's fp32 parameters, 21.2 MiB), after
  // it the measured resident copy (the fast path's packed weights: 21.4 MiB in fp32, 10.8 MiB
  // in bf16 where the CPU has it).
  auto without_model_bytes = [](const nlohmann::json& list) {
    std::vector<std::string> out;
    for (const auto& d : list) {
      // The figure a degradation gives for the model and its working set moves with the
      // working-set estimate the first job taught (138.8 or 149.2 MiB): the same path, not bytes.
      std::string text = std::regex_replace(d.get<std::string>(), std::regex(R"(needs [0-9.]+ [KMG]?i?B \(model [0-9.]+ [KMG]?i?B)"), "needs N (model N");
      out.push_back(std::regex_replace(text, std::regex(R"(need [0-9.]+ [KMG]?i?B of)"), "need N of"));
    }
    return out;
  };
  EXPECT_EQ(without_model_bytes(a["degradations"]), without_model_bytes(b["degradations"]));
  ExpectAtRest();
  Stop(std::move(daemon));
}

// Decoding is admitted on the host tier from the header before anything is decoded: the 11-MP
// mosaic's buffers (its 3840x2896 BGR frame and the working frame the blend draws into, 3 + 3
// B/px) exceed a 32 MiB host budget, so the job is RESOURCE_EXHAUSTED naming the stage, the
// tier and the bytes, and the daemon's peak RSS does not grow by the 32 MB a decode would take.
TEST_F(SwapProcessTest, DecodeBeyondTheHostBudgetIsRefusedFromTheHeaderBeforeDecoding) {
  constexpr uint64_t MiB = 1ull << 20;
  auto daemon = StartDaemon("", {"--host-memory-limit", "32MiB"}, "64MiB");
  ASSERT_TRUE(daemon->Running());
  auto swap = [&] {
    return Ctl({"swap", "--source", FUSION_TEST_DATA_DIR "/faces/astronaut_eileen_collins_512.png", "--target",
                FUSION_FETCHED_TESTDATA_DIR "/faces/mosaic_3840x2896.jpg", "-o", dir_.File("out.png")});
  };
  (void)swap();  // warm-up: the first request grows gRPC's and the journal's pools
  std::ofstream(absl::StrCat("/proc/", daemon->pid(), "/clear_refs")) << "5";
  const uint64_t rss = ProcStatusBytes(daemon->pid(), "VmRSS");
  const RunResult r = swap();
  const uint64_t hwm = ProcStatusBytes(daemon->pid(), "VmHWM");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("RESOURCE_EXHAUSTED"), std::string::npos) << r.err;
  // 11,120,640 px * (3 + 3) bytes.
  EXPECT_NE(r.err.find("host tier: stage 'decode': the target image's 3840x2896 buffers needs 63.6 MiB "
                       "(66723840 bytes), host budget 32.0 MiB: it cannot fit"),
            std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("stage detect started"), std::string::npos) << r.err;
  // The request's 1.4 MB JPEG and its copies (gRPC, the job, the journal) add ~15 MiB; the
  // decode would add 32 MiB more (and the RGB copies 32 MiB again).
  EXPECT_LT(hwm, rss + 25 * MiB) << "RSS " << rss / MiB << " MiB, peak " << hwm / MiB << " MiB";
  ExpectAtRest();
  Stop(std::move(daemon));
}

// The upscale's images are admitted on the host tier before they exist: a 640x427 frame
// upscaled x4 needs 96 MB of images (input, float output, conversions), more than a 64 MiB
// host budget, so the job ends RESOURCE_EXHAUSTED naming the stage, the tier and the bytes at
// once (never INTERNAL, never an unadmitted allocation); the daemon stays up and the next job
// without the upscale succeeds.
TEST_F(SwapProcessTest, UpscaleWhoseImagesExceedTheHostBudgetIsResourceExhaustedNamingStageTierAndBytes) {
  const std::string target = Sample1At640();
  ASSERT_FALSE(target.empty());
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
