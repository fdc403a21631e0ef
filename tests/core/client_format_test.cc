// fusionctl's JSON of a job report (client/format.h): a video job's figures.
#include "format.h"

#include <gtest/gtest.h>

namespace fusion::ctl {
namespace {

TEST(FusionctlFormat, VideoReportHasTheTrackingFigures) {
  JobResult r;
  r.job_id = "j1";
  r.state = JobState::kSucceeded;
  r.kind = JobKind::kVideo;
  r.frames_total = 90;
  r.frames_resumed = 30;
  r.chunk_frames = 30;
  r.keyframes = 11;
  r.frames_tracked = 79;
  r.tracks = 2;
  r.flicker_ratio = 0.85;
  const nlohmann::json j = JobResultToJson(r);
  EXPECT_EQ(j["kind"], "video");
  EXPECT_EQ(j["frames_total"], 90);
  EXPECT_EQ(j["frames_resumed"], 30);
  EXPECT_EQ(j["keyframes"], 11);
  EXPECT_EQ(j["frames_tracked"], 79);
  EXPECT_EQ(j["tracks"], 2);
  EXPECT_DOUBLE_EQ(j["flicker_ratio"].get<double>(), 0.85);
  EXPECT_TRUE(j["keyframes"].is_number_unsigned());
  EXPECT_TRUE(j["flicker_ratio"].is_number_float());
}

TEST(FusionctlFormat, AnImageReportHasNoVideoFigures) {
  JobResult r;
  r.kind = JobKind::kImage;
  const nlohmann::json j = JobResultToJson(r);
  for (const char* key : {"frames_total", "frames_resumed", "keyframes", "frames_tracked", "tracks", "flicker_ratio"}) {
    EXPECT_FALSE(j.contains(key)) << key;
  }
}

}  // namespace
}  // namespace fusion::ctl
