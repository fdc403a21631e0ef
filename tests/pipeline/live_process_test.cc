// Live sessions through the real binaries (docs/USER-GUIDE.md#live-sessions): fusiond with the
// pipeline, `fusionctl live` on a clip the test makes with the ffmpeg CLI (its output read back
// with fusion_video), and the C++ SDK's LiveSession for the inputs fusionctl never sends. No
// LibTorch here.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <map>
#include <string>
#include <vector>

#include <httplib.h>
#include <nlohmann/json.hpp>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "fusion/client.h"
#include "process.h"
#include "temp_dir.h"
#include "test_clips.h"
#include "video/video_reader.h"

namespace fusion {
namespace {

using testclips::ReadFile;
using testing::Process;
using testing::RunResult;

const std::string kSource = FUSION_TEST_DATA_DIR "/faces/astronaut_eileen_collins_512.png";
const std::string kPhoto = FUSION_TEST_DATA_DIR "/faces/grace_hopper_512x600.jpg";
const std::vector<std::string> kSessionModels = {"ssd_mobilenetv1", "face_landmark_68", "face_recognition",
                                                 "classical-fusion"};

// A video's frames by presentation time (ms), and its audio packets in order.
struct Streams {
  std::map<int64_t, cv::Mat> frames;
  std::vector<std::string> audio;
};
Streams StreamsOf(const std::string& path) {
  Streams out;
  const std::string bytes = ReadFile(path);
  auto reader = video::VideoReader::Open(bytes, "video", {});
  EXPECT_TRUE(reader.ok()) << reader.status();
  if (!reader.ok()) return out;
  video::Item item;
  for (;;) {
    auto more = (*reader)->Next(&item);
    EXPECT_TRUE(more.ok()) << more.status();
    if (!more.ok() || !*more) break;
    if (item.kind == video::Item::Kind::kFrame) {
      out.frames[static_cast<int64_t>((*reader)->PtsSeconds(item.frame.pts) * 1000 + 0.5)] = item.frame.bgr.clone();
    } else if ((*reader)->StreamType(item.packet.stream_index()) == "audio") {
      out.audio.emplace_back(item.packet.data());
    }
  }
  return out;
}
std::map<int64_t, cv::Mat> FramesOf(const std::string& path) { return StreamsOf(path).frames; }

// The largest mean gray change of a 16x16 window between two frames (a face swapped: tens;
// the encoder's noise: a few).
double LargestLocalChange(const cv::Mat& a, const cv::Mat& b) {
  cv::Mat d, g, m;
  cv::absdiff(a, b, d);
  cv::cvtColor(d, g, cv::COLOR_BGR2GRAY);
  g.convertTo(g, CV_32F);
  cv::blur(g, m, cv::Size(16, 16));
  double max = 0;
  cv::minMaxLoc(m, nullptr, &max);
  return max;
}

// A loopback TCP port free now (for --metrics-listen), or -1.
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

// Nearest-rank percentile p of `v`: the ceil(p * n)-th smallest.
double NearestRank(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  const auto rank = static_cast<size_t>(std::ceil(p * static_cast<double>(v.size())));
  return v[std::clamp<size_t>(rank, 1, v.size()) - 1];
}

class LiveProcessTest : public ::testing::Test {
 protected:
  void SetUp() override { clip_ = testclips::ZoomPanMp4(dir_.path(), kPhoto); }
  void TearDown() override {
    if (daemon_ == nullptr) return;
    daemon_->Signal(SIGTERM);
    EXPECT_EQ(daemon_->Wait(absl::Seconds(20)).exit_code, 0);
  }
  void StartDaemon(std::vector<std::string> extra = {}, const std::string& device_limit = "256MiB") {
    std::vector<std::string> argv = {FUSIOND_BIN, "--socket", socket_, "--device", "cpu", "--device-memory-limit",
                                     device_limit, "--state-dir", dir_.File("state"), "--models-dir", FUSION_MODELS_DIR};
    argv.insert(argv.end(), extra.begin(), extra.end());
    daemon_ = std::make_unique<Process>(argv, dir_.path());
    ASSERT_TRUE(testing::WaitFor([&] { return access(socket_.c_str(), F_OK) == 0 || !daemon_->Running(); },
                                 absl::Seconds(20)));
    ASSERT_TRUE(daemon_->Running());
  }
  std::vector<std::string> LiveArgv(const std::string& out, const std::string& pace) {
    return {FUSIONCTL_BIN, "--socket", socket_, "live", "--source", kSource, "--input", clip_,
            "-o", dir_.File(out), "--pace", pace, "--json"};
  }
  RunResult Live(const std::string& out, const std::string& pace) {
    return testing::RunProcess(LiveArgv(out, pace), dir_.path(), absl::Seconds(120));
  }
  // Each session model's lease count now (-1: `fusionctl mem` failed).
  std::map<std::string, int> Leases() {
    const RunResult r = testing::RunProcess({FUSIONCTL_BIN, "--socket", socket_, "mem", "--json"}, dir_.path(),
                                            absl::Seconds(10));
    std::map<std::string, int> out;
    if (r.exit_code != 0) return {{"mem", -1}};
    const nlohmann::json mem = nlohmann::json::parse(r.out);  // alive through the loop
    for (const auto& m : mem["models"]) {
      out[m["name"].get<std::string>()] = m["leases"].get<int>();
    }
    return out;
  }
  bool SessionLeased() {
    auto l = Leases();
    for (const std::string& m : kSessionModels) {
      if (l[m] < 1) return false;
    }
    return true;
  }
  bool NoLeases() {
    auto l = Leases();
    if (l.count("mem") != 0 || l.count("ssd_mobilenetv1") == 0) return false;
    for (const auto& [name, n] : l) {
      if (n != 0) return false;
    }
    return true;
  }
  RunResult Ctl(std::vector<std::string> args, int uid = -1) {
    args.insert(args.begin(), {FUSIONCTL_BIN, "--socket", socket_});
    return testing::RunProcess(args, dir_.path(), absl::Seconds(30), uid);
  }
  // The live sessions `fusionctl mem --json` and `fusionctl jobs --json` list (as `uid`).
  nlohmann::json MemSessions(int uid = -1) {
    const RunResult r = Ctl({"mem", "--json"}, uid);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.exit_code == 0 ? nlohmann::json::parse(r.out)["live_sessions"] : nlohmann::json();
  }
  nlohmann::json JobsSessions(int uid = -1) {
    const RunResult r = Ctl({"jobs", "--json"}, uid);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    nlohmann::json out = nlohmann::json::array();
    if (r.exit_code != 0) return out;
    for (const auto& e : nlohmann::json::parse(r.out)) {
      if (e.value("kind", "") == "live_session") out.push_back(e);
    }
    return out;
  }
  // Waits for the leases to go and returns how long after `since` the first answer without
  // them was asked for.
  absl::Duration LeasesGoneAfter(absl::Time since) {
    for (;;) {
      const absl::Time asked = absl::Now();
      if (NoLeases()) return asked - since;
      if (asked - since > absl::Seconds(10)) return absl::InfiniteDuration();
      absl::SleepFor(absl::Milliseconds(20));
    }
  }

