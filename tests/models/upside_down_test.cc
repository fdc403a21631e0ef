// The upside-down check (models/faceapi/upside_down.h) with SSD's orientation scores and the
// landmark net: every face of the group photos and the portraits, as it is and rolled by up to
// 45 degrees, stays upright; each of them turned by 180 degrees is found upside down.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>

#include <opencv2/imgproc.hpp>

#include "faceapi_fixture.h"
#include "ground_truth.h"
#include "models/faceapi/face_orientation.h"
#include "models/faceapi/multiscale.h"
#include "models/faceapi/ssd_mobilenet_v1.h"
#include "models/faceapi/upside_down.h"

namespace fusion::faceapi {
namespace {

FaceBox Turned180(const cv::Mat& rgb, const FaceBox& b) {
  return {rgb.cols - b.x - b.w, rgb.rows - b.y - b.h, b.w, b.h, b.score};
}

// The cue of `box` in `rgb` as the pipeline computes it (stages.cc FindLandmarks).
UpsideDownCue CueOf(const cv::Mat& rgb, const FaceBox& box) {
  auto o = EstimateOrientations(Ssd(), rgb, {box});
  auto as_is = Landmarks().Detect(rgb, box);
  auto turned = DetectTurned180(Landmarks(), rgb, box);
  if (!o.ok() || !as_is.ok() || !turned.ok()) throw std::runtime_error("upside-down cue failed");
  return {EyeContrast(rgb, *as_is, box), EyeContrast(rgb, *turned, box), DetectorUpsideDownLogit((*o)[0])};
}

struct Face {
  std::string name;
  cv::Mat rgb;
  FaceBox box;
};

// The 21 ground-truth faces of the group photos and the three portraits (their SSD box).
std::vector<Face> AllFaces() {
  std::vector<Face> out;
  for (const Truth& t : GroupPhotos()) {
    for (size_t i = 0; i < t.faces.size(); ++i) out.push_back({t.name + " face " + std::to_string(i), t.rgb, t.faces[i]});
  }
  for (const char* file : {"grace_hopper_512x600.jpg", "astronaut_eileen_collins_512.png", "cameraman_profile_512_gray.png"}) {
    const cv::Mat rgb = fusion::faceapi::Face(file);
    auto boxes = DetectMultiScale(Ssd(), rgb, {});
    if (!boxes.ok() || boxes->empty()) throw std::runtime_error(std::string("no face in ") + file);
    out.push_back({std::string(file).substr(0, std::string(file).find('_')), rgb, (*boxes)[0]});
  }
  return out;
}

TEST(UpsideDown, UprightAndRolledFacesStayUprightAndTurnedOnesAreFound) {
  const std::vector<Face> faces = AllFaces();
  ASSERT_EQ(faces.size(), 24u);
  float upright_max = -1e9f, turned_min = 1e9f;
  std::string upright_worst, turned_worst;
  int rolled_turned_found = 0, rolled_turned = 0;
  std::printf("%-22s %5s | %7s %7s %7s %7s | %7s %7s %7s %7s\n", "face", "roll", "eyes", "turned", "ssd", "value",
              "eyes", "turned", "ssd", "value (180 degrees)");
  double ms = 0;
  int cues = 0;
  for (const Face& f : faces) {
    for (double roll : {0.0, -45.0, -30.0, 30.0, 45.0}) {
      cv::Mat rgb = f.rgb.clone();
      if (roll != 0) {  // about the box's centre, the box kept
        const cv::Point2f c(f.box.x + f.box.w / 2, f.box.y + f.box.h / 2);
        cv::warpAffine(f.rgb, rgb, cv::getRotationMatrix2D(c, roll, 1.0), f.rgb.size());
      }
      cv::Mat turned;
      cv::rotate(rgb, turned, cv::ROTATE_180);
      const auto start = std::chrono::steady_clock::now();
      const UpsideDownCue a = CueOf(rgb, f.box);
      ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
      ++cues;
      const UpsideDownCue b = CueOf(turned, Turned180(rgb, f.box));
      std::printf("%-22s %5.0f | %7.2f %7.2f %7.2f %7.2f | %7.2f %7.2f %7.2f %7.2f%s\n", f.name.c_str(), roll, a.eyes_as_is,
                  a.eyes_turned, a.detector_logit, a.value(), b.eyes_as_is, b.eyes_turned, b.detector_logit, b.value(),
                  b.upside_down() ? " upside down" : "");
      EXPECT_FALSE(a.upside_down()) << f.name << " rolled by " << roll << ": " << a.value();
      if (a.value() > upright_max) upright_max = a.value(), upright_worst = f.name + " roll " + std::to_string(roll);
      if (roll == 0) {
        EXPECT_TRUE(b.upside_down()) << f.name << " turned by 180 degrees: " << b.value();
        if (b.value() < turned_min) turned_min = b.value(), turned_worst = f.name;
      } else {
        ++rolled_turned;
        rolled_turned_found += b.upside_down();
      }
    }
  }
  std::printf("upright and rolled: at most %.2f (%s); turned by 180 degrees: at least %.2f (%s); threshold %.2f\n",
              upright_max, upright_worst.c_str(), turned_min, turned_worst.c_str(), kUpsideDownThreshold);
  std::printf("rolled by 30-45 degrees and turned by 180: %d of %d found upside down\n", rolled_turned_found,
              rolled_turned);
  std::printf("one cue (orientation pass of one face, two landmark forwards): %.1f ms\n", ms / cues);
}

// The points found on the face turned (DetectTurned180) are the points of the upright face,
// turned: Grace turned by 180 degrees gets her upright landmarks back, within a pixel.
TEST(UpsideDown, DetectTurned180GivesTheUprightFacesPoints) {
  const cv::Mat rgb = fusion::faceapi::Face("grace_hopper_512x600.jpg");
  const FaceBox box = GoldenBox("grace_hopper.jpg");
  auto upright = Landmarks().Detect(rgb, box);
  ASSERT_TRUE(upright.ok()) << upright.status();
  cv::Mat turned;
  cv::rotate(rgb, turned, cv::ROTATE_180);
  auto righted = DetectTurned180(Landmarks(), turned, Turned180(rgb, box));
  ASSERT_TRUE(righted.ok()) << righted.status();
  auto garbled = Landmarks().Detect(turned, Turned180(rgb, box));
  ASSERT_TRUE(garbled.ok()) << garbled.status();
  double worst = 0, garbled_mean = 0;
  for (int i = 0; i < 68; ++i) {
    const Point want{rgb.cols - (*upright)[i].x, rgb.rows - (*upright)[i].y};  // continuous coordinates
    worst = std::max({worst, std::abs(double{(*righted)[i].x} - want.x), std::abs(double{(*righted)[i].y} - want.y)});
    garbled_mean += std::hypot((*garbled)[i].x - want.x, (*garbled)[i].y - want.y) / 68;
  }
  std::printf("righted: worst point %.2f px from the upright face's; as it is: %.1f px on average\n", worst, garbled_mean);
  EXPECT_LT(worst, 1.0);        // the crop's rounding of the box
  EXPECT_GT(garbled_mean, 20.0);  // the bug: an upright face's shape on the upside-down head
}

}  // namespace
}  // namespace fusion::faceapi
