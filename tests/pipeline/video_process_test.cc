// Video targets through the real binaries: fusiond (with the pipeline) and fusionctl swap on
// clips the test makes with the ffmpeg CLI (tests/video/test_clips.h); the result is read back
// with fusion_video's own reader (frames, timestamps, audio packets). No LibTorch here.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <set>
#include <fstream>
#include <iostream>

#include <nlohmann/json.hpp>
#include <opencv2/core.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
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

struct Decoded {
  std::vector<double> times;
  std::vector<cv::Mat> frames;
  std::vector<std::string> audio;
};

Decoded Decode(const std::string& bytes) {
  Decoded d;
  auto reader = video::VideoReader::Open(bytes, "video", {});
  EXPECT_TRUE(reader.ok()) << reader.status();
  if (!reader.ok()) return d;
  video::Item item;
  while (true) {
    auto more = (*reader)->Next(&item);
    EXPECT_TRUE(more.ok()) << more.status();
    if (!more.ok() || !*more) break;
    if (item.kind == video::Item::Kind::kFrame) {
      d.times.push_back((*reader)->PtsSeconds(item.frame.pts));
      d.frames.push_back(item.frame.bgr);
    } else if ((*reader)->StreamType(item.packet.stream_index()) == "audio") {
      d.audio.emplace_back(item.packet.data());
    }
  }
  return d;
}

double MeanAbsDiff(const cv::Mat& a, const cv::Mat& b) {
  cv::Mat d;
  cv::absdiff(a, b, d);
  const cv::Scalar m = cv::mean(d);
  return (m[0] + m[1] + m[2]) / 3;
}

class VideoProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Another uid (nobody, in the socket's group) may submit: the fair-share test.
    // A SIGTERM interrupts a running job at once (no drain): the resume test.
    std::ofstream(toml_) << "socket_group = \"nogroup\"\nallowed_uids = [" << kOtherUid << "]\ndrain_ms = 0\n";
    StartDaemon();
  }
  // Chunks of 6 frames: the clips' 24-30 frames make 4-5 committed segments. A 256 MiB device
  // budget: at it no frame falls back to the CPU.
  void StartDaemon() {
    std::vector<std::string> argv = {FUSIOND_BIN, "--socket", socket_, "--device", "cpu",
                                           "--device-memory-limit", "256MiB", "--state-dir", state_,
                                           "--models-dir", FUSION_MODELS_DIR, "--video-chunk-frames", "6", "--config", toml_};
    argv.insert(argv.end(), extra_flags_.begin(), extra_flags_.end());
    unlink(socket_.c_str());  // a killed daemon leaves it behind
    daemon_ = std::make_unique<Process>(argv, dir_.path());
    ASSERT_TRUE(testing::WaitFor([&] { return access(socket_.c_str(), F_OK) == 0 || !daemon_->Running(); },
                                 absl::Seconds(20)));
    ASSERT_TRUE(daemon_->Running());
  }
  void TearDown() override {
    daemon_->Signal(SIGTERM);
    EXPECT_EQ(daemon_->Wait(absl::Seconds(20)).exit_code, 0);
  }
  RunResult Ctl(std::vector<std::string> args, absl::Duration timeout = absl::Seconds(120)) {
    args.insert(args.begin(), {FUSIONCTL_BIN, "--socket", socket_});
    return testing::RunProcess(args, dir_.path(), timeout);
  }
  // Files in the daemon's results directory whose name ends in `suffix`.
  int ResultFiles(const std::string& suffix) {
    int n = 0;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(state_ + "/results", ec)) {
      if (absl::EndsWith(e.path().string(), suffix)) ++n;
    }
    return n;
  }
  uint64_t RssKiB() const {
    std::ifstream status("/proc/" + std::to_string(daemon_->pid()) + "/status");
    std::string line;
    while (std::getline(status, line)) {
      if (absl::StartsWith(line, "VmRSS:")) return std::stoull(line.substr(6));
    }
    ADD_FAILURE() << "no VmRSS for fusiond";
    return 0;
  }
  void ExpectAtRest() {
    const RunResult mem = Ctl({"mem", "--json"});
    ASSERT_EQ(mem.exit_code, 0) << mem.err;
    const nlohmann::json j = nlohmann::json::parse(mem.out);
    EXPECT_EQ(j["device"]["reserved_bytes"].get<uint64_t>(), 0u);
    // Only the source-face cache's slabs (reported apart) stay reserved on the host tier.
    EXPECT_EQ(j["host"]["reserved_bytes"].get<uint64_t>(), j["host"]["cache_bytes"].get<uint64_t>());
    for (const auto& m : j["models"]) EXPECT_EQ(m["leases"].get<int>(), 0) << m["name"];
  }

  // `fusionctl job ID --json`, or {} when it fails.
  nlohmann::json JobJson(const std::string& id) {
    const RunResult r = Ctl({"job", id, "--json"});
    return r.exit_code == 0 ? nlohmann::json::parse(r.out) : nlohmann::json::object();
  }
  // Submits `clip` with --no-wait (and `flags`) and waits until 2 of its frames are encoded; its
  // job id ("" after a failed ASSERT).
  std::string SubmitVideoAndWaitForItsFrames(const std::string& clip, std::vector<std::string> flags) {
    std::vector<std::string> args = {"swap", "--source", kSource, "--target", clip, "--simple", "--no-wait"};
    args.insert(args.end(), flags.begin(), flags.end());
    const RunResult submitted = Ctl(args);
    EXPECT_EQ(submitted.exit_code, 0) << submitted.err;
    const std::string id(absl::StripAsciiWhitespace(submitted.out));
    EXPECT_TRUE(testing::WaitFor(
        [&] {
          absl::SleepFor(absl::Milliseconds(50));
          const nlohmann::json j = JobJson(id);
          return j.contains("frames_done") && j["frames_done"].get<uint64_t>() >= 2;
        },
        absl::Seconds(90)));
    return id;
  }
  // An image swap by uid kOtherUid into a folder it may write ("<dir>/other/<name>").
  RunResult OtherUidImageSwap(const std::string& name, std::vector<std::string> flags = {}) {
    const std::string outdir = dir_.File("other");
    mkdir(outdir.c_str(), 0777);
    chmod(outdir.c_str(), 0777);
    std::vector<std::string> args = {FUSIONCTL_BIN, "--socket", socket_, "swap", "--source", kSource, "--target",
                                     kPhoto, "--simple", "-o", outdir + "/" + name};
    args.insert(args.end(), flags.begin(), flags.end());
    return testing::RunProcess(args, dir_.path(), absl::Seconds(120), kOtherUid, {}, kOtherUid);
  }

  static constexpr int kOtherUid = 65534;  // nobody, primary group nogroup
  testing::TempDir dir_;
  const std::string toml_ = dir_.File("fusiond.toml");
  const std::string socket_ = dir_.File("f.sock");
  const std::string state_ = dir_.File("state");
  std::vector<std::string> extra_flags_;  // StartDaemon's, after the fixture's
  std::unique_ptr<Process> daemon_;
};