  testing::TempDir dir_;
  const std::string socket_ = dir_.File("f.sock");
  std::string clip_;
  std::unique_ptr<Process> daemon_;
};

TEST_F(LiveProcessTest, SessionReturnsEveryFrameInOrderWithTheFaceChanged) {
  ASSERT_FALSE(clip_.empty());
  StartDaemon();
  const RunResult r = Live("out.mp4", "4");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["frames_in"], 30);
  EXPECT_TRUE(j["in_order"].get<bool>());
  EXPECT_EQ(j["frames_out"].get<int>() + j["frames_dropped"].get<int>(), 30) << j;
  EXPECT_GE(j["frames_out"].get<int>(), 25) << "at 4 frames/s the CPU keeps up with 240x282: " << j;
  const double p50 = j["latency_ms"]["p50"], p95 = j["latency_ms"]["p95"], p99 = j["latency_ms"]["p99"];
  EXPECT_GT(p50, 0);
  EXPECT_LE(p50, p95);
  EXPECT_LE(p95, p99);

  const Streams in_streams = StreamsOf(clip_), out_streams = StreamsOf(dir_.File("out.mp4"));
  const auto& in = in_streams.frames;
  const auto& out = out_streams.frames;
  ASSERT_EQ(static_cast<int>(out.size()), j["frames_out"].get<int>());
  for (const auto& [ms, frame] : out) {
    ASSERT_EQ(in.count(ms), 1u) << "an output frame at " << ms << " ms has no input frame there";
    EXPECT_GT(LargestLocalChange(in.at(ms), frame), 30) << "the face at " << ms << " ms is not swapped";
  }
  // The clip's AAC track, copied bit for bit (frames the daemon dropped are gaps in the video).
  EXPECT_GT(in_streams.audio.size(), 20u);
  EXPECT_EQ(out_streams.audio, in_streams.audio);
  EXPECT_TRUE(NoLeases()) << "the session's leases outlived it";
}

TEST_F(LiveProcessTest, LeasesShowWhileOpenAndGoWithinASecondOfTheEndOrOfAKilledClient) {
  ASSERT_FALSE(clip_.empty());
  StartDaemon();
  // A session that ends by itself: 30 frames at 6/s.
  {
    Process client(LiveArgv("a.mp4", "6"), dir_.path());
    ASSERT_TRUE(testing::WaitFor([&] { return SessionLeased(); }, absl::Seconds(30)));
    const RunResult r = client.Wait(absl::Seconds(60));
    const absl::Time ended = absl::Now();
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_LE(LeasesGoneAfter(ended), absl::Seconds(1));
  }
  // A client killed mid-stream: 30 frames at 2/s, SIGKILL once its leases show.
  Process client(LiveArgv("b.mp4", "2"), dir_.path());
  ASSERT_TRUE(testing::WaitFor([&] { return SessionLeased(); }, absl::Seconds(30)));
  absl::SleepFor(absl::Milliseconds(700));  // frames flowing
  ASSERT_TRUE(client.Running());
  client.Signal(SIGKILL);
  const absl::Time killed = absl::Now();
  EXPECT_LE(LeasesGoneAfter(killed), absl::Seconds(1));
  EXPECT_EQ(client.Wait(absl::Seconds(5)).exit_code, 128 + SIGKILL);
  // The daemon is still up and the next session runs.
  const RunResult again = Live("c.mp4", "4");
  EXPECT_EQ(again.exit_code, 0) << again.err;
}

TEST_F(LiveProcessTest, AFastSenderGetsTheNewestFramesAndCountsTheDropped) {
  ASSERT_FALSE(clip_.empty());
  StartDaemon();
  const RunResult r = Live("out.mp4", "1000");  // 30 frames in 30 ms
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["frames_in"], 30);
  EXPECT_TRUE(j["in_order"].get<bool>());
  EXPECT_GT(j["frames_dropped"].get<int>(), 0) << j;
  EXPECT_EQ(j["frames_out"].get<int>() + j["frames_dropped"].get<int>(), 30) << j;
  // The newest frame is never dropped: the output's last frame is the clip's last.
  const auto in = FramesOf(clip_), out = FramesOf(dir_.File("out.mp4"));
  ASSERT_FALSE(out.empty());
  EXPECT_EQ(out.rbegin()->first, in.rbegin()->first);
}

