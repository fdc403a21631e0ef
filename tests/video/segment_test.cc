// A video job's chunks: SegmentStore (commit, resume scan) and JoinSegments (segments + the
// target's audio remuxed) on clips made by the test with the ffmpeg CLI. No LibTorch.
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "decode_all.h"
#include "test_clips.h"
#include "temp_dir.h"
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

TEST_F(SegmentTest, OpenKeepsTheCommittedChunksBeforeTheFirstGapAndRemovesTheRest) {
  const std::string dir = dir_.File("parts");
  {
    auto store = SegmentStore::Open(dir);
    ASSERT_TRUE(store.ok()) << store.status();
    for (uint64_t frames : {8, 8}) {
      std::ofstream(store->TempPath(store->committed().size())) << "segment";
      ASSERT_TRUE(store->Commit({.frames = frames, .frames_swapped = 6, .frames_without_face = 2,
                                 .faces_swapped = 7, .identity_distances = {0.25f, 0.5f}})
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
  EXPECT_EQ(store->Paths(), (std::vector<std::string>{dir + "/000000.mp4", dir + "/000001.mp4"}));
  std::vector<std::string> left;
  for (const auto& e : std::filesystem::directory_iterator(dir)) left.push_back(e.path().filename().string());
  std::sort(left.begin(), left.end());
  EXPECT_EQ(left, (std::vector<std::string>{"000000.json", "000000.mp4", "000001.json", "000001.mp4"}));
}

}  // namespace
}  // namespace fusion::video
