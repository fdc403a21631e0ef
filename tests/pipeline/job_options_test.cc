// SubmitJob's checks of JobOptions (pipeline/job_options.h): the video options.
#include "pipeline/job_options.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "models/catalogue/catalogue.h"

namespace fusion {
namespace {

const models::ModelCatalogue& Catalogue() {
  static const auto* catalogue = [] {
    auto c = models::ModelCatalogue::Create({.manifest = FUSION_SOURCE_MANIFEST, .models_dir = "/nonexistent"});
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? c->release() : nullptr;
  }();
  return *catalogue;
}

absl::Status Validate(const v1::JobOptions& o) { return ValidateJobOptions(o, Catalogue()); }

TEST(JobOptions, DefaultsAreValid) { EXPECT_TRUE(Validate(v1::JobOptions()).ok()); }

TEST(JobOptions, VideoCrfAndPresetOutOfRangeAreInvalidArgumentNamingTheOption) {
  v1::JobOptions o;
  o.set_video_crf(52);
  EXPECT_EQ(Validate(o), absl::InvalidArgumentError("options: video_crf 52 is not in [1,51] (0 = 18)"));
  o.set_video_crf(51);
  o.set_video_preset("placebo");
  const absl::Status st = Validate(o);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("video_preset 'placebo'"), std::string::npos) << st;
}

TEST(JobOptions, KeyframeIntervalIsZeroOrOneTo300) {
  v1::JobOptions o;
  for (uint32_t n : {0u, 1u, 10u, 300u}) {
    o.set_keyframe_interval(n);
    EXPECT_TRUE(Validate(o).ok()) << n;
  }
  for (uint32_t n : {301u, 100000u, 4294967295u}) {
    o.set_keyframe_interval(n);
    EXPECT_EQ(Validate(o), absl::InvalidArgumentError(absl::StrCat("options: keyframe_interval ", n,
                                                                   " is not in [1,300] (0 = 15)")));
  }
}

TEST(JobOptions, VideoDetectIsOneOfTheEnumsValues) {
  v1::JobOptions o;
  for (v1::VideoDetect d : {v1::VIDEO_DETECT_UNSPECIFIED, v1::VIDEO_DETECT_TRACK, v1::VIDEO_DETECT_EVERY_FRAME}) {
    o.set_video_detect(d);
    EXPECT_TRUE(Validate(o).ok()) << v1::VideoDetect_Name(d);
  }
  // proto3 keeps a number it does not know (a newer client's, or a hostile one): refused.
  for (int unknown : {3, 7, -1}) {
    v1::JobOptions wire;
    wire.set_video_detect(static_cast<v1::VideoDetect>(unknown));
    v1::JobOptions parsed;
    ASSERT_TRUE(parsed.ParseFromString(wire.SerializeAsString()));
    EXPECT_EQ(static_cast<int>(parsed.video_detect()), unknown);
    const absl::Status st = Validate(parsed);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << unknown;
    EXPECT_NE(st.message().find(absl::StrCat("options: video_detect ", unknown, " ")), std::string::npos) << st;
  }
}

}  // namespace
}  // namespace fusion