TEST_F(LiveProcessTest, AUidHoldsAtMostItsSessionLimit) {
  ASSERT_FALSE(clip_.empty());
  StartDaemon({"--max-live-sessions-per-uid", "1"});
  Process first(LiveArgv("a.mp4", "2"), dir_.path());
  ASSERT_TRUE(testing::WaitFor([&] { return SessionLeased(); }, absl::Seconds(30)));
  const RunResult second = Live("b.mp4", "4");
  EXPECT_EQ(second.exit_code, 1);
  EXPECT_TRUE(absl::StrContains(second.err, "RESOURCE_EXHAUSTED")) << second.err;
  EXPECT_TRUE(absl::StrContains(second.err, "live sessions")) << second.err;
  EXPECT_TRUE(absl::StrContains(second.err, "at most 1")) << second.err;
  first.Signal(SIGKILL);
  first.Wait(absl::Seconds(5));
  // The slot is back once the first session is gone.
  ASSERT_TRUE(testing::WaitFor([&] { return NoLeases(); }, absl::Seconds(5)));
  EXPECT_EQ(Live("c.mp4", "4").exit_code, 0);
}

TEST_F(LiveProcessTest, ModelsThatCannotBeHeldAreRefusedNamingTheBytes) {
  ASSERT_FALSE(clip_.empty());
  StartDaemon({}, "16MiB");  // the detector alone needs 21 MiB
  const RunResult r = Live("out.mp4", "4");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(absl::StrContains(r.err, "RESOURCE_EXHAUSTED")) << r.err;
  EXPECT_TRUE(absl::StrContains(r.err, "live session: its models")) << r.err;
  EXPECT_TRUE(absl::StrContains(r.err, " bytes")) << r.err;
  EXPECT_TRUE(NoLeases());
  const RunResult health = testing::RunProcess({FUSIONCTL_BIN, "--socket", socket_, "health"}, dir_.path());
  EXPECT_EQ(health.exit_code, 0) << health.err;
}

