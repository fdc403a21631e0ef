// Detection through the job path (PipelineRunner::Swap): the full-resolution pyramid finds
// every ground-truth face of the six group photos (tests/data/faces/ground_truth.json, IoU >= 0.4)
// and swaps nothing else; the detect options are validated, and max_side no longer changes
// which faces are found.
#include <gtest/gtest.h>

#include <fstream>

#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "nlohmann/json.hpp"
#include "pipeline/pipeline_runner.h"
#include "pipeline_env.h"

namespace fusion {
namespace {

struct Box {
  float x, y, w, h;
};

float IoU(const Box& a, const Box& b) {
  const float ix = std::max(0.f, std::min(a.x + a.w, b.x + b.w) - std::max(a.x, b.x));
  const float iy = std::max(0.f, std::min(a.y + a.h, b.y + b.h) - std::max(a.y, b.y));
  const float u = a.w * a.h + b.w * b.h - ix * iy;
  return u > 0 ? ix * iy / u : 0;
}

std::vector<Box> Truth(int sample, const char* list) {
  std::ifstream in(FUSION_TEST_DATA_DIR "/faces/ground_truth.json");
  const nlohmann::json gt = nlohmann::json::parse(in);
  std::vector<Box> out;
  for (const auto& b : gt["images"]["faceapi_group_sample" + std::to_string(sample) + ".jpg"][list]) {
    out.push_back({b[0].get<float>(), b[1].get<float>(), b[2].get<float>(), b[3].get<float>()});
  }
  return out;
}

// Faces of the report matched to the truth; unmatched boxes outside the ignore regions are false.
void Count(const v1::JobResult& r, int sample, int* found, int* false_boxes) {
  const std::vector<Box> faces = Truth(sample, "faces"), ignore = Truth(sample, "ignore");
  std::vector<bool> hit(faces.size());
  for (const v1::FaceReport& f : r.faces()) {
    const Box d{f.box(0), f.box(1), f.box(2), f.box(3)};
    bool matched = false, ignored = false;
    for (size_t k = 0; k < faces.size(); ++k) {
      if (IoU(d, faces[k]) >= 0.4f) matched = hit[k] = true;
    }
    for (const Box& q : ignore) {
      const float ix = std::max(0.f, std::min(d.x + d.w, q.x + q.w) - std::max(d.x, q.x));
      const float iy = std::max(0.f, std::min(d.y + d.h, q.y + q.h) - std::max(d.y, q.y));
      ignored |= ix * iy >= 0.5f * d.w * d.h;
    }
    *false_boxes += !matched && !ignored;
  }
  for (bool h : hit) *found += h;
}

class GroupPhotoJob : public ::testing::TestWithParam<int> {};

TEST_P(GroupPhotoJob, SwapsEveryGroundTruthFaceAndNothingElse) {
  const int sample = GetParam();
  v1::JobOptions o = Ratio(1);
  o.set_simple(true);
  o.set_enhance_scale(0);
  auto out = Swap(o, ReadFile(FUSION_TESTDATA_DIR "/faces/sample" + std::to_string(sample) + ".jpg"));
  ASSERT_TRUE(out.ok()) << out.status();
  int found = 0, false_boxes = 0;
  Count(out->report, sample, &found, &false_boxes);
  const v1::StageReport* detect = StageOf(out->report, "detect");
  std::printf("job path sample%d: %d of %zu faces, %d false boxes; detect %.0f ms, peak %llu bytes\n", sample, found,
              Truth(sample, "faces").size(), false_boxes, detect->ms(),
              static_cast<unsigned long long>(detect->peak_bytes()));
  EXPECT_EQ(found, static_cast<int>(Truth(sample, "faces").size()));
  EXPECT_EQ(false_boxes, 0);
}

INSTANTIATE_TEST_SUITE_P(Samples, GroupPhotoJob, ::testing::Values(1, 2, 3, 4, 5, 6));

TEST(DetectOptions, OutOfRangeValuesAreInvalidArgumentNamingTheOption) {
  struct Case {
    uint32_t px;
    float score;
    const char* name;
  };
  for (const Case c : {Case{4, 0, "min_face_px"}, Case{200000, 0, "min_face_px"}, Case{0, 1.0f, "min_face_score"},
                       Case{0, -0.1f, "min_face_score"}, Case{0, std::nanf(""), "min_face_score"}}) {
    v1::JobOptions o = Ratio(1);
    o.set_min_face_px(c.px);
    o.set_min_face_score(c.score);
    const absl::Status st = E().runner->StageModels(o).status();
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << c.name;
    EXPECT_NE(st.message().find(c.name), std::string::npos) << st;
  }
  v1::JobOptions ok = Ratio(1);
  ok.set_min_face_px(13);
  ok.set_min_face_score(0.7f);
  EXPECT_TRUE(E().runner->StageModels(ok).ok());
  // max_side is clamped to 416..1024, whatever it is (the README's word; 63 was refused).
  for (uint32_t side : {1u, 63u, 20000u}) {
    ok.set_max_side(side);
    EXPECT_TRUE(E().runner->StageModels(ok).ok()) << side;
  }
}

// max_side is a memory lever now: a 416-px pass cap gives the same faces as the default 1024.
TEST(DetectOptions, MaxSideCapsThePassInputButNotTheFacesFound) {
  v1::JobOptions o = Ratio(1);
  o.set_simple(true);
  o.set_enhance_scale(0);
  auto wide = Swap(o, ReadFile(FUSION_TESTDATA_DIR "/faces/sample1.jpg"));
  o.set_max_side(416);
  auto narrow = Swap(o, ReadFile(FUSION_TESTDATA_DIR "/faces/sample1.jpg"));
  ASSERT_TRUE(wide.ok()) << wide.status();
  ASSERT_TRUE(narrow.ok()) << narrow.status();
  int found_wide = 0, found_narrow = 0, false_wide = 0, false_narrow = 0;
  Count(wide->report, 1, &found_wide, &false_wide);
  Count(narrow->report, 1, &found_narrow, &false_narrow);
  EXPECT_EQ(found_wide, 3);
  EXPECT_EQ(found_narrow, 3);
  EXPECT_EQ(false_narrow, 0);
}

// Detection is most of a large job: its progress moves with the scan passes (it sat at 5% for
// the whole stage), from the detect stage's 5% towards the landmarks stage's 15%.
TEST(DetectProgress, EveryScanPassIsReportedWithRisingProgress) {
  Recorder rec;
  v1::JobOptions o = Ratio(1);
  o.set_simple(true);
  auto out = Swap(o, Grace(), &rec);
  ASSERT_TRUE(out.ok()) << out.status();
  std::vector<float> target;
  int source_passes = 0;
  for (size_t i = 0; i < rec.started.size(); ++i) {
    const std::string& s = rec.started[i];
    if (s.rfind("detect (source image: pass ", 0) == 0) ++source_passes;
    if (s.rfind("detect (target image: pass ", 0) != 0) continue;
    std::printf("%s at %.3f\n", s.c_str(), rec.progress[i]);
    target.push_back(rec.progress[i]);
  }
  EXPECT_GE(source_passes, 1);
  ASSERT_GE(target.size(), 2u);
  EXPECT_GE(target.front(), 0.05f);
  EXPECT_LT(target.back(), 0.15f);
  // Never lower (the pass count grows when the gated levels add their windows), and it moves.
  for (size_t i = 1; i < target.size(); ++i) EXPECT_GE(target[i], target[i - 1]);
  EXPECT_GT(target.back(), target.front());
}

// A photo stored sideways (new-user trial): SSD finds Grace turned 90 degrees clockwise at 0.9
// and an upright face used to be pasted across her sideways head (SUCCEEDED). The orientation
// check refuses it, naming the face and the turn.
TEST(TurnedFaces, ASidewaysOnlyFaceFailsNamingTheTurn) {
  cv::Mat turned;
  cv::rotate(Decode(Grace(), cv::IMREAD_COLOR), turned, cv::ROTATE_90_CLOCKWISE);
  v1::JobOptions o = Ratio(1);
  o.set_simple(true);
  auto out = Swap(o, Png(turned));
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kFailedPrecondition) << out.status();
  EXPECT_NE(out.status().message().find("no upright face in the target image"), std::string::npos) << out.status();
  EXPECT_NE(out.status().message().find("is turned sideways"), std::string::npos) << out.status();
  ExpectAtRest();
}

// Beside an upright copy, the turned face is left alone and named in the degradations; the
// upright one is swapped.
TEST(TurnedFaces, ATurnedFaceBesideAnUprightOneIsNotSwappedAndIsNamed) {
  const cv::Mat grace = Decode(Grace(), cv::IMREAD_COLOR);  // 512 x 600
  cv::Mat turned, both(grace.rows, grace.cols + grace.rows, CV_8UC3, cv::Scalar::all(0));
  cv::rotate(grace, turned, cv::ROTATE_90_CLOCKWISE);  // 600 x 512 (SSD finds her turned clockwise)
  grace.copyTo(both(cv::Rect(0, 0, grace.cols, grace.rows)));
  turned.copyTo(both(cv::Rect(grace.cols, 0, turned.cols, turned.rows)));
  v1::JobOptions o = Ratio(1);
  o.set_simple(true);
  Recorder rec;
  auto out = Swap(o, Png(both), &rec);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->report.faces_swapped(), 1u);
  ASSERT_EQ(out->report.faces_size(), 1);
  EXPECT_LT(out->report.faces(0).box(0), grace.cols);  // the upright one
  EXPECT_GT(out->report.faces(0).score(), 0.9f);        // the detector's confidence in its box
  EXPECT_LE(out->report.faces(0).score(), 1.0f);
  int named = 0;
  for (const std::string& d : out->report.degradations()) {
    std::printf("degradation: %s\n", d.c_str());
    named += d.find("is turned sideways") != std::string::npos;
  }
  EXPECT_EQ(named, 1);
  ExpectAtRest();
}

