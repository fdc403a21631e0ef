// A video job's chunks: SegmentStore (commit, resume scan) and JoinSegments (segments + the
// target's audio remuxed) on clips made by the test with the ffmpeg CLI. No LibTorch.
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "decode_all.h"
#include "test_clips.h"
#include "temp_dir.h"
#include "video/av_input.h"
#include "video/mp4_writer.h"
#include "video/segment_join.h"
#include "video/segment_store.h"
#include "video/video_probe.h"
#include "video/video_reader.h"

namespace fusion::video {
namespace {

using testclips::ReadFile;

const std::string kPhoto = std::string(FUSION_TEST_DATA_DIR) + "/faces/grace_hopper_512x600.jpg";

// Encodes every frame of `bytes` in chunks of `chunk` frames (one encoder and segment each,
// committed to a SegmentStore in `dir`), then joins them with the clip's audio into `out`.
absl::Status ChunkAndJoin(const std::string& bytes, const std::string& dir, size_t chunk, const std::string& out) {
  auto store = SegmentStore::Open(dir);
  if (!store.ok()) return store.status();
  auto reader = VideoReader::Open(bytes, "clip", {});
  if (!reader.ok()) return reader.status();
  std::unique_ptr<Mp4Writer> writer;
  SegmentCounts counts;
  auto commit = [&] {
    absl::Status st = writer->Finish();
    writer.reset();
    if (st.ok()) st = store->Commit(counts);
    counts = SegmentCounts();
    return st;
  };
  Item item;
  for (;;) {
    auto more = (*reader)->Next(&item);
    if (!more.ok()) return more.status();
    if (!*more) break;
    if (item.kind != Item::Kind::kFrame) continue;
    if (writer == nullptr) {
      auto w = Mp4Writer::CreateVideoOnly(**reader, store->TempPath(store->committed().size()),
                                          EncodeOptions{.preset = "ultrafast"});
      if (!w.ok()) return w.status();
      writer = *std::move(w);
    }
    if (absl::Status st = writer->WriteFrame(item.frame); !st.ok()) return st;
    if (++counts.frames == chunk) {
      if (absl::Status st = commit(); !st.ok()) return st;
    }
  }
  if (writer != nullptr) {
    if (absl::Status st = commit(); !st.ok()) return st;
  }
  auto packets = VideoReader::Open(bytes, "clip", {.decode_video = false});
  if (!packets.ok()) return packets.status();
  std::vector<std::string> degradations;
  absl::Status st = JoinSegments(store->Paths(), **packets, out, &degradations);
  if (st.ok() && !degradations.empty()) return absl::InternalError(degradations[0]);
  return st;
}

class SegmentTest : public ::testing::Test {
 protected:
  // Chunks of 7 frames (the last one shorter) joined: the input's frames, timestamps and
  // audio packets exactly.
  void ExpectJoinedEqualsInput(const std::string& clip) {
    ASSERT_FALSE(clip.empty());
    const std::string in = ReadFile(clip), out = dir_.File("joined.mp4");
    absl::Status st = ChunkAndJoin(in, dir_.File("parts"), 7, out);
    ASSERT_TRUE(st.ok()) << st;
    const Decoded a = DecodeAll(in), b = DecodeAll(ReadFile(out));
    ASSERT_EQ(a.frame_times.size(), 30u);
    ASSERT_EQ(b.frame_times.size(), a.frame_times.size());
    for (size_t i = 0; i < a.frame_times.size(); ++i) EXPECT_NEAR(b.frame_times[i], a.frame_times[i], 1e-4) << i;
    ASSERT_GT(a.audio_packets.size(), 50u);
    EXPECT_EQ(b.audio_packets, a.audio_packets);
    auto probe = ProbeVideo(ReadFile(out), "result", 100'000'000);
    ASSERT_TRUE(probe.ok()) << probe.status();
    EXPECT_EQ(probe->codec, "h264");
    EXPECT_EQ(probe->frames, 30);
    // 15 fps (WebM's ms timestamps: 0, 67, 133, ... average 15.002).
    EXPECT_NEAR(probe->fps, 15.0, 0.01);
    EXPECT_NEAR(probe->duration_s, 2.0, 1.0 / 15 + 1e-6);  // within one frame
  }
  testing::TempDir dir_;
};

TEST_F(SegmentTest, Mp4ChunksJoinedKeepFramesTimestampsAndAacBytes) {
  ExpectJoinedEqualsInput(testclips::ZoomPanMp4(dir_.path(), kPhoto));
}

TEST_F(SegmentTest, WebmChunksJoinedKeepFramesTimestampsAndOpusBytes) {  // 1/1000 time base
  ExpectJoinedEqualsInput(testclips::ZoomPanWebm(dir_.path(), kPhoto));
}

// The pts (stream time base units) of every frame of `bytes`, and that time base.
std::vector<int64_t> FramePts(const std::string& bytes, AVRational* tb, int64_t* last_duration = nullptr) {
  std::vector<int64_t> pts;
  auto reader = VideoReader::Open(bytes, "clip", {});
  EXPECT_TRUE(reader.ok()) << reader.status();
  if (!reader.ok()) return pts;
  *tb = (*reader)->demuxer().video()->time_base;
  Item item;
  for (;;) {
    auto more = (*reader)->Next(&item);
    EXPECT_TRUE(more.ok()) << more.status();
    if (!more.ok() || !*more) break;
    if (item.kind != Item::Kind::kFrame) continue;
    pts.push_back(item.frame.pts);
    if (last_duration != nullptr) *last_duration = item.frame.duration;
  }
  return pts;
}

TEST_F(SegmentTest, VariableFrameRateKeepsEveryPtsAndTheTimeBase) {
  // 10 frames at 0, .08, .2, .28, .4, .48, .88, 1.28, 1.68, 2.08 s in a 1/1000 MP4 track (the MP4
  // muxer's default would make it 1/16000: a timescale under 10000 is doubled until it is not).
  const std::string cfr = dir_.File("cfr.mp4"), vfr = dir_.File("vfr.mp4");
  ASSERT_TRUE(testclips::Ffmpeg(absl::StrCat("-loop 1 -i ", kPhoto,
                                             " -vf scale=160:188,format=yuv420p -frames:v 10 -r 25 -c:v libx264 ", cfr)));
  ASSERT_TRUE(testclips::Ffmpeg(absl::StrCat(
      "-i ", cfr,
      " -vf \"setpts='if(eq(N,0),0,if(eq(N,1),0.08,if(eq(N,2),0.2,if(eq(N,3),0.28,if(eq(N,4),0.4,if(eq(N,5),0.48,"
      "if(eq(N,6),0.88,if(eq(N,7),1.28,if(eq(N,8),1.68,2.08)))))))))/TB'\" -fps_mode passthrough "
      "-video_track_timescale 1000 -c:v libx264 ",
      vfr)));
  const std::string out = dir_.File("joined.mp4");
  absl::Status st = ChunkAndJoin(ReadFile(vfr), dir_.File("parts"), 4, out);
  ASSERT_TRUE(st.ok()) << st;
  AVRational in_tb{0, 1}, out_tb{0, 1};
  int64_t in_last = 0, out_last = 0;  // the last frame's duration (the track's end)
  const std::vector<int64_t> in = FramePts(ReadFile(vfr), &in_tb, &in_last);
  const std::vector<int64_t> got = FramePts(ReadFile(out), &out_tb, &out_last);
  EXPECT_EQ(in_last, 40);
  EXPECT_EQ(out_last, in_last);
  EXPECT_EQ(in, (std::vector<int64_t>{0, 80, 200, 280, 400, 480, 880, 1280, 1680, 2080}));
  EXPECT_EQ(got, in);
  EXPECT_EQ(in_tb.num, 1);
  EXPECT_EQ(in_tb.den, 1000);
  EXPECT_EQ(out_tb.num, 1);
  EXPECT_EQ(out_tb.den, 1000);
}

TEST_F(SegmentTest, OpenKeepsTheCommittedChunksBeforeTheFirstGapAndRemovesTheRest) {
  const std::string dir = dir_.File("parts");
  {
    auto store = SegmentStore::Open(dir);
    ASSERT_TRUE(store.ok()) << store.status();
    for (uint64_t frames : {8, 8}) {
      std::ofstream(store->TempPath(store->committed().size())) << "segment";
      // The tracking state is opaque bytes (any byte value, NUL included).
      ASSERT_TRUE(store->Commit({.frames = frames, .frames_swapped = 6, .frames_without_face = 2,
                                 .faces_swapped = 7, .identity_distances = {0.25f, 0.5f},
                                 .tracker_state = std::string("\0\xff state", 8) + std::to_string(frames)})
                      .ok());
    }
    std::ofstream(store->TempPath(2)) << "a chunk in flight at the crash";
  }
  // A chunk after a gap (3 without 2) and a counts file whose segment was never renamed.
  std::ofstream(dir + "/000003.mp4") << "x";
  std::ofstream(dir + "/000003.json") << R"({"frames": 8})";
  std::ofstream(dir + "/000002.json") << R"({"frames": 8, "frames_swapped": 8, "frames_without_face": 0,
                                              "faces_swapped": 8, "identity_distances": []})";
  auto store = SegmentStore::Open(dir);
  ASSERT_TRUE(store.ok()) << store.status();
  ASSERT_EQ(store->committed().size(), 2u);
  EXPECT_EQ(store->frames_committed(), 16u);
  EXPECT_EQ(store->committed()[1].faces_swapped, 7u);
  EXPECT_EQ(store->committed()[1].identity_distances, (std::vector<float>{0.25f, 0.5f}));
  EXPECT_EQ(store->committed()[1].tracker_state, std::string("\0\xff state8", 9));
  EXPECT_EQ(store->Paths(), (std::vector<std::string>{dir + "/000000.mp4", dir + "/000001.mp4"}));
  std::vector<std::string> left;
  for (const auto& e : std::filesystem::directory_iterator(dir)) left.push_back(e.path().filename().string());
  std::sort(left.begin(), left.end());
  EXPECT_EQ(left, (std::vector<std::string>{"000000.json", "000000.mp4", "000001.json", "000001.mp4"}));
}

}  // namespace
}  // namespace fusion::video