// A session is not a job: with max_concurrent_jobs 1 and that worker busy with a 120-frame video
// (about 12 s alone), a session opens and returns its frames while the video still runs.
TEST_F(LiveProcessTest, ASessionDoesNotWaitForTheJobWorkers) {
  ASSERT_FALSE(clip_.empty());
  const std::string long_clip = testclips::ZoomPanLongMp4(dir_.path(), kPhoto);
  ASSERT_FALSE(long_clip.empty());
  StartDaemon({"--max-concurrent-jobs", "1"});
  const RunResult submitted = testing::RunProcess({FUSIONCTL_BIN, "--socket", socket_, "swap", "--source", kSource,
                                                   "--target", long_clip, "--simple", "--no-wait"},
                                                  dir_.path());
  ASSERT_EQ(submitted.exit_code, 0) << submitted.err;
  std::string id = submitted.out;
  while (!id.empty() && (id.back() == '\n' || id.back() == ' ')) id.pop_back();
  auto state = [&] {
    const RunResult r = testing::RunProcess({FUSIONCTL_BIN, "--socket", socket_, "job", id, "--json"}, dir_.path());
    return r.exit_code == 0 ? nlohmann::json::parse(r.out)["state"].get<std::string>() : std::string("?");
  };
  ASSERT_TRUE(testing::WaitFor([&] { return state() == "RUNNING"; }, absl::Seconds(30)));
  const RunResult live = Live("out.mp4", "10");
  ASSERT_EQ(live.exit_code, 0) << live.err;
  EXPECT_GT(nlohmann::json::parse(live.out)["frames_out"].get<int>(), 0);
  EXPECT_EQ(state(), "RUNNING") << "the session waited for the video job";
}

// fusionctl live writes its MP4 beside OUT and renames it at the end: a session refused before
// any frame came back leaves an existing OUT as it was (and no file of its own); with --json the
// error is in the one object on stdout.
TEST_F(LiveProcessTest, ARefusedSessionLeavesAnExistingOutputAsItWasAndSaysWhyInItsJson) {
  StartDaemon();
  cv::imwrite(dir_.File("grey.png"), cv::Mat(200, 200, CV_8UC3, cv::Scalar(128, 128, 128)));
  {
    std::ofstream keep(dir_.File("out.mp4"), std::ios::binary);
    keep << "an earlier result";
  }
  std::vector<std::string> argv = LiveArgv("out.mp4", "30");
  argv[std::find(argv.begin(), argv.end(), kSource) - argv.begin()] = dir_.File("grey.png");
  const RunResult r = testing::RunProcess(argv, dir_.path(), absl::Seconds(60));
  EXPECT_EQ(r.exit_code, 1) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["error"]["code"], "FAILED_PRECONDITION") << j;
  EXPECT_EQ(j["error"]["stage"], "detect") << j;
  EXPECT_EQ(j["frames_out"], 0) << j;
  EXPECT_EQ(ReadFile(dir_.File("out.mp4")), "an earlier result");
  for (const auto& e : std::filesystem::directory_iterator(dir_.path())) {
    EXPECT_FALSE(absl::StrContains(e.path().filename().string(), ".part")) << e.path();
  }
  // An output directory that does not exist: exit 2 before any session, naming it.
  const RunResult nodir = Live("no/such/dir/out.mp4", "30");
  EXPECT_EQ(nodir.exit_code, 2) << nodir.err;
  EXPECT_TRUE(absl::StrContains(nodir.err, "cannot write in")) << nodir.err;
}

