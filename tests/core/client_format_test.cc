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

// `fusionctl mem`: a model counting down shows its time to expiry (text and JSON); a pinned or
// forever one has nulls and no "expires in".
TEST(FusionctlFormat, MemShowsEachModelsTimeToExpiry) {
  MemoryState state;
  ModelStatus counting;
  counting.name = "face_recognition";
  counting.tier = "device";
  counting.keep_alive_seconds = 300;
  counting.expires_in_seconds = 41.6;
  ModelStatus pinned;
  pinned.name = "esrgan-slim-x2";
  pinned.pinned = true;
  state.models = {counting, pinned};
  state.counters.expirations = 2;
  const nlohmann::json j = MemoryStateToJson(state);
  EXPECT_DOUBLE_EQ(j["models"][0]["keep_alive_seconds"].get<double>(), 300);
  EXPECT_DOUBLE_EQ(j["models"][0]["expires_in_seconds"].get<double>(), 41.6);
  EXPECT_TRUE(j["models"][1]["keep_alive_seconds"].is_null());
  EXPECT_TRUE(j["models"][1]["expires_in_seconds"].is_null());
  EXPECT_EQ(j["counters"]["expirations"], 2);
  const std::string text = MemoryStateToText(state);
  EXPECT_NE(text.find("face_recognition    device  0 B  leases 0  expires in 42s\n"), std::string::npos) << text;
  EXPECT_NE(text.find("evictions 0 (keep-alive 2)"), std::string::npos) << text;
  EXPECT_EQ(text.find("expires in", text.find("esrgan-slim-x2")), std::string::npos) << text;
  EXPECT_TRUE(ModelToJson(pinned)["expires_in_seconds"].is_null());
  EXPECT_NE(ModelToText(counting).find("expires in 42s"), std::string::npos);
}

}  // namespace
}  // namespace fusion::ctl