TEST_F(VideoProcessTest, SwapKeepsFramesTimestampsAndAudioAndCountsFramesWithoutAFace) {
  const std::string clip = testclips::FaceThenGreyMp4(dir_.path(), kPhoto);  // 15 face + 9 grey frames
  ASSERT_FALSE(clip.empty());
  const std::string out = dir_.File("out.mp4");
  const RunResult r = Ctl({"swap", "--source", kSource, "--target", clip, "-o", out, "--simple", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["kind"], "video");
  EXPECT_EQ(j["frames_total"].get<int>(), 24);
  EXPECT_EQ(j["frames_swapped"].get<int>(), 15);
  EXPECT_EQ(j["frames_without_face"].get<int>(), 9);
  EXPECT_EQ(j["faces_swapped"].get<int>(), 15);
  EXPECT_EQ(j["width"].get<int>(), 240);
  EXPECT_EQ(j["height"].get<int>(), 282);
  EXPECT_NEAR(j["frame_rate"].get<double>(), 15.0, 1e-6);
  EXPECT_GT(j["frames_per_second"].get<double>(), 0.0);
  EXPECT_EQ(j["chunk_frames"].get<int>(), 6);  // 4 segments joined
  EXPECT_EQ(j["frames_resumed"].get<int>(), 0);
  // Tracking: the first frame and each chunk's last are keyframes (0, 5, 11, 17, 23), the cut to
  // grey (15) is one more: 6; between them (frames 1-4, 6-10, 12-14) the face is tracked. Tracks
  // continue across chunks: one track. The swapped face changes about as much as the still
  // photo's face does under the H.264 round trip: a ratio, bounded.
  EXPECT_EQ(j["keyframes"].get<int>(), 6) << r.out;
  EXPECT_EQ(j["frames_tracked"].get<int>(), 12);
  EXPECT_EQ(j["tracks"].get<int>(), 1);
  EXPECT_GT(j["flicker_ratio"].get<double>(), 0.0);
  EXPECT_LT(j["flicker_ratio"].get<double>(), 3.0);
  // Every swapped face re-described in its result frame: the source's identity (distance under
  // face_recognition's 0.6 same-person threshold; the target photo's own face is far above it).
  const double median = j["identity_distance_median"].get<double>(), worst = j["identity_distance_worst"].get<double>();
  EXPECT_GT(median, 0.1);
  EXPECT_GE(worst, median);
  EXPECT_LT(worst, 0.6);
  EXPECT_TRUE(j["degradations"].empty()) << j["degradations"];
  std::set<std::string> stages;
  for (const auto& s : j["stages"]) {
    stages.insert(s["name"]);
    EXPECT_EQ(s["mode"], "device") << s.dump();  // the most degraded frame's: none in CPU fallback at 256 MiB
  }
  EXPECT_EQ(stages, (std::set<std::string>{"detect", "landmarks", "encode", "generate", "blend", "score"}));
  // Progress per frame on stderr (not a terminal: one line per report).
  EXPECT_TRUE(absl::StrContains(r.err, "frame 24 of 24")) << r.err;

  const Decoded in = Decode(ReadFile(clip)), res = Decode(ReadFile(out));
  ASSERT_EQ(in.times.size(), 24u);
  ASSERT_EQ(res.times.size(), in.times.size());
  for (size_t i = 0; i < in.times.size(); ++i) EXPECT_NEAR(res.times[i], in.times[i], 1e-4) << "frame " << i;
  ASSERT_GT(in.audio.size(), 50u);
  EXPECT_EQ(res.audio, in.audio);  // the AAC packets copied bit for bit
  // Face frames changed (the swap), grey frames passed through (only the H.264 round trip).
  for (size_t i = 0; i < 24; ++i) {
    const double diff = MeanAbsDiff(res.frames[i], in.frames[i]);
    if (i < 15) {
      EXPECT_GT(diff, 1.5) << "frame " << i;
    } else {
      EXPECT_LT(diff, 1.0) << "frame " << i;
    }
  }
  EXPECT_EQ(ResultFiles(".mp4"), 1);
  EXPECT_EQ(ResultFiles(".tmp"), 0);
  ExpectAtRest();
}

// --video-detect every-frame scans every frame and carries nothing; the default finds the same
// faces with 9 scans. Both swap the face in all 15 face frames.
// A video without a face fails in stage "detect" (its per-frame stages send no stage event: the
// client's last one was the source's "encode"), in swap --json and, from the journal, in job --json.
TEST_F(VideoProcessTest, AVideoWithoutAFaceFailsInStageDetect) {
  const std::string clip = testclips::GreyMp4(dir_.path());
  ASSERT_FALSE(clip.empty());
  const RunResult r = Ctl({"swap", "--source", kSource, "--target", clip, "-o", dir_.File("out.mp4"), "--json"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out, nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(j.is_discarded()) << "stdout: " << r.out;
  EXPECT_EQ(j["state"], "FAILED") << j;
  EXPECT_EQ(j["error"]["code"], "FAILED_PRECONDITION") << j;
  EXPECT_EQ(j["error"]["stage"], "detect") << j;
  EXPECT_EQ(j["error"]["message"], "no face in any of the 15 frames of the target video") << j;
  const RunResult job = Ctl({"job", j["job_id"].get<std::string>(), "--json"});
  ASSERT_EQ(job.exit_code, 0) << job.err;
  EXPECT_EQ(nlohmann::json::parse(job.out)["error_stage"], "detect") << job.out;
  ExpectAtRest();
}

// An MP4 whose middle is overwritten passes the submit's probe (its index is whole) and fails
// while its frames are decoded: stage "decode", in our words only (FFmpeg's go to the log).
TEST_F(VideoProcessTest, DamageMidFileFailsInStageDecodeInOurWords) {
  std::string bytes = ReadFile(testclips::ZoomPanMp4(dir_.path(), kPhoto));
  ASSERT_GT(bytes.size(), 20000u);
  for (size_t i = 0; i < 4000; ++i) bytes[bytes.size() / 2 + i] = static_cast<char>((i * 7919 + 13) & 0xff);
  const std::string damaged = dir_.File("damaged.mp4");
  std::ofstream(damaged, std::ios::binary) << bytes;
  const RunResult r = Ctl({"swap", "--source", kSource, "--target", damaged, "-o", dir_.File("out.mp4"), "--json"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out, nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(j.is_discarded()) << "stdout: " << r.out;
  EXPECT_EQ(j["state"], "FAILED") << j;
  EXPECT_EQ(j["error"]["code"], "INVALID_ARGUMENT") << j;
  EXPECT_EQ(j["error"]["stage"], "decode") << j;
  const std::string message = j["error"]["message"].get<std::string>();
  EXPECT_TRUE(absl::StartsWith(message, "target video: damaged: ")) << j;
  EXPECT_FALSE(absl::StrContains(message, "FFmpeg")) << j;
  EXPECT_EQ(Ctl({"health"}).exit_code, 0);
  ExpectAtRest();
}

TEST_F(VideoProcessTest, EveryFrameDetectionAndTrackingSwapTheSameFrames) {
  const std::string clip = testclips::FaceThenGreyMp4(dir_.path(), kPhoto);  // 15 face + 9 grey frames
  ASSERT_FALSE(clip.empty());
  nlohmann::json every, tracked;
  for (auto [mode, j] : {std::pair{"every-frame", &every}, std::pair{"track", &tracked}}) {
    const RunResult r = Ctl({"swap", "--source", kSource, "--target", clip, "-o", dir_.File(absl::StrCat(mode, ".mp4")),
                             "--simple", "--json", "--video-detect", mode});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    *j = nlohmann::json::parse(r.out);
    EXPECT_EQ((*j)["frames_swapped"].get<int>(), 15) << mode;
    EXPECT_EQ((*j)["faces_swapped"].get<int>(), 15) << mode;
  }
  EXPECT_EQ(every["keyframes"].get<int>(), 24);
  EXPECT_EQ(every["frames_tracked"].get<int>(), 0);
  EXPECT_EQ(every["tracks"].get<int>(), 1);  // matched frame to frame, across the chunks
  EXPECT_EQ(tracked["keyframes"].get<int>(), 6);
  EXPECT_EQ(tracked["frames_tracked"].get<int>(), 12);
  // An interval of 2: every other frame after a keyframe, and each chunk's end
  // (0 2 4 5, 7 9 11, 13 15 (the cut) 17, 19 21 23): 13.
  const RunResult r = Ctl({"swap", "--source", kSource, "--target", clip, "-o", dir_.File("k2.mp4"), "--simple",
                           "--json", "--keyframe-interval", "2"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["keyframes"].get<int>(), 13) << r.out;
  ExpectAtRest();
}

// A face that slides in from the edge mid-chunk (chunks of 6: keyframes at 0, 5, 6, 11, ...): the
// keyframe that first finds it traces it back through the frames since the keyframe before, so
// tracking swaps it in every frame the per-frame scan does.
TEST_F(VideoProcessTest, AFaceEnteringMidChunkIsSwappedFromItsFirstFrame) {
  const std::string clip = testclips::FaceEntersMp4(dir_.path(), kPhoto);
  ASSERT_FALSE(clip.empty());
  std::map<std::string, nlohmann::json> runs;
  for (const char* mode : {"every-frame", "track"}) {
    const RunResult r = Ctl({"swap", "--source", kSource, "--target", clip, "-o", dir_.File(absl::StrCat(mode, ".mp4")),
                             "--simple", "--json", "--video-detect", mode});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    runs[mode] = nlohmann::json::parse(r.out);
  }
  const nlohmann::json& every = runs["every-frame"];
  const nlohmann::json& tracked = runs["track"];
  std::cout << "face entering: every-frame swapped " << every["frames_swapped"] << " frames, track "
            << tracked["frames_swapped"] << " (" << tracked["keyframes"] << " keyframes, " << tracked["frames_tracked"]
            << " tracked)\n";
  EXPECT_GE(every["frames_swapped"].get<int>(), 12);
  EXPECT_GE(tracked["frames_swapped"].get<int>(), every["frames_swapped"].get<int>());
  EXPECT_LT(tracked["keyframes"].get<int>(), 24);
  EXPECT_GT(tracked["frames_tracked"].get<int>(), 0);
  ExpectAtRest();
}

// kill -9 in the middle of a video job; the next fusiond resumes it after its committed chunks
// (segments of 6 frames). Then a SIGTERM (no drain) interrupts the resumed run: it keeps its
// segments too, and the third fusiond completes the job from them. The result has every frame
// with the input's timestamps and audio, as an uninterrupted run's (SwapKeepsFrames... above:
// equal to the input's).
TEST_F(VideoProcessTest, KillNineMidVideoResumesAfterTheCommittedChunks) {
  const std::string clip = testclips::ZoomPanMp4(dir_.path(), kPhoto);  // 30 frames, H.264 + AAC
  ASSERT_FALSE(clip.empty());
  const RunResult submitted = Ctl({"swap", "--source", kSource, "--target", clip, "--simple", "--no-wait"});
  ASSERT_EQ(submitted.exit_code, 0) << submitted.err;
  const std::string id(absl::StripAsciiWhitespace(submitted.out));
  const std::string parts = state_ + "/results/" + id + ".parts";
  auto committed = [&] {
    int n = 0;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(parts, ec)) {
      if (e.path().extension() == ".mp4") ++n;
    }
    return n;
  };
  // About half: two chunks (12 of 30 frames) committed.
  ASSERT_TRUE(testing::WaitFor([&] { return committed() >= 2; }, absl::Seconds(90)));
  daemon_->Signal(SIGKILL);
  daemon_->Wait(absl::Seconds(10));
  const int killed = committed();
  ASSERT_GE(killed, 2);
  ASSERT_LE(killed, 3);
  // The kept chunks' files: the resumed run must not write them again.
  auto stamps = [&](int n) {
    std::vector<std::filesystem::file_time_type> t;
    for (int i = 0; i < n; ++i) {
      char name[16];
      snprintf(name, sizeof name, "/%06d.mp4", i);
      t.push_back(std::filesystem::last_write_time(parts + name));
    }
    return t;
  };
  const auto kept_stamps = stamps(killed);
  StartDaemon();
  // The resumed run commits one more chunk; SIGTERM before the last one.
  ASSERT_TRUE(testing::WaitFor([&] { return committed() > killed; }, absl::Seconds(90)));
  daemon_->Signal(SIGTERM);
  EXPECT_EQ(daemon_->Wait(absl::Seconds(20)).exit_code, 0);
  const int termed = committed();
  ASSERT_GT(termed, killed);
  ASSERT_LT(termed * 6, 30);
  EXPECT_TRUE(stamps(killed) == kept_stamps) << "a chunk committed before the kill was written again";
  StartDaemon();
  nlohmann::json job;
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        absl::SleepFor(absl::Milliseconds(200));
        const RunResult r = Ctl({"job", id, "--json"});
        if (r.exit_code != 0) return false;
        job = nlohmann::json::parse(r.out);
        return job["state"] != "QUEUED" && job["state"] != "RUNNING";
      },
      absl::Seconds(90)));
  ASSERT_EQ(job["state"], "SUCCEEDED") << job.dump();
  const std::string out = dir_.File("resumed.mp4");
  const RunResult result = Ctl({"result", id, "-o", out, "--json"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const nlohmann::json j = nlohmann::json::parse(result.out);
  EXPECT_EQ(j["frames_total"].get<int>(), 30);
  // The last run kept every chunk committed before the SIGTERM and processed only the rest.
  EXPECT_EQ(j["frames_resumed"].get<int>(), termed * 6);
  std::cout << "kill -9 with " << killed << " chunks of 6 committed, SIGTERM with " << termed
            << "; the last run: " << j["frames_resumed"] << " of 30 frames kept, "
            << 30 - j["frames_resumed"].get<int>() << " processed\n";
  EXPECT_EQ(j["frames_swapped"].get<int>() + j["frames_without_face"].get<int>(), 30);
  EXPECT_EQ(j["faces_swapped"].get<int>(), j["frames_swapped"].get<int>());
  const Decoded in = Decode(ReadFile(clip)), res = Decode(ReadFile(out));
  ASSERT_EQ(in.times.size(), 30u);
  ASSERT_EQ(res.times.size(), in.times.size());
  for (size_t i = 0; i < in.times.size(); ++i) EXPECT_NEAR(res.times[i], in.times[i], 1e-4) << "frame " << i;
  EXPECT_EQ(res.audio, in.audio);
  for (size_t i = 0; i < 30; ++i) EXPECT_GT(MeanAbsDiff(res.frames[i], in.frames[i]), 1.5) << "frame " << i;
  EXPECT_FALSE(std::filesystem::exists(parts));  // the segments go with the published result
  EXPECT_EQ(ResultFiles(".tmp"), 0);
  // The same job uninterrupted gives the same frames, bit for bit: each chunk's tracks start
  // at its first frame, whichever run made it.
  const std::string once = dir_.File("once.mp4");
  const RunResult whole = Ctl({"swap", "--source", kSource, "--target", clip, "--simple", "-o", once, "--json"});
  ASSERT_EQ(whole.exit_code, 0) << whole.err;
  const Decoded uninterrupted = Decode(ReadFile(once));
  ASSERT_EQ(uninterrupted.frames.size(), res.frames.size());
  for (size_t i = 0; i < res.frames.size(); ++i) {
    EXPECT_EQ(MeanAbsDiff(uninterrupted.frames[i], res.frames[i]), 0.0) << "frame " << i;
  }
  const nlohmann::json w = nlohmann::json::parse(whole.out);
  for (const char* key : {"keyframes", "frames_tracked", "tracks", "faces_swapped"}) EXPECT_EQ(w[key], j[key]) << key;
  EXPECT_DOUBLE_EQ(w["flicker_ratio"].get<double>(), j["flicker_ratio"].get<double>());
  ExpectAtRest();
}

// Another uid's image job while a video runs: with max_concurrent_jobs 2 (the default) the fair
// queue starts it at once beside the video (no chunk boundary to wait for); it completes while
// the video is still running. Prints the latency it saw.
TEST_F(VideoProcessTest, AnotherUidsImageJobRunsBesideAVideo) {
  // 120 frames: the 30-frame clip was done in ~3 s on a Sapphire Rapids CPU, before the image job.
  const std::string clip = testclips::ZoomPanLongMp4(dir_.path(), kPhoto);
  ASSERT_FALSE(clip.empty());
  const std::string id = SubmitVideoAndWaitForItsFrames(clip, {});
  ASSERT_FALSE(HasFailure());
  auto video = [&] { return JobJson(id); };
  const absl::Time asked = absl::Now();
  const RunResult image = OtherUidImageSwap("image.png", {"--json"});
  const absl::Duration latency = absl::Now() - asked;
  ASSERT_EQ(image.exit_code, 0) << image.err;
  EXPECT_EQ(nlohmann::json::parse(image.out)["faces_swapped"].get<int>(), 1);
  const nlohmann::json v = video();
  EXPECT_EQ(v["state"], "RUNNING") << "the image job waited for the video";
  ASSERT_EQ(Ctl({"cancel", id}).exit_code, 0);
  ASSERT_TRUE(testing::WaitFor([&] { return video()["state"] == "CANCELLED"; }, absl::Seconds(20)));
  // The same image job on the idle daemon, for comparison.
  const absl::Time idle_asked = absl::Now();
  const RunResult idle = OtherUidImageSwap("idle.png");
  ASSERT_EQ(idle.exit_code, 0) << idle.err;
  std::cout << "image job of another uid: " << absl::ToDoubleMilliseconds(latency)
            << " ms submit to result during a video (at frame " << v["frames_done"] << " of 120), "
            << absl::ToDoubleMilliseconds(absl::Now() - idle_asked) << " ms on the idle daemon\n";
}

// One job at a time: another uid's normal image job, submitted while a low-priority video runs,
// runs while the video yields (at its next stage) and ends first; the video then goes on from
// where it stopped and writes the bytes an uninterrupted run writes.
TEST_F(VideoProcessTest, ANormalImageJobEndsBeforeTheLowVideoItInterruptsWhichWritesTheSameBytes) {
  daemon_->Signal(SIGTERM);
  ASSERT_EQ(daemon_->Wait(absl::Seconds(20)).exit_code, 0);
  extra_flags_ = {"--max-concurrent-jobs", "1"};
  StartDaemon();
  const std::string clip = testclips::ZoomPanMp4(dir_.path(), kPhoto);  // 30 frames
  ASSERT_FALSE(clip.empty());
  const std::string id = SubmitVideoAndWaitForItsFrames(clip, {"--priority", "low"});
  ASSERT_FALSE(HasFailure());
  auto video = [&] { return JobJson(id); };
  const absl::Time asked = absl::Now();
  const RunResult image = OtherUidImageSwap("image.png", {"--json"});
  const absl::Duration latency = absl::Now() - asked;
  ASSERT_EQ(image.exit_code, 0) << image.err;
  EXPECT_EQ(nlohmann::json::parse(image.out)["faces_swapped"].get<int>(), 1);
  const nlohmann::json during = video();
  ASSERT_EQ(during["state"], "RUNNING") << "the image job waited for the video: " << during.dump();
  const uint64_t frames_at_image = during["frames_done"].get<uint64_t>();
  EXPECT_LT(frames_at_image, 30u);
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        absl::SleepFor(absl::Milliseconds(200));
        const std::string state = video().value("state", "");
        return state != "QUEUED" && state != "RUNNING";
      },
      absl::Seconds(120)));
  const nlohmann::json done = video();
  ASSERT_EQ(done["state"], "SUCCEEDED") << done.dump();
  const std::string yielded = dir_.File("yielded.mp4"), once = dir_.File("once.mp4");
  const RunResult result = Ctl({"result", id, "-o", yielded, "--json"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  // The same job with nothing beside it.
  const RunResult whole = Ctl({"swap", "--source", kSource, "--target", clip, "--simple", "--priority", "low", "-o", once, "--json"});
  ASSERT_EQ(whole.exit_code, 0) << whole.err;
  const std::string a = ReadFile(yielded), b = ReadFile(once);
  ASSERT_GT(a.size(), 1000u);
  EXPECT_TRUE(a == b) << "the yielded video's " << a.size() << " bytes differ from an uninterrupted run's " << b.size();
  const nlohmann::json y = nlohmann::json::parse(result.out), w = nlohmann::json::parse(whole.out);
  for (const char* key : {"frames_total", "frames_swapped", "keyframes", "frames_tracked", "tracks", "faces_swapped"}) {
    EXPECT_EQ(y[key], w[key]) << key;
  }
  std::cout << "normal image job of another uid during a low video, one job at a time: " << absl::ToDoubleMilliseconds(latency)
            << " ms submit to result (the video at frame " << frames_at_image << " of 30 then); the video "
            << y["frames_per_second"] << " frames/s with the image job, " << w["frames_per_second"] << " alone\n";
  ExpectAtRest();
}

TEST_F(VideoProcessTest, BadVideoTargetsAreInvalidArgumentAndTheDaemonStaysUp) {
  const std::string good = ReadFile(testclips::ZoomPanMp4(dir_.path(), kPhoto));
  ASSERT_GT(good.size(), 1000u);
  const std::string truncated = dir_.File("truncated.mp4"), text = dir_.File("notes.mp4");
  std::ofstream(truncated, std::ios::binary) << good.substr(0, good.size() / 2);
  std::ofstream(text) << "this is a text file named .mp4\n";
  const std::string audio = testclips::AudioOnlyM4a(dir_.path());
  const std::string huge = testclips::Declares16KFramesMkv(dir_.path()), empty = testclips::NoFramesY4m(dir_.path());
  ASSERT_FALSE(huge.empty());
  ASSERT_FALSE(empty.empty());
  const std::vector<std::pair<std::string, std::string>> cases = {
      {truncated, "target video truncated"},
      // fusionctl sends what does not start like a video as an image target; fusiond tries both.
      {text, "target image: unknown image format (31 bytes, first bytes 74 68 69 73 20 69 73 20); fusiond "
             "accepts PNG, JPEG, WebP, TIFF and BMP; nor is it a video fusiond reads"},
      {audio, "target video: no video stream (the file holds audio aac)"},
      // From the container header, before any decoder runs.
      {huge, "target video: 16384x16384 frames (268435456 pixels) exceed the limit of 100000000 pixels"},
      {empty, "target video: the video stream has no frames"},
  };
  // Four rounds; RSS after the fourth within 4 MiB of the second's (nothing kept per request:
  // the first round's growth is the libraries' and allocator's one-time warm-up, and a clean
  // clone's CI run saw 4.7 MiB more after the third round than after the first). Each reading
  // waits 1.5 s for jemalloc's 1-s decay to hand back the rounds' dirty pages.
  uint64_t rss_first = 0;
  const auto settled_rss = [&] {
    absl::SleepFor(absl::Milliseconds(1500));
    return RssKiB();
  };
  for (int round = 0; round < 4; ++round) {
    for (const auto& [target, message] : cases) {
      const RunResult r = Ctl({"swap", "--source", kSource, "--target", target, "-o", dir_.File("x.mp4")});
      EXPECT_EQ(r.exit_code, 1) << target << ": " << r.err;
      EXPECT_TRUE(absl::StrContains(r.err, "INVALID_ARGUMENT")) << r.err;
      EXPECT_TRUE(absl::StrContains(r.err, message)) << r.err;
    }
    if (round == 1) rss_first = settled_rss();
  }
  // The least of three settled readings: what the daemon keeps, not what a thread of a busy
  // machine (ctest -j2 on two cores) has yet to hand back (one CI run read 6 MiB more once,
  // passing when run alone).
  uint64_t rss_last = settled_rss();
  for (int i = 0; i < 2 && rss_last >= rss_first + 4 * 1024; ++i) rss_last = std::min(rss_last, settled_rss());
  EXPECT_LT(rss_last, rss_first + 4 * 1024) << "after the second round " << rss_first << " KiB";
  // A video needs an .mp4 output: a usage error before anything is submitted.
  const RunResult png = Ctl({"swap", "--source", kSource, "--target", truncated, "-o", dir_.File("x.png")});
  EXPECT_EQ(png.exit_code, 2) << png.err;
  EXPECT_TRUE(absl::StrContains(png.err, "is a video: -o must end in .mp4")) << png.err;
  EXPECT_EQ(Ctl({"health"}).exit_code, 0);
  EXPECT_EQ(ResultFiles(""), 0);
  ExpectAtRest();
}

TEST_F(VideoProcessTest, CancelStopsAWebmVideoWithinAFrame) {
  const std::string clip = testclips::ZoomPanWebm(dir_.path(), kPhoto);  // VP9 + Opus, 30 frames
  ASSERT_FALSE(clip.empty());
  const RunResult submitted = Ctl({"swap", "--source", kSource, "--target", clip, "--no-wait"});
  ASSERT_EQ(submitted.exit_code, 0) << submitted.err;
  const std::string id(absl::StripAsciiWhitespace(submitted.out));
  uint64_t done = 0, total = 0;
  std::vector<std::string> stages;  // the job's stage text at each look once frames are done
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        const RunResult job = Ctl({"job", id, "--json"});
        if (job.exit_code != 0) return false;
        const nlohmann::json j = nlohmann::json::parse(job.out);
        done = j["frames_done"].get<uint64_t>();
        total = j["frames_total"].get<uint64_t>();
        if (done > 0) {
          // The percentage is the frames' (one snapshot of the job), the stage the frame's.
          EXPECT_FLOAT_EQ(j["progress"].get<float>(), static_cast<float>(done) / total) << j.dump();
          stages.push_back(j["stage"].get<std::string>());
        }
        return done >= 2;
      },
      absl::Seconds(90)));
  EXPECT_EQ(total, 30u);
  ASSERT_FALSE(stages.empty());
  for (const std::string& s : stages) {
    EXPECT_THAT(s, ::testing::MatchesRegex("(detect|landmarks|generate|blend|score)( \\(.*\\))?")) << s;
  }
  const absl::Time asked = absl::Now();
  const RunResult cancelled = Ctl({"cancel", id});
  ASSERT_EQ(cancelled.exit_code, 0) << cancelled.err;
  ASSERT_TRUE(testing::WaitFor(
      [&] { return absl::StrContains(Ctl({"job", id}).out, "CANCELLED"); }, absl::Seconds(10)));
  const absl::Duration took = absl::Now() - asked;
  const RunResult job = Ctl({"job", id});
  // The frame is named: at the frame's start, before one of its stages or inside one.
  EXPECT_THAT(job.out, ::testing::ContainsRegex("job cancelled (at frame [0-9]+ of 30|before stage '[a-z]+' \\(frame "
                                                "[0-9]+ of 30\\)|during stage '[a-z]+' \\(frame [0-9]+ of 30, )"))
      << job.out;
  // Within one frame: a frame takes ~0.5-1 s here; the checkpoints sit between its stages.
  EXPECT_LT(took, absl::Seconds(5));
  EXPECT_EQ(ResultFiles(".tmp"), 0);  // the partial result is removed
  EXPECT_EQ(ResultFiles(".mp4"), 0);
  ExpectAtRest();
}

}  // namespace
}  // namespace fusion