// Inputs fusionctl never sends, through the SDK: each ends its session with a status naming the
// stage and the object, and the daemon serves the next session.
TEST_F(LiveProcessTest, BadInputEndsTheSessionNamingTheStage) {
  StartDaemon();
  auto client = Client::Connect({.socket = socket_, .timeout_ms = 60000});
  ASSERT_TRUE(client.ok()) << client.status();
  const std::string source = ReadFile(kSource), photo = ReadFile(kPhoto);
  {  // bytes that are no image
    auto live = (*client)->OpenLive(source);
    ASSERT_TRUE(live.ok()) << live.status();
    ASSERT_TRUE((*live)->SendEncoded(7, "not an image at all").ok());
    auto r = (*live)->Receive();
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
    EXPECT_EQ(ErrorStage(r.status()), "decode");
    EXPECT_TRUE(absl::StrContains(r.status().message(), "live frame 1 (sequence 7)")) << r.status();
  }
  {  // a raw frame shorter than its size says
    auto live = (*client)->OpenLive(source);
    ASSERT_TRUE(live.ok()) << live.status();
    ASSERT_TRUE((*live)->SendRaw(0, std::string(1000, '\0'), 64, 64).ok());
    auto r = (*live)->Receive();
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
    EXPECT_EQ(ErrorStage(r.status()), "decode");
    EXPECT_TRUE(absl::StrContains(r.status().message(), "64x64 has 12288 bytes, this one 1000")) << r.status();
  }
  {  // a raw frame whose result would not fit in one message (max_message_bytes, 32 MiB)
    auto live = (*client)->OpenLive(source);
    ASSERT_TRUE(live.ok()) << live.status();
    ASSERT_TRUE((*live)->SendRaw(3, std::string(4000u * 3000u * 3u, '\0'), 4000, 3000).ok());
    auto r = (*live)->Receive();
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
    EXPECT_EQ(ErrorStage(r.status()), "decode");
    EXPECT_TRUE(absl::StrContains(r.status().message(), "live frame (sequence 3): its result, 36000000 bytes raw BGR"))
        << r.status();
    EXPECT_TRUE(absl::StrContains(r.status().message(), "max_message_bytes 33554432")) << r.status();
  }
  {  // a source without a face
    std::vector<uchar> grey;
    cv::imencode(".png", cv::Mat(200, 200, CV_8UC3, cv::Scalar(128, 128, 128)), grey);
    auto live = (*client)->OpenLive(std::string(grey.begin(), grey.end()));
    ASSERT_FALSE(live.ok());
    EXPECT_EQ(live.status().code(), absl::StatusCode::kFailedPrecondition) << live.status();
    EXPECT_EQ(ErrorStage(live.status()), "detect");
    EXPECT_TRUE(absl::StrContains(live.status().message(), "no face in the source image")) << live.status();
  }
  // A JPEG frame comes back a JPEG of its size with the face swapped; the summary counts it.
  auto live = (*client)->OpenLive(source);
  ASSERT_TRUE(live.ok()) << live.status();
  EXPECT_EQ((*live)->opened().models.size(), kSessionModels.size());
  ASSERT_TRUE((*live)->SendEncoded(1, photo).ok());
  ASSERT_TRUE((*live)->CloseSend().ok());
  auto r = (*live)->Receive();
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->has_value());
  EXPECT_EQ((*r)->sequence, 1u);
  EXPECT_EQ((*r)->faces_swapped, 1u);
  EXPECT_TRUE((*r)->keyframe);
  const cv::Mat in = cv::imdecode(std::vector<uchar>(photo.begin(), photo.end()), cv::IMREAD_COLOR);
  const cv::Mat out = cv::imdecode(std::vector<uchar>((*r)->image.begin(), (*r)->image.end()), cv::IMREAD_COLOR);
  ASSERT_EQ(out.size(), in.size());
  EXPECT_EQ(static_cast<unsigned char>((*r)->image[0]), 0xFF) << "a JPEG in, a JPEG out";
  EXPECT_GT(LargestLocalChange(in, out), 30);
  auto end = (*live)->Receive();
  ASSERT_TRUE(end.ok()) << end.status();
  EXPECT_FALSE(end->has_value());
  EXPECT_EQ((*live)->summary().frames_received, 1u);
  EXPECT_EQ((*live)->summary().frames_returned, 1u);
  EXPECT_EQ((*live)->summary().frames_dropped, 0u);
}

