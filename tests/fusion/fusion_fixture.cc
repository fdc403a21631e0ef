#include "fusion_fixture.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <opencv2/imgcodecs.hpp>

#include "models/generator/classical_generator.h"
#include "models/generator/face_crop.h"

namespace fusion::testing {

std::string TestDataPath(const std::string& rel) { return std::string(FUSION_TEST_DATA_DIR) + "/" + rel; }

std::string FacePath(const std::string& name) {
  // The fetch step names the group photos sample<N>.jpg (shared/data/faces: faceapi_group_...).
  const std::string prefix = "faceapi_group_";
  const std::string fetched = name.rfind(prefix, 0) == 0 ? name.substr(prefix.size()) : name;
  std::vector<std::string> candidates{TestDataPath("faces/" + name)};
  if (const char* env = std::getenv("FUSION_TESTDATA_DIR")) candidates.push_back(std::string(env) + "/faces/" + fetched);
  candidates.push_back(std::string(FUSION_FETCHED_TESTDATA_DIR) + "/faces/" + fetched);
  for (const std::string& c : candidates) {
    if (std::filesystem::exists(c)) return c;
  }
  return "";
}

std::string ModelsDir() {
  if (const char* env = std::getenv("FUSION_MODELS_DIR")) return env;
  return FUSION_MODELS_DIR;
}

std::vector<std::vector<cv::Point2f>> CommittedLandmarks(const std::string& image) {
  std::ifstream f(TestDataPath("fusion/landmarks68.json"));
  const nlohmann::json j = nlohmann::json::parse(f);
  std::vector<std::vector<cv::Point2f>> faces;
  for (const auto& face : j.at("images").at(image)) {
    std::vector<cv::Point2f> pts;
    for (const auto& p : face.at("landmarks")) pts.emplace_back(p[0].get<float>(), p[1].get<float>());
    faces.push_back(std::move(pts));
  }
  return faces;
}

absl::Status SwapFace(const cv::Mat& source, const std::vector<cv::Point2f>& src_lm,
                      const std::vector<cv::Point2f>& dst_lm, double ratio,
                      models::BlendMode mode, cv::Mat* frame) {
  auto src = models::AlignFaceCrop(source, src_lm, models::kCropSize);
  auto dst = models::AlignFaceCrop(*frame, dst_lm, models::kCropSize);
  if (!src.ok()) return src.status();
  if (!dst.ok()) return dst.status();
  auto gen = models::ClassicalGenerator::Create({});
  if (!gen.ok()) return gen.status();
  models::GeneratorInputs in{models::BgrToTensor(src->bgr), models::LandmarksToTensor(src->landmarks),
                             models::BgrToTensor(dst->bgr), models::LandmarksToTensor(dst->landmarks),
                             ratio};
  auto out = (*gen)->Fuse(in);
  if (!out.ok()) return out.status();
  models::BlendInput blend{models::TensorToRgbMat(*out), models::TensorToRgbMat(in.target),
                           dst->frame_to_crop, dst_lm};
  models::BlendOptions options;
  options.mode = mode;
  return models::BlendFace(blend, options, frame);
}

cv::Mat PngRoundTrip(const cv::Mat& bgr) {
  std::vector<uchar> png;
  cv::imencode(".png", bgr, png);
  return cv::imdecode(png, cv::IMREAD_COLOR);
}

}  // namespace fusion::testing
