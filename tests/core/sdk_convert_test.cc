// The SDK's conversions to and from fusion.v1 (sdk/src/convert.h): the video options and report.
#include "convert.h"

#include <gtest/gtest.h>

namespace fusion {
namespace {

TEST(SdkConvert, VideoOptionsReachJobOptions) {
  const v1::JobOptions defaults = internal::ToProto(SwapOptions{});
  EXPECT_EQ(defaults.video_detect(), v1::VIDEO_DETECT_TRACK);
  EXPECT_EQ(defaults.keyframe_interval(), 0u);
  EXPECT_EQ(defaults.video_crf(), 0u);

  const v1::JobOptions p = internal::ToProto({.start_seconds = 1.5, .duration_seconds = 2, .video_crf = 23,
                                              .video_preset = "fast", .video_detect = VideoDetect::kEveryFrame,
                                              .keyframe_interval = 25});
  EXPECT_EQ(p.start_seconds(), 1.5);
  EXPECT_EQ(p.duration_seconds(), 2);
  EXPECT_EQ(p.video_crf(), 23u);
  EXPECT_EQ(p.video_preset(), "fast");
  EXPECT_EQ(p.video_detect(), v1::VIDEO_DETECT_EVERY_FRAME);
  EXPECT_EQ(p.keyframe_interval(), 25u);
  EXPECT_EQ(internal::ToProto({.video_detect = VideoDetect::kTrack}).video_detect(), v1::VIDEO_DETECT_TRACK);
}

TEST(SdkConvert, VideoReportFieldsComeFromJobResult) {
  v1::JobResult p;
  p.set_kind(v1::VIDEO);
  p.set_frames_total(90);
  p.set_frames_resumed(30);
  p.set_chunk_frames(30);
  p.set_identity_distance_median(0.31);
  p.set_identity_distance_worst(0.52);
  p.set_keyframes(11);
  p.set_frames_tracked(79);
  p.set_tracks(2);
  p.set_flicker_ratio(0.85);
  const JobResult r = internal::FromProto(p);
  EXPECT_EQ(r.kind, JobKind::kVideo);
  EXPECT_EQ(r.frames_total, 90u);
  EXPECT_EQ(r.frames_resumed, 30u);
  EXPECT_EQ(r.chunk_frames, 30u);
  EXPECT_DOUBLE_EQ(r.identity_distance_median, 0.31);
  EXPECT_DOUBLE_EQ(r.identity_distance_worst, 0.52);
  EXPECT_EQ(r.keyframes, 11u);
  EXPECT_EQ(r.frames_tracked, 79u);
  EXPECT_EQ(r.tracks, 2u);
  EXPECT_DOUBLE_EQ(r.flicker_ratio, 0.85);
  const JobResult none = internal::FromProto(v1::JobResult());
  EXPECT_EQ(none.keyframes + none.frames_tracked + none.tracks, 0u);
  EXPECT_EQ(none.flicker_ratio, 0);
}

// Keep-alive (docs/MEMORY.md#keep-alive): absent fields stay
// nullopt (forever / pinned; no countdown), present ones keep their seconds.
TEST(SdkConvert, KeepAliveFieldsAreOptional) {
  v1::MemoryState p;
  v1::ModelInfo* counting = p.add_models();
  counting->set_name("a");
  counting->set_keep_alive_seconds(300);
  counting->set_expires_in_seconds(12.5);
  p.add_models()->set_name("pinned");
  p.mutable_counters()->set_expirations(3);
  const MemoryState s = internal::FromProto(p);
  ASSERT_EQ(s.models.size(), 2u);
  EXPECT_EQ(s.models[0].keep_alive_seconds, 300.0);
  EXPECT_EQ(s.models[0].expires_in_seconds, 12.5);
  EXPECT_FALSE(s.models[1].keep_alive_seconds.has_value());
  EXPECT_FALSE(s.models[1].expires_in_seconds.has_value());
  EXPECT_EQ(s.counters.expirations, 3u);
}

}  // namespace
}  // namespace fusion
