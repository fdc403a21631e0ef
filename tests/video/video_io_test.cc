// fusion_video (probe, VideoReader, Mp4Writer) on clips made by the test with the ffmpeg CLI.
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "decode_all.h"
#include "test_clips.h"
#include "temp_dir.h"
#include "video/mp4_writer.h"
#include "video/video_probe.h"
#include "video/video_reader.h"

namespace fusion::video {
namespace {

using testclips::ReadFile;

const std::string kPhoto = std::string(FUSION_TEST_DATA_DIR) + "/faces/grace_hopper_512x600.jpg";
constexpr uint64_t kMaxPixels = 100'000'000;

// Decodes `in` and encodes every frame unchanged (and copies the other streams) into `out`.
absl::Status Transcode(const std::string& bytes, const std::string& out, std::vector<std::string>* degradations,
                       FrameRange range = {}) {
  auto reader = VideoReader::Open(bytes, "clip", {.max_pixels = kMaxPixels, .range = range});
  if (!reader.ok()) return reader.status();
  auto writer = Mp4Writer::Create(**reader, out, EncodeOptions{.preset = "ultrafast"}, degradations);
  if (!writer.ok()) return writer.status();
  Item item;
  for (;;) {
    auto more = (*reader)->Next(&item);
    if (!more.ok()) return more.status();
    if (!*more) break;
    absl::Status st = item.kind == Item::Kind::kFrame ? (*writer)->WriteFrame(item.frame)
                                                       : (*writer)->WritePacket(item.packet);
    if (!st.ok()) return st;
  }
  return (*writer)->Finish();
}

class VideoIoTest : public ::testing::Test {
 protected:
  testing::TempDir dir_;
};

TEST_F(VideoIoTest, ProbeReportsSizeRateFramesAndStreams) {
  const std::string clip = testclips::ZoomPanMp4(dir_.path(), kPhoto);
  auto info = ProbeVideo(ReadFile(clip), "target video", kMaxPixels);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->width, 240);
  EXPECT_EQ(info->height, 282);
  EXPECT_EQ(info->frames, 30);
  EXPECT_EQ(info->frames_in_range, 30);
  EXPECT_NEAR(info->fps, 15.0, 1e-6);
  EXPECT_NEAR(info->duration_s, 2.0, 1.0 / 15 + 1e-6);
  EXPECT_EQ(info->codec, "h264");
  ASSERT_EQ(info->streams.size(), 2u);
  EXPECT_EQ(info->streams[1].type, "audio");
  EXPECT_EQ(info->streams[1].codec, "aac");
  EXPECT_TRUE(info->streams[1].mp4_carries);
  auto part = ProbeVideo(ReadFile(clip), "target video", kMaxPixels, {.start_s = 0.5, .duration_s = 1.0});
  ASSERT_TRUE(part.ok()) << part.status();
  EXPECT_EQ(part->frames_in_range, 15);
}

TEST_F(VideoIoTest, ProbeRefusesATruncatedMp4) {
  const std::string bytes = ReadFile(testclips::ZoomPanMp4(dir_.path(), kPhoto));
  ASSERT_GT(bytes.size(), 1000u);
  auto info = ProbeVideo(bytes.substr(0, bytes.size() * 6 / 10), "target video", kMaxPixels);
  ASSERT_EQ(info.status().code(), absl::StatusCode::kInvalidArgument) << info.status();
  EXPECT_TRUE(absl::StrContains(info.status().message(), "target video truncated")) << info.status();
}

// An MKV cut in half demuxes cleanly (no index to miss): its segment's declared duration is
// what tells. The whole file, and one whose audio outlasts its video, are read.
TEST_F(VideoIoTest, ProbeRefusesAnMkvCutShortAndKeepsAWholeOne) {
  const std::string mkv = dir_.File("zoompan.mkv");
  ASSERT_TRUE(testclips::Ffmpeg("-i '" + testclips::ZoomPanMp4(dir_.path(), kPhoto) + "' -c copy '" + mkv + "'"));
  const std::string bytes = ReadFile(mkv);
  auto whole = ProbeVideo(bytes, "target video", kMaxPixels);
  ASSERT_TRUE(whole.ok()) << whole.status();
  EXPECT_EQ(whole->frames, 30);
  auto cut = ProbeVideo(bytes.substr(0, bytes.size() / 2), "target video", kMaxPixels);
  ASSERT_EQ(cut.status().code(), absl::StatusCode::kInvalidArgument) << cut.status();
  EXPECT_TRUE(absl::StrContains(cut.status().message(), "target video truncated: the container declares 2.0"))
      << cut.status();
  const std::string longer = dir_.File("audio_outlasts.mkv");
  ASSERT_TRUE(testclips::Ffmpeg("-f lavfi -i color=c=gray:s=64x48:r=10:d=1 -f lavfi -i sine=duration=3 "
                                "-c:v libx264 -preset ultrafast -c:a libopus '" + longer + "'"));
  auto outlasts = ProbeVideo(ReadFile(longer), "target video", kMaxPixels);
  ASSERT_TRUE(outlasts.ok()) << outlasts.status();
  EXPECT_EQ(outlasts->frames, 10);
}

TEST_F(VideoIoTest, ProbeRefusesATextFile) {
  auto info = ProbeVideo("this is a text file named clip.mp4, not a video\n", "target video", kMaxPixels);
  ASSERT_EQ(info.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(info.status().message(), "target video: not a video fusiond reads"))
      << info.status();
}

TEST_F(VideoIoTest, ProbeRefusesAFileWithoutAVideoStream) {
  auto info = ProbeVideo(ReadFile(testclips::AudioOnlyM4a(dir_.path())), "target video", kMaxPixels);
  ASSERT_EQ(info.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(info.status().message(), "no video stream (the file holds audio aac)"))
      << info.status();
}

TEST_F(VideoIoTest, ProbeRefusesA16KHeaderBeforeDecoding) {
  // A 320x256 MKV whose header is patched to declare 16384x16384 frames: PixelWidth (EBML id
  // 0xB0) and PixelHeight (0xBA) are 2-byte values, rewritten in place.
  std::string path;
  const std::string patched = testclips::Declares16KFramesMkv(dir_.path(), &path);
  ASSERT_FALSE(patched.empty());
  auto info = ProbeVideo(ReadFile(patched), "target video", kMaxPixels);
  ASSERT_EQ(info.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(info.status().message(),
                                "target video: 16384x16384 frames (268435456 pixels) exceed the limit of 100000000 pixels"))
      << info.status();
  // Unpatched, the same file probes.
  EXPECT_TRUE(ProbeVideo(ReadFile(path), "target video", kMaxPixels).ok());
}

TEST_F(VideoIoTest, ProbeRefusesAVideoWithoutFrames) {
  const std::string path = testclips::NoFramesY4m(dir_.path());
  ASSERT_FALSE(path.empty());
  auto info = ProbeVideo(ReadFile(path), "target video", kMaxPixels);
  ASSERT_EQ(info.status().code(), absl::StatusCode::kInvalidArgument) << info.status();
  EXPECT_TRUE(absl::StrContains(info.status().message(), "target video: the video stream has no frames"))
      << info.status();
}

TEST_F(VideoIoTest, Mp4RoundTripKeepsFramesTimestampsAndAudioBytes) {
  const std::string in = ReadFile(testclips::ZoomPanMp4(dir_.path(), kPhoto));
  std::vector<std::string> degradations;
  ASSERT_TRUE(Transcode(in, dir_.File("out.mp4"), &degradations).ok());
  EXPECT_TRUE(degradations.empty());
  const Decoded a = DecodeAll(in), b = DecodeAll(ReadFile(dir_.File("out.mp4")));
  ASSERT_EQ(a.frame_times.size(), 30u);
  ASSERT_EQ(b.frame_times.size(), a.frame_times.size());
  for (size_t i = 0; i < a.frame_times.size(); ++i) EXPECT_NEAR(b.frame_times[i], a.frame_times[i], 1e-4) << i;
  ASSERT_GT(a.audio_packets.size(), 50u);
  EXPECT_EQ(b.audio_packets, a.audio_packets);  // bit-identical, in order
  auto probe = ProbeVideo(ReadFile(dir_.File("out.mp4")), "result", kMaxPixels);
  ASSERT_TRUE(probe.ok()) << probe.status();
  EXPECT_EQ(probe->codec, "h264");
  EXPECT_NEAR(probe->fps, 15.0, 1e-3);
  EXPECT_NEAR(probe->duration_s, 2.0, 1.0 / 15 + 1e-6);
}

TEST_F(VideoIoTest, WebmVp9OpusBecomesH264WithTheOpusCopied) {
  const std::string in = ReadFile(testclips::ZoomPanWebm(dir_.path(), kPhoto));
  std::vector<std::string> degradations;
  ASSERT_TRUE(Transcode(in, dir_.File("out.mp4"), &degradations).ok());
  const Decoded a = DecodeAll(in), b = DecodeAll(ReadFile(dir_.File("out.mp4")));
  ASSERT_EQ(a.frame_times.size(), 30u);
  ASSERT_EQ(b.frame_times.size(), a.frame_times.size());
  for (size_t i = 0; i < a.frame_times.size(); ++i) EXPECT_NEAR(b.frame_times[i], a.frame_times[i], 1e-3) << i;
  EXPECT_TRUE(degradations.empty()) << degradations.front();
  EXPECT_EQ(b.audio_packets, a.audio_packets);
  auto probe = ProbeVideo(ReadFile(dir_.File("out.mp4")), "result", kMaxPixels);
  ASSERT_TRUE(probe.ok()) << probe.status();
  EXPECT_EQ(probe->codec, "h264");
  ASSERT_EQ(probe->streams.size(), 2u);
  EXPECT_EQ(probe->streams[1].codec, "opus");
}

TEST_F(VideoIoTest, VorbisIsDroppedAsADegradation) {
  const std::string path = dir_.File("vorbis.mkv");
  ASSERT_TRUE(testclips::Ffmpeg("-f lavfi -i color=c=gray:s=64x64:r=10:d=1 -f lavfi -i sine=duration=1 "
                                "-c:v libx264 -preset ultrafast -c:a libvorbis '" + path + "'"));
  std::vector<std::string> degradations;
  ASSERT_TRUE(Transcode(ReadFile(path), dir_.File("out.mp4"), &degradations).ok());
  ASSERT_EQ(degradations.size(), 1u);
  EXPECT_EQ(degradations[0], "audio stream 1 (vorbis): dropped, MP4 cannot carry it unchanged");
  EXPECT_EQ(DecodeAll(ReadFile(dir_.File("out.mp4"))).frame_times.size(), 10u);
}

TEST_F(VideoIoTest, DecodeAndEncodeKeepAFlatColour) {
  // BGR <-> YUV through libswscale: the fast paths shifted a flat grey 128 to 123,126,124.
  const std::string path = dir_.File("grey.mp4");
  ASSERT_TRUE(testclips::Ffmpeg("-f lavfi -i color=c=0x808080:s=64x48:r=10:d=0.5 -c:v libx264 -preset ultrafast "
                                "-pix_fmt yuv420p '" + path + "'"));
  std::vector<std::string> degradations;
  ASSERT_TRUE(Transcode(ReadFile(path), dir_.File("out.mp4"), &degradations).ok());
  for (const std::string& file : {path, dir_.File("out.mp4")}) {
    auto reader = VideoReader::Open(ReadFile(file), "clip", {});
    ASSERT_TRUE(reader.ok()) << reader.status();
    Item item;
    auto more = (*reader)->Next(&item);
    ASSERT_TRUE(more.ok() && *more);
    const cv::Scalar mean = cv::mean(item.frame.bgr);
    for (int c = 0; c < 3; ++c) EXPECT_NEAR(mean[c], 128.0, 1.0) << file << " channel " << c;
  }
}

// A caller that reuses one Item and keeps each frame's Mat (a header sharing its pixels) keeps
// every frame: each frame gets its own buffer. It was one buffer for a run of frames with no
// packet between them, so every kept frame showed the last one.
TEST_F(VideoIoTest, FramesKeptFromAReusedItemStayDistinct) {
  const std::string path = dir_.File("counter.mp4");  // 5 frames, each a different shade
  ASSERT_TRUE(testclips::Ffmpeg("-f lavfi -i \"color=c=black:s=64x48:r=10:d=0.5,geq=lum='40*N+20':cb=128:cr=128\" "
                                "-c:v libx264 -preset ultrafast -pix_fmt yuv420p '" + path + "'"));
  auto reader = VideoReader::Open(ReadFile(path), "clip", {});
  ASSERT_TRUE(reader.ok()) << reader.status();
  Item item;
  std::vector<cv::Mat> kept;
  for (;;) {
    auto more = (*reader)->Next(&item);
    ASSERT_TRUE(more.ok()) << more.status();
    if (!*more) break;
    if (item.kind == Item::Kind::kFrame) kept.push_back(item.frame.bgr);
  }
  ASSERT_EQ(kept.size(), 5u);
  // Luma 20 + 40 i in the limited range (16-235) is gray (Y - 16) * 255 / 219.
  for (size_t i = 0; i < kept.size(); ++i) {
    EXPECT_NEAR(cv::mean(kept[i])[0], (4 + 40.0 * i) * 255 / 219, 2.0) << "frame " << i;
  }
}

// A phone's portrait clip is stored sideways with a display matrix: frames come out as players
// show them (FFmpeg's autorotate is the reference: measured with the ffmpeg CLI, FFmpeg 5.1's
// `rotate=270` tag shows the stored frame turned 90 degrees clockwise, `rotate=90` turned
// counter-clockwise), and the output is upright with no display matrix. It was: faces sideways,
// "no face in any frame", and the output lost the tag, so it played turned.
TEST_F(VideoIoTest, ARotatedStreamComesOutUprightAndIsWrittenUpright) {
  const std::string stored = dir_.File("stored.mp4");
  // 64x48 stored, white top-left quadrant.
  ASSERT_TRUE(testclips::Ffmpeg("-f lavfi -i color=c=black:s=64x48:r=10:d=0.3 -vf "
                                "drawbox=x=0:y=0:w=32:h=24:color=white:t=fill -c:v libx264 -preset ultrafast "
                                "-pix_fmt yuv444p '" + stored + "'"));
  auto plain = ProbeVideo(ReadFile(stored), "clip", kMaxPixels);
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(plain->rotation, 0);
  EXPECT_EQ(plain->width, 64);
  struct Case {
    int tag, rotation;
    cv::Rect white;  // the quadrant that is white as shown (48x64)
  };
  for (const Case& c : {Case{270, 90, cv::Rect(24, 0, 24, 32)}, Case{90, 270, cv::Rect(0, 32, 24, 32)}}) {
    SCOPED_TRACE(c.tag);
    const std::string tagged = dir_.File("tagged" + std::to_string(c.tag) + ".mp4");
    const std::string out = dir_.File("out" + std::to_string(c.tag) + ".mp4");
    ASSERT_TRUE(testclips::Ffmpeg("-i '" + stored + "' -c copy -metadata:s:v:0 rotate=" + std::to_string(c.tag) +
                                  " '" + tagged + "'"));
    auto info = ProbeVideo(ReadFile(tagged), "clip", kMaxPixels);
    ASSERT_TRUE(info.ok()) << info.status();
    EXPECT_EQ(info->rotation, c.rotation);
    EXPECT_EQ(info->width, 48);
    EXPECT_EQ(info->height, 64);
    std::vector<std::string> degradations;
    ASSERT_TRUE(Transcode(ReadFile(tagged), out, &degradations).ok());
    for (const std::string& file : {tagged, out}) {
      auto reader = VideoReader::Open(ReadFile(file), "clip", {});
      ASSERT_TRUE(reader.ok()) << reader.status();
      EXPECT_EQ((*reader)->width(), 48) << file;
      EXPECT_EQ((*reader)->height(), 64) << file;
      Item item;
      auto more = (*reader)->Next(&item);
      ASSERT_TRUE(more.ok() && *more) << file;
      ASSERT_EQ(item.frame.bgr.size(), cv::Size(48, 64)) << file;
      for (int y = 0; y < 64; y += 32) {
        for (int x = 0; x < 48; x += 24) {
          const cv::Rect q(x, y, 24, 32);
          const double mean = cv::mean(item.frame.bgr(q))[0];
          if (q == c.white) EXPECT_GT(mean, 235.0) << file << " " << q;
          else EXPECT_LT(mean, 20.0) << file << " " << q;
        }
      }
    }
    auto written = ProbeVideo(ReadFile(out), "clip", kMaxPixels);
    ASSERT_TRUE(written.ok()) << written.status();
    EXPECT_EQ(written->rotation, 0);  // written upright: no display matrix to apply twice
    EXPECT_EQ(written->width, 48);
  }
}

TEST_F(VideoIoTest, ARangeKeepsItsFramesAndStartsAtZero) {
  const std::string in = ReadFile(testclips::ZoomPanMp4(dir_.path(), kPhoto));
  const FrameRange range{.start_s = 0.5, .duration_s = 1.0};
  const Decoded part = DecodeAll(in, range);
  // Frames at k/15 s: those of [0.5, 1.5) are k = 8..22, shifted by the start (0.5 s).
  ASSERT_EQ(part.frame_times.size(), 15u);
  EXPECT_NEAR(part.frame_times.front(), 8.0 / 15 - 0.5, 1e-4);
  EXPECT_NEAR(part.frame_times.back(), 22.0 / 15 - 0.5, 1e-4);
  std::vector<std::string> degradations;
  ASSERT_TRUE(Transcode(in, dir_.File("part.mp4"), &degradations, range).ok());
  const Decoded out = DecodeAll(ReadFile(dir_.File("part.mp4")));
  ASSERT_EQ(out.frame_times.size(), 15u);
  // The MP4 muxer's edit list moves a timeline that does not start at 0 by a few ticks (0.3 ms).
  for (size_t i = 0; i < out.frame_times.size(); ++i) EXPECT_NEAR(out.frame_times[i], part.frame_times[i], 1e-3);
  EXPECT_EQ(out.audio_packets, part.audio_packets);
  EXPECT_GT(out.audio_packets.size(), 15u);
}

}  // namespace
}  // namespace fusion::video