// Frames by memfd (past the client's threshold), sent much faster than they are swapped: the
// dropped frames' memfd tokens are removed (else the uid's 64 tokens would run out), every frame
// is returned or counted dropped, and the results stay in order.
TEST_F(LiveProcessTest, MemfdFramesFromAFastSenderAreReturnedOrDroppedInOrder) {
  StartDaemon();
  auto client = Client::Connect({.socket = socket_, .timeout_ms = 60000, .memfd_threshold_bytes = 1024});
  ASSERT_TRUE(client.ok()) << client.status();
  auto live = (*client)->OpenLive(ReadFile(kSource));
  ASSERT_TRUE(live.ok()) << live.status();
  const std::string photo = ReadFile(kPhoto);
  constexpr int kFrames = 200;  // with leaked tokens, more than the 64 a uid may hold would be dropped
  // ~300 frames/s: ten times what the CPU swaps, slow enough that gRPC has read each frame (and
  // the daemon removed a dropped one's token) before 64 more tokens are handed out.
  for (int i = 0; i < kFrames; ++i) {
    ASSERT_TRUE((*live)->SendEncoded(i, photo).ok()) << i;
    absl::SleepFor(absl::Milliseconds(3));
  }
  ASSERT_TRUE((*live)->CloseSend().ok());
  int returned = 0;
  int64_t last = -1;
  for (;;) {
    auto r = (*live)->Receive();
    ASSERT_TRUE(r.ok()) << r.status();
    if (!r->has_value()) break;
    EXPECT_GT(static_cast<int64_t>((*r)->sequence), last);
    last = static_cast<int64_t>((*r)->sequence);
    EXPECT_EQ((*r)->faces_swapped, 1u);
    ++returned;
  }
  EXPECT_EQ(last, kFrames - 1) << "the newest frame is never dropped";
  EXPECT_EQ((*live)->summary().frames_received, static_cast<uint64_t>(kFrames));
  EXPECT_EQ((*live)->summary().frames_returned, static_cast<uint64_t>(returned));
  EXPECT_EQ((*live)->summary().frames_dropped, static_cast<uint64_t>(kFrames - returned));
  EXPECT_GT((*live)->summary().frames_dropped, 0u);
  EXPECT_EQ((*client)->transfer_stats().images_by_memfd, static_cast<uint64_t>(kFrames + 1))
      << "frames fell back to inline: the uid's memfd tokens ran out";
}

