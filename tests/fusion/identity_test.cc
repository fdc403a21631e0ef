// Fusion quality with the real face-api networks: after a swap (ratio 1, full blend) every result
// face is detected again and its descriptor moves towards the source's.
// The distances printed here are the fusion-quality baseline.
#include <gtest/gtest.h>

#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "fusion_fixture.h"
#include "models/catalogue/catalogue.h"
#include "models/faceapi/face_landmark_68.h"
#include "models/faceapi/face_recognition.h"
#include "models/faceapi/tiny_face_detector.h"

namespace fusion::faceapi {
namespace {

struct Nets {
  std::unique_ptr<models::ModelCatalogue> catalogue;
  std::unique_ptr<TinyFaceDetector> detector;
  std::unique_ptr<FaceLandmark68Net> landmarks;
  std::unique_ptr<FaceRecognitionNet> recognition;
};

const Nets& Networks() {
  static const Nets* nets = [] {
    auto* n = new Nets;
    auto cat = models::ModelCatalogue::Create({FUSION_SOURCE_DIR "/models/manifest.json", testing::ModelsDir()});
    if (!cat.ok()) throw std::runtime_error(cat.status().ToString());
    n->catalogue = std::move(*cat);
    auto d = TinyFaceDetector::Load(*n->catalogue, {});
    auto l = FaceLandmark68Net::Load(*n->catalogue);
    auto r = FaceRecognitionNet::Load(*n->catalogue);
    if (!d.ok() || !l.ok() || !r.ok()) throw std::runtime_error("face-api nets: run scripts/fetch-models.sh");
    n->detector = std::move(*d), n->landmarks = std::move(*l), n->recognition = std::move(*r);
    return n;
  }();
  return *nets;
}

struct Face {
  FaceBox box;
  std::vector<cv::Point2f> points;
  Descriptor descriptor;
};

// Every face of a BGR frame: detector (input 416), landmarks, descriptor; left to right.
std::vector<Face> Analyse(const cv::Mat& bgr) {
  cv::Mat rgb;
  cv::cvtColor(bgr, rgb, cv::COLOR_BGR2RGB);
  std::vector<Face> faces;
  auto boxes = Networks().detector->Detect(rgb);
  EXPECT_TRUE(boxes.ok()) << boxes.status();
  for (const FaceBox& b : boxes.value_or(std::vector<FaceBox>{})) {
    auto pts = Networks().landmarks->Detect(rgb, b);
    auto desc = pts.ok() ? Networks().recognition->Compute(rgb, *pts) : absl::StatusOr<Descriptor>(pts.status());
    EXPECT_TRUE(desc.ok()) << desc.status();
    if (!desc.ok()) continue;
    Face f{b, {}, *desc};
    for (const Point& p : *pts) f.points.emplace_back(p.x, p.y);
    faces.push_back(std::move(f));
  }
  std::sort(faces.begin(), faces.end(), [](const Face& a, const Face& b) { return a.box.x < b.box.x; });
  return faces;
}

// The result face matching `target` (IoU >= 0.4), or nullptr.
const Face* Redetected(const std::vector<Face>& result, const Face& target) {
  for (const Face& f : result) {
    if (IoU(f.box, target.box) >= 0.4f) return &f;
  }
  return nullptr;
}

cv::Mat Read(const std::string& name) {
  const std::string path = testing::FacePath(name);
  EXPECT_FALSE(path.empty()) << name << " missing: run scripts/fetch-models.sh";
  return cv::imread(path, cv::IMREAD_COLOR);
}

// Swaps the astronaut onto every face of `target_name` (full blend, ratio 1) and returns, per
// target face, d(target, source) - d(result, source); fails when a result face is not found.
std::vector<float> Margins(const std::string& target_name) {
  const cv::Mat source = Read("astronaut_eileen_collins_512.png"), target = Read(target_name);
  const std::vector<Face> src = Analyse(source), tgt = Analyse(target);
  EXPECT_EQ(src.size(), 1u);
  EXPECT_FALSE(tgt.empty());
  if (src.size() != 1u) return {};
  cv::Mat frame = target.clone();
  for (const Face& t : tgt) {
    EXPECT_TRUE(testing::SwapFace(source, src[0].points, t.points, 1.0, models::BlendMode::kFull, &frame).ok());
  }
  const std::vector<Face> result = Analyse(frame);
  std::vector<float> margins;
  for (size_t i = 0; i < tgt.size(); ++i) {
    const Face* r = Redetected(result, tgt[i]);
    EXPECT_NE(r, nullptr) << target_name << " face " << i << " is not detected after the swap";
    if (r == nullptr) continue;
    const float d_target = DescriptorDistance(tgt[i].descriptor, src[0].descriptor);
    const float d_result = DescriptorDistance(r->descriptor, src[0].descriptor);
    std::printf("astronaut -> %s face %zu: d(target,source) %.3f d(result,source) %.3f margin %.3f\n",
                target_name.c_str(), i, d_target, d_result, d_target - d_result);
    margins.push_back(d_target - d_result);
  }
  return margins;
}

TEST(FusionIdentity, AstronautOntoGraceMovesTheDescriptorTowardsTheSource) {
  const std::vector<float> m = Margins("grace_hopper_512x600.jpg");
  ASSERT_EQ(m.size(), 1u);
  EXPECT_GE(m[0], 0.10f);
}

TEST(FusionIdentity, AstronautOntoEachSample1FaceGainsOnAverage) {
  const std::vector<float> m = Margins("faceapi_group_sample1.jpg");
  ASSERT_EQ(m.size(), 3u);
  const float mean = (m[0] + m[1] + m[2]) / 3.0f;
  std::printf("sample1 mean margin %.3f\n", mean);
  EXPECT_GT(mean, 0.05f);
}

}  // namespace
}  // namespace fusion::faceapi