// Photos taken upside down (user trial): the source turned by 180 degrees used to be swapped
// garbled (an upright face's landmarks on the upside-down head, SUCCEEDED), the target turned
// failed "no face in the target image" (SSD finds no face in Grace turned). The upside-down
// check (faceapi/upside_down.h) rights the face's landmarks, and a picture without any face is
// scanned once more turned: the job swaps it as it swaps the upright photo (looked at).
double MeanDiff(const cv::Mat& a, const cv::Mat& b) {
  if (a.size() != b.size() || a.type() != b.type()) return 1e9;
  cv::Mat d;
  cv::absdiff(a, b, d);
  return cv::mean(d.reshape(1))[0];
}

TEST(UpsideDownFaces, AnUpsideDownSourceIsSwappedAsTheUprightOneIs) {
  v1::JobOptions o = Ratio(1);
  o.set_simple(true);
  auto upright = Swap(o);
  ASSERT_TRUE(upright.ok()) << upright.status();
  cv::Mat turned;
  cv::rotate(Decode(Astronaut(), cv::IMREAD_COLOR), turned, cv::ROTATE_180);
  Recorder rec;
  auto out = E().runner->Swap(Owner{"test", 0}, Png(turned), Grace(), o, rec);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->report.faces_swapped(), 1u);
  const cv::Mat a = Decode(upright->image, cv::IMREAD_COLOR), b = Decode(out->image, cv::IMREAD_COLOR);
  const cv::Mat grace = Decode(Grace(), cv::IMREAD_COLOR);
  const double diff = MeanDiff(a, b), change = MeanDiff(a, grace);
  std::printf("upside-down source: mean difference %.3f levels from the upright source's result (the swap "
              "changes Grace by %.3f)\n", diff, change);
  // Measured 0.60 against 2.03 (the scan's box on the turned photo differs a little, so do the
  // points); before, garbled: 2.01 against 2.03.
  EXPECT_LT(diff, 0.5 * change);
  ExpectAtRest();
}

