// The simple blend as at:: ops (BlendSimpleOnDevice, stages.h) against the OpenCV reference
// (models::BlendFace simple mode, blend.h) on real swaps: the astronaut onto Grace Hopper (one
// face) and onto the 1280x960 group photo (sample1 resized, 3 faces). The crops, transforms and
// landmarks come from the pipeline's own stages on host copies of the models.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <sstream>

#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "models/catalogue/catalogue.h"
#include "loader/model_store.h"
#include "pipeline/stages.h"
#include "host_copy.h"

namespace fusion {
namespace {

// Measured on both scenes: byte-identical (max abs difference 0; cv::PSNR 361 dB for equal
// images), since the grid reproduces warpAffine's 1/32-pixel fixed point. The tolerance allows
// one level where another device's float order rounds a .5 the other way. (Exact coordinates,
// without the fixed point, measured max 3 levels, PSNR 58.7 dB on grace.)
constexpr double kMaxDiff = 1;   // 8-bit levels
constexpr double kMinPsnr = 60;  // dB over the faces' hull bounding box

struct Scene {
  cv::Mat frame;                         // CV_8UC3 BGR target
  std::vector<models::BlendInput> faces; // the generator's output at ratio 1
};

cv::Mat ReadBgr(const std::string& path) { return cv::imread(path, cv::IMREAD_COLOR); }

Picture MakePicture(const cv::Mat& bgr, const std::string& what) {
  Picture p;
  p.what = what;
  p.bgr = bgr;
  cv::cvtColor(bgr, p.rgb, cv::COLOR_BGR2RGB);
  return p;
}


// Detect, landmarks, generate (ratio 1) of the astronaut onto `target`.
Scene Swapped(const cv::Mat& target) {
  std::vector<Picture> pics = {
      MakePicture(ReadBgr(FUSION_TEST_DATA_DIR "/faces/astronaut_eileen_collins_512.png"), "source image"),
      MakePicture(target, "target image")};
  std::vector<SwapItem> items;
  for (Picture& p : pics) {
    EXPECT_TRUE(DetectFaces(*HostCopyOf("ssd_mobilenetv1"), 0, DetectSettings{}, p).ok());
    EXPECT_TRUE(FindLandmarks(*HostCopyOf("face_landmark_68"), p).ok());
  }
  for (size_t i = 0; i < pics[1].faces.size(); ++i) items.push_back(SwapItem{.face = i});
  EXPECT_TRUE(Generate(*HostCopyOf("classical-fusion"), "cpu", pics[0], pics[1], 1.0, items).ok());
  Scene s{target.clone(), {}};
  for (const SwapItem& it : items) {
    std::vector<cv::Point2f> lm;
    for (const faceapi::Point& q : pics[1].faces[it.face].landmarks) lm.emplace_back(q.x, q.y);
    s.faces.push_back({it.fused, it.target_crop, it.frame_to_crop, lm});
  }
  return s;
}

const Scene& Grace() {
  static const Scene s = Swapped(ReadBgr(FUSION_TEST_DATA_DIR "/faces/grace_hopper_512x600.jpg"));
  return s;
}

models::BlendOptions Simple() {
  models::BlendOptions o;
  o.mode = models::BlendMode::kSimple;
  o.colour_correction = false;
  return o;
}

cv::Mat OnDevice(const Scene& s, double* ms = nullptr) {
  cv::Mat frame = s.frame.clone();
  const auto start = std::chrono::steady_clock::now();
  const absl::Status st = BlendSimpleOnDevice(*HostCopyOf(kFeatherBlendModel), s.faces, Simple(), &frame);
  if (ms) *ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  EXPECT_TRUE(st.ok()) << st;
  return frame;
}

cv::Mat OnHost(const Scene& s, double* ms = nullptr) {
  cv::Mat frame = s.frame.clone();
  const auto start = std::chrono::steady_clock::now();
  for (const models::BlendInput& in : s.faces) EXPECT_TRUE(models::BlendFace(in, Simple(), &frame).ok());
  if (ms) *ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return frame;
}

cv::Mat Hulls(const Scene& s) {
  cv::Mat all = cv::Mat::zeros(s.frame.size(), CV_8U);
  for (const models::BlendInput& in : s.faces) all |= models::FaceHullMask(in.landmarks, s.frame.size());
  return all;
}

double MaxAbsDiff(const cv::Mat& a, const cv::Mat& b) {
  cv::Mat d;
  cv::absdiff(a, b, d);
  double m = 0;
  cv::minMaxLoc(d.reshape(1), nullptr, &m);
  return m;
}

// Device vs host blend: max abs difference and PSNR over the hulls' bounding box; the face
// really changed (else equality would prove nothing).
void ExpectMatchesHost(const Scene& s, const char* what) {
  double device_ms = 0, host_ms = 0;
  const cv::Mat device = OnDevice(s, &device_ms), host = OnHost(s, &host_ms);
  const cv::Rect box = cv::boundingRect(Hulls(s));
  const double max_diff = MaxAbsDiff(device, host), psnr = cv::PSNR(device(box), host(box));
  std::printf("%s (%zu faces): device vs host simple blend: max abs difference %.0f, PSNR %.2f dB over %dx%d; "
              "blend %.1f ms at:: on cpu, %.1f ms OpenCV\n",
              what, s.faces.size(), max_diff, psnr, box.width, box.height, device_ms, host_ms);
  EXPECT_LE(max_diff, kMaxDiff);
  EXPECT_GE(psnr, kMinPsnr);
  EXPECT_GT(MaxAbsDiff(device, s.frame), 30.0) << "the blend changed nothing";
}

TEST(BlendOnDevice, SimpleBlendMatchesTheOpenCvReferenceOnOneFace) {
  ASSERT_EQ(Grace().faces.size(), 1u);
  ExpectMatchesHost(Grace(), "grace 512x600");
}

TEST(BlendOnDevice, SimpleBlendMatchesTheOpenCvReferenceOnThreeFacesOf1280x960) {
  cv::Mat group;
  cv::resize(ReadBgr(FUSION_TESTDATA_DIR "/faces/sample1.jpg"), group, cv::Size(1280, 960), 0, 0, cv::INTER_AREA);
  const Scene s = Swapped(group);
  ASSERT_EQ(s.faces.size(), 3u);
  ExpectMatchesHost(s, "sample1 1280x960");
}

TEST(BlendOnDevice, UnchangedCropLeavesTheFrameByteIdentical) {
  Scene s = Grace();
  for (models::BlendInput& in : s.faces) in.fused_crop = in.target_crop.clone();  // ratio 0
  EXPECT_EQ(MaxAbsDiff(OnDevice(s), s.frame), 0.0);
}

TEST(BlendOnDevice, EveryPixelOutsideTheHullKeepsItsBytes) {
  const cv::Mat out = OnDevice(Grace());
  cv::Mat diff;
  cv::absdiff(out, Grace().frame, diff);
  cv::cvtColor(diff, diff, cv::COLOR_BGR2GRAY);
  const cv::Mat outside = Hulls(Grace()) == 0;
  EXPECT_EQ(cv::countNonZero(diff & outside), 0);
  EXPECT_GT(cv::countNonZero(diff), 10'000);  // inside, the face changed
}

TEST(BlendOnDevice, BadInputsAreInvalidArgumentNamingBlendAndTheInput) {
  auto expect_invalid = [](const Scene& s, const std::string& names, const ModelCopy& copy) {
    cv::Mat frame = s.frame.clone();
    const absl::Status st = BlendSimpleOnDevice(copy, s.faces, Simple(), &frame);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
    EXPECT_NE(st.message().find("blend"), std::string::npos) << st;
    EXPECT_NE(st.message().find(names), std::string::npos) << st;
    EXPECT_EQ(MaxAbsDiff(frame, s.frame), 0.0) << "a failed blend wrote the frame";
  };
  const std::shared_ptr<const ModelCopy> copy = HostCopyOf(kFeatherBlendModel);
  const ModelCopy& blender = *copy;
  Scene bytes = Grace();
  bytes.faces[0].fused_crop.convertTo(bytes.faces[0].fused_crop, CV_8UC3, 255.0);
  expect_invalid(bytes, "fused_crop", blender);
  Scene size = Grace();
  cv::resize(size.faces[0].fused_crop, size.faces[0].fused_crop, cv::Size(128, 128));
  expect_invalid(size, "sizes 128x128/256x256", blender);
  Scene landmarks = Grace();
  landmarks.faces[0].landmarks.pop_back();
  expect_invalid(landmarks, "need 68 landmarks, got 67 (face 0)", blender);
  expect_invalid(Grace(), "not a blender", *HostCopyOf("face_landmark_68"));
  cv::Mat frame = Grace().frame.clone();
  models::BlendOptions full;  // kFull: Poisson is host code
  EXPECT_EQ(BlendSimpleOnDevice(blender, Grace().faces, full, &frame).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace fusion
