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

}  // namespace
}  // namespace fusion