TEST(UpsideDownFaces, AnUpsideDownTargetIsFoundAndSwappedInPlace) {
  v1::JobOptions o = Ratio(1);
  o.set_simple(true);
  auto upright = Swap(o);
  ASSERT_TRUE(upright.ok()) << upright.status();
  cv::Mat turned;
  cv::rotate(Decode(Grace(), cv::IMREAD_COLOR), turned, cv::ROTATE_180);
  auto out = Swap(o, Png(turned));
  ASSERT_TRUE(out.ok()) << out.status();  // before: FAILED_PRECONDITION no face in the target image
  EXPECT_EQ(out->report.faces_swapped(), 1u);
  ASSERT_EQ(out->report.faces_size(), 1);
  cv::Mat back;
  cv::rotate(Decode(out->image, cv::IMREAD_COLOR), back, cv::ROTATE_180);
  const cv::Mat a = Decode(upright->image, cv::IMREAD_COLOR);
  const double diff = MeanDiff(a, back), change = MeanDiff(a, Decode(Grace(), cv::IMREAD_COLOR));
  std::printf("upside-down target: turned back, mean difference %.3f levels from the upright target's result (the "
              "swap changes Grace by %.3f)\n", diff, change);
  EXPECT_LT(diff, 0.35 * change);  // measured 0.37 against 2.03
  ExpectAtRest();
}

}  // namespace
}  // namespace fusion
