// Shared test fixture for the face-api networks: the catalogue, nets loaded once per process
// (ctest runs each test as its own process, so "once" is per test), images and goldens.
#pragma once

#include <gtest/gtest.h>

#include <fstream>
#include <memory>

#include "models/catalogue/catalogue.h"
#include "models/faceapi/face_landmark_68.h"
#include "models/faceapi/face_recognition.h"
#include "models/faceapi/image.h"
#include "models/faceapi/ssd_mobilenet_v1.h"
#include "models/faceapi/tiny_face_detector.h"
#include "nlohmann/json.hpp"
#include "temp_dir.h"
#include "test_paths.h"

namespace fusion::faceapi {

inline const models::ModelCatalogue& Catalogue() {
  static const std::unique_ptr<models::ModelCatalogue> cat = [] {
    auto c = models::ModelCatalogue::Create(
        {.manifest = testing::CatalogueJson(), .models_dir = testing::ModelsDir()});
    if (!c.ok()) throw std::runtime_error(c.status().ToString());
    return std::move(*c);
  }();
  return *cat;
}

template <typename T>
T& LoadedOrDie(absl::StatusOr<std::unique_ptr<T>> net) {
  if (!net.ok()) throw std::runtime_error(net.status().ToString());
  return *net->release();  // kept for the process lifetime
}

inline const TinyFaceDetector& Tiny() {
  static TinyFaceDetector& n = LoadedOrDie(TinyFaceDetector::Load(Catalogue(), {}));
  return n;
}
inline const FaceLandmark68Net& Landmarks() {
  static FaceLandmark68Net& n = LoadedOrDie(FaceLandmark68Net::Load(Catalogue()));
  return n;
}
inline const SsdMobilenetV1& Ssd() {
  static SsdMobilenetV1& n = LoadedOrDie(SsdMobilenetV1::Load(Catalogue(), {}));
  return n;
}
inline const FaceRecognitionNet& Recognition() {
  static FaceRecognitionNet& n = LoadedOrDie(FaceRecognitionNet::Load(Catalogue()));
  return n;
}

inline cv::Mat Face(const std::string& file) {
  auto rgb = LoadRgb(testing::CommittedFaces() / file);
  if (!rgb.ok()) throw std::runtime_error(rgb.status().ToString());
  return *rgb;
}

inline const nlohmann::json& Golden() {
  static const nlohmann::json g = [] {
    std::ifstream in(testing::CommittedFaces() / "golden_faceapi.json");
    return nlohmann::json::parse(in);
  }();
  return g;
}

inline FaceBox GoldenBox(const std::string& key) {
  const auto& b = Golden()[key]["det_box_xywh"];
  return {b[0].get<float>(), b[1].get<float>(), b[2].get<float>(), b[3].get<float>(), 1.f};
}

}  // namespace fusion::faceapi