// An open session is listed, with its counts, latency and leases, by `fusionctl mem --json`,
// `fusionctl jobs --json`, the SDK and the metrics endpoint (promtool-clean); another uid sees
// none of it. Within a second of its end it is gone from all of them; the metrics' frame
// counters keep its frames.
TEST_F(LiveProcessTest, AnOpenSessionIsListedWithItsCountsAndLeasesAndGoesWithinASecondOfItsEnd) {
  const int port = FreeLoopbackPort();
  ASSERT_GT(port, 0);
  const bool root = geteuid() == 0;
  constexpr int kNobody = 65534;
  std::vector<std::string> extra = {"--metrics-listen", absl::StrCat("127.0.0.1:", port)};
  if (root) {  // nobody may connect too (it must not see root's session)
    const std::string toml = dir_.File("others.toml");
    std::ofstream(toml) << "socket_group = \"nogroup\"\nallowed_uids = [0, 65534]\n";
    extra.insert(extra.end(), {"--config", toml});
  }
  StartDaemon(extra);
  auto client = Client::Connect({.socket = socket_, .timeout_ms = 60000});
  ASSERT_TRUE(client.ok()) << client.status();
  const int64_t before_ms = absl::ToUnixMillis(absl::Now());
  auto live = (*client)->OpenLive(ReadFile(kSource));
  ASSERT_TRUE(live.ok()) << live.status();
  const int64_t opened_ms = absl::ToUnixMillis(absl::Now());
  const std::string photo = ReadFile(kPhoto);
  constexpr int kFrames = 5;
  std::vector<double> total_ms;
  for (int i = 0; i < kFrames; ++i) {  // one at a time: no frame waits behind another, none drops
    ASSERT_TRUE((*live)->SendEncoded(i, photo).ok()) << i;
    auto r = (*live)->Receive();
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_TRUE(r->has_value());
    total_ms.push_back((*r)->timings.total_ms);
  }
  const uint32_t uid = geteuid();
  const LiveOpened& opened = (*live)->opened();
  ASSERT_EQ(opened.models.size(), kSessionModels.size());
  ASSERT_GT(opened.model_bytes, 0u);
  // The same figures wherever it is seen; the percentiles are of the very total_ms the results
  // carried.
  auto expect_session = [&](const nlohmann::json& s, const std::string& where) {
    SCOPED_TRACE(where);
    EXPECT_TRUE(absl::StartsWith(s["session_id"].get<std::string>(), "live-")) << s;
    EXPECT_EQ(s["owner_uid"].get<uint32_t>(), uid);
    EXPECT_GE(s["started_unix_ms"].get<int64_t>(), before_ms);
    EXPECT_LE(s["started_unix_ms"].get<int64_t>(), opened_ms);
    EXPECT_EQ(s["device"], "cpu");
    std::vector<std::string> models = s["models"];
    std::sort(models.begin(), models.end());
    std::vector<std::string> want = kSessionModels;
    std::sort(want.begin(), want.end());
    EXPECT_EQ(models, want);
    EXPECT_EQ(s["model_bytes"].get<uint64_t>(), opened.model_bytes);
    EXPECT_EQ(s["frames_received"], kFrames);
    EXPECT_EQ(s["frames_returned"], kFrames);
    EXPECT_EQ(s["frames_dropped"], 0);
    EXPECT_EQ(s["latency"]["frames"], kFrames);
    EXPECT_DOUBLE_EQ(s["latency"]["p50_ms"].get<double>(), NearestRank(total_ms, 0.50));
    EXPECT_DOUBLE_EQ(s["latency"]["p95_ms"].get<double>(), NearestRank(total_ms, 0.95));
    EXPECT_DOUBLE_EQ(s["latency"]["p99_ms"].get<double>(), NearestRank(total_ms, 0.99));
    EXPECT_GT(s["latency"]["p50_ms"].get<double>(), 0);
  };
  const nlohmann::json mem = MemSessions();
  ASSERT_EQ(mem.size(), 1u) << mem;
  expect_session(mem[0], "fusionctl mem --json");
  const nlohmann::json jobs = JobsSessions();
  ASSERT_EQ(jobs.size(), 1u) << jobs;
  expect_session(jobs[0], "fusionctl jobs --json");
  EXPECT_EQ(jobs[0]["state"], "LIVE");
  EXPECT_EQ(jobs[0]["session_id"], mem[0]["session_id"]);
  const std::string id = mem[0]["session_id"];
  const RunResult text = Ctl({"jobs"});
  EXPECT_NE(text.out.find(absl::StrCat(id, "  LIVE  frames 5 in, 5 out, 0 dropped  latency p50 ")), std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find(absl::StrCat("  leases ", kSessionModels.size(), " models ")), std::string::npos) << text.out;
  const RunResult mem_text = Ctl({"mem"});
  EXPECT_NE(mem_text.out.find(absl::StrCat("uid ", uid, ": ", id, "  LIVE  frames 5 in")), std::string::npos)
      << mem_text.out;
  auto sdk = (*client)->ListLiveSessions();
  ASSERT_TRUE(sdk.ok()) << sdk.status();
  ASSERT_EQ(sdk->size(), 1u);
  EXPECT_EQ((*sdk)[0].session_id, mem[0]["session_id"]);
  EXPECT_EQ((*sdk)[0].frames_returned, static_cast<uint64_t>(kFrames));
  EXPECT_EQ((*sdk)[0].model_bytes, opened.model_bytes);
  EXPECT_DOUBLE_EQ((*sdk)[0].latency_p95_ms, NearestRank(total_ms, 0.95));
  auto state = (*client)->GetMemoryState();
  ASSERT_TRUE(state.ok()) << state.status();
  ASSERT_EQ(state->live_sessions.size(), 1u);
  EXPECT_EQ(state->live_sessions[0].frames_received, static_cast<uint64_t>(kFrames));
  if (root) {  // another uid sees none of it, and may not ask for every uid's
    EXPECT_EQ(MemSessions(kNobody).size(), 0u);
    EXPECT_EQ(JobsSessions(kNobody).size(), 0u);
    const RunResult refused = Ctl({"jobs", "--all"}, kNobody);
    EXPECT_EQ(refused.exit_code, 1);
    EXPECT_NE(refused.err.find("PERMISSION_DENIED"), std::string::npos) << refused.err;
  }
  const std::string u = absl::StrCat("{uid=\"", uid, "\"}");
  httplib::Client http("127.0.0.1", port);
  auto res = http.Get("/metrics");
  ASSERT_TRUE(res) << httplib::to_string(res.error());
  const std::string& metrics = res->body;
  std::ofstream(dir_.File("metrics.txt")) << metrics;
  const RunResult lint = testing::RunProcess(
      {"/bin/sh", "-c", absl::StrCat("promtool check metrics < ", dir_.File("metrics.txt"))}, dir_.path());
  EXPECT_EQ(lint.exit_code, 0) << lint.out << lint.err;
  EXPECT_EQ(lint.out + lint.err, "") << "promtool's lint findings";
  EXPECT_EQ(Sample(metrics, "fusiond_live_sessions" + u), 1) << metrics;
  EXPECT_EQ(Sample(metrics, "fusiond_live_leased_bytes" + u), static_cast<double>(opened.model_bytes));
  EXPECT_EQ(Sample(metrics, "fusiond_live_frames_received_total"), kFrames);
  EXPECT_EQ(Sample(metrics, "fusiond_live_frames_returned_total"), kFrames);
  EXPECT_EQ(Sample(metrics, "fusiond_live_frames_dropped_total"), 0);
  EXPECT_EQ(Sample(metrics, "fusiond_live_frame_seconds_count"), kFrames);
  EXPECT_EQ(Sample(metrics, "fusiond_live_frame_seconds_bucket{le=\"+Inf\"}"), kFrames);
  double sum_seconds = 0;
  for (double ms : total_ms) sum_seconds += ms / 1000;
  EXPECT_NEAR(Sample(metrics, "fusiond_live_frame_seconds_sum"), sum_seconds, 1e-5);

  // The end: gone from every listing within a second; the counters keep its frames.
  ASSERT_TRUE((*live)->CloseSend().ok());
  for (;;) {
    auto r = (*live)->Receive();
    ASSERT_TRUE(r.ok()) << r.status();
    if (!r->has_value()) break;
  }
  const absl::Time ended = absl::Now();
  std::string last_metrics;
  auto gone = [&] {
    auto listed = (*client)->ListLiveSessions();
    auto m = http.Get("/metrics");
    if (!listed.ok() || !listed->empty() || !m) return false;
    last_metrics = m->body;
    return MemSessions().empty() && JobsSessions().empty() && Sample(last_metrics, "fusiond_live_sessions" + u) == -1;
  };
  absl::Duration after = absl::InfiniteDuration();
  for (;;) {
    const absl::Time asked = absl::Now();
    if (gone()) {
      after = asked - ended;
      break;
    }
    if (asked - ended > absl::Seconds(10)) break;
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_LE(after, absl::Seconds(1));
  EXPECT_EQ(Sample(last_metrics, "fusiond_live_frames_returned_total"), kFrames) << last_metrics;
  EXPECT_EQ(Sample(last_metrics, "fusiond_live_frame_seconds_count"), kFrames);
}

}  // namespace
}  // namespace fusion
