// The face orientation check (models/faceapi/face_orientation.h) with SSD, the pipeline's default
// detector: upright and rolled faces stay upright, faces of a photo stored sideways are found
// turned, by the turn that rights them.
#include <gtest/gtest.h>

#include <chrono>

#include <opencv2/imgproc.hpp>

#include "faceapi_fixture.h"
#include "ground_truth.h"
#include "models/faceapi/face_orientation.h"
#include "models/faceapi/ssd_mobilenet_v1.h"

namespace fusion::faceapi {
namespace {

// `rgb` and `box` turned by cv::rotate's `code`.
std::pair<cv::Mat, FaceBox> Turn(const cv::Mat& rgb, const FaceBox& b, int code) {
  cv::Mat out;
  cv::rotate(rgb, out, code);
  const float W = static_cast<float>(rgb.cols), H = static_cast<float>(rgb.rows);
  if (code == cv::ROTATE_90_CLOCKWISE) return {out, {H - b.y - b.h, b.x, b.h, b.w, b.score}};
  if (code == cv::ROTATE_90_COUNTERCLOCKWISE) return {out, {b.y, W - b.x - b.w, b.h, b.w, b.score}};
  return {out, {W - b.x - b.w, H - b.y - b.h, b.w, b.h, b.score}};
}

void Print(const char* what, const FaceOrientation& o) {
  std::printf("%s: turns %d, scores %.3f %.3f %.3f %.3f\n", what, o.upright_turns, o.scores[0], o.scores[1],
              o.scores[2], o.scores[3]);
}

TEST(FaceOrientation, SidewaysPortraitsAreFoundTurnedByTheTurnThatRightsThem) {
  for (const char* name : {"grace_hopper_512x600.jpg", "astronaut_eileen_collins_512.png"}) {
    const std::string key = name[0] == 'g' ? "grace_hopper.jpg" : "astronaut.png";
    const cv::Mat rgb = Face(name);
    const FaceBox box = GoldenBox(key);
    auto upright = EstimateOrientations(Ssd(), rgb, {box});
    ASSERT_TRUE(upright.ok()) << upright.status();
    Print(name, (*upright)[0]);
    EXPECT_EQ((*upright)[0].upright_turns, 0) << name;
    // Stored turned clockwise: a counter-clockwise turn (3) rights it, and so on. Upside down
    // is not judged (face_orientation.h): 0.
    const std::pair<int, int> cases[] = {{cv::ROTATE_90_CLOCKWISE, 3}, {cv::ROTATE_90_COUNTERCLOCKWISE, 1},
                                         {cv::ROTATE_180, 0}};
    for (const auto& [code, want] : cases) {
      const auto [img, b] = Turn(rgb, box, code);
      auto o = EstimateOrientations(Ssd(), img, {b});
      ASSERT_TRUE(o.ok()) << o.status();
      Print(name, (*o)[0]);
      // Sideways is told, the direction only where SSD's upside-down view scores lower (these
      // portraits with their ground-truth boxes; the scan's boxes may come out the other way).
      EXPECT_EQ((*o)[0].upright_turns, want) << name << " turned by code " << code;
    }
  }
}

TEST(FaceOrientation, RolledPortraitsStayUpright) {
  const cv::Mat rgb = Face("grace_hopper_512x600.jpg");
  const FaceBox box = GoldenBox("grace_hopper.jpg");
  const cv::Point2f c(box.x + box.w / 2, box.y + box.h / 2);
  for (double roll : {-45.0, -30.0, 30.0, 45.0}) {
    cv::Mat rolled;
    cv::warpAffine(rgb, rolled, cv::getRotationMatrix2D(c, roll, 1.0), rgb.size());
    auto o = EstimateOrientations(Ssd(), rolled, {box});
    ASSERT_TRUE(o.ok()) << o.status();
    Print(("roll " + std::to_string(roll)).c_str(), (*o)[0]);
    EXPECT_EQ((*o)[0].upright_turns, 0) << "roll " << roll;
  }
}

// On the boxes DetectMultiScale finds (tighter) as well: tests/pipeline GroupPhotoJob.
TEST(FaceOrientation, EveryGroupPhotoFaceIsUpright) {
  int faces = 0;
  double ms = 0;
  for (const Truth& t : GroupPhotos()) {
    const auto start = std::chrono::steady_clock::now();
    auto o = EstimateOrientations(Ssd(), t.rgb, t.faces);
    ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    ASSERT_TRUE(o.ok()) << o.status();
    for (size_t i = 0; i < o->size(); ++i) {
      Print((t.name + " face " + std::to_string(i)).c_str(), (*o)[i]);
      EXPECT_EQ((*o)[i].upright_turns, 0) << t.name << " face " << i;
      ++faces;
    }
  }
  EXPECT_EQ(faces, 21);
  std::printf("orientation check: %.1f ms per face (%d faces, one pass per 4 of an image)\n", ms / faces, faces);
}

// A group photo stored upside down: no face is called sideways (upside down is the landmark
// stage's to tell, upside_down.h). Before, its sideways views could beat the view as it is by
// the margin (sample1's faces: 0.98 and 0.94 turned, 0.95 and 0.53 as it is) and those faces were
// set aside as "turned sideways".
TEST(FaceOrientation, NoFaceOfAnUpsideDownGroupPhotoIsCalledSideways) {
  int faces = 0;
  for (const Truth& t : GroupPhotos()) {
    std::vector<FaceBox> boxes;
    cv::Mat turned;
    for (const FaceBox& b : t.faces) {
      auto [img, tb] = Turn(t.rgb, b, cv::ROTATE_180);
      turned = img;
      boxes.push_back(tb);
    }
    auto o = EstimateOrientations(Ssd(), turned, boxes);
    ASSERT_TRUE(o.ok()) << o.status();
    for (size_t i = 0; i < o->size(); ++i) {
      Print((t.name + " upside down, face " + std::to_string(i)).c_str(), (*o)[i]);
      EXPECT_EQ((*o)[i].upright_turns, 0) << t.name << " face " << i;
      ++faces;
    }
  }
  EXPECT_EQ(faces, 21);
}

}  // namespace
}  // namespace fusion::faceapi
