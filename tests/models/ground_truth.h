// Ground truth of the group photos (tests/data/faces/ground_truth.json) and of the mosaic
// derived from it, and the scoring rule: a detection matches a face at IoU >= 0.4;
// a detection lying mostly (>= 50% of its area) inside an ignore region is neither a hit nor a
// false box; any other unmatched detection is a false box.
#pragma once

#include <fstream>
#include <string>
#include <vector>

#include <opencv2/core/mat.hpp>

#include "models/faceapi/image.h"
#include "nlohmann/json.hpp"
#include "test_paths.h"

namespace fusion::faceapi {

struct Truth {
  std::string name;
  cv::Mat rgb;
  std::vector<FaceBox> faces, ignore;
};

struct Score {
  int found = 0, faces = 0, false_boxes = 0;
  std::string false_list;
};

inline Score ScoreDetections(const Truth& t, const std::vector<FaceBox>& dets) {
  Score s;
  s.faces = static_cast<int>(t.faces.size());
  std::vector<bool> hit(t.faces.size());
  for (const FaceBox& d : dets) {
    bool matched = false;
    for (size_t k = 0; k < t.faces.size(); ++k) {
      if (IoU(d, t.faces[k]) >= 0.4f) matched = hit[k] = true;
    }
    bool ignored = false;
    for (const FaceBox& q : t.ignore) {
      const float ix = std::max(0.f, std::min(d.x + d.w, q.x + q.w) - std::max(d.x, q.x));
      const float iy = std::max(0.f, std::min(d.y + d.h, q.y + q.h) - std::max(d.y, q.y));
      ignored |= ix * iy >= 0.5f * d.area();
    }
    if (!matched && !ignored) {
      ++s.false_boxes;
      s.false_list += " [" + std::to_string(int(d.x)) + "," + std::to_string(int(d.y)) + "," + std::to_string(int(d.w)) +
                      "," + std::to_string(int(d.h)) + " score " + std::to_string(d.score) + "]";
    }
  }
  for (bool h : hit) s.found += h;
  return s;
}

inline std::vector<FaceBox> Boxes(const nlohmann::json& list) {
  std::vector<FaceBox> out;
  for (const auto& b : list) out.push_back({b[0].get<float>(), b[1].get<float>(), b[2].get<float>(), b[3].get<float>(), 1});
  return out;
}

// sample1..6 from the fetched test data, with their faces and ignore regions.
inline std::vector<Truth> GroupPhotos() {
  std::ifstream in(testing::CommittedFaces() / "ground_truth.json");
  const nlohmann::json gt = nlohmann::json::parse(in);
  std::vector<Truth> out;
  for (int i = 1; i <= 6; ++i) {
    Truth t;
    t.name = "sample" + std::to_string(i);
    auto rgb = LoadRgb(testing::TestDataDir() / "faces" / (t.name + ".jpg"));
    if (!rgb.ok()) throw std::runtime_error(rgb.status().ToString());
    t.rgb = *rgb;
    const auto& g = gt["images"]["faceapi_group_sample" + std::to_string(i) + ".jpg"];
    t.faces = Boxes(g["faces"]);
    t.ignore = Boxes(g["ignore"]);
    out.push_back(t);
  }
  return out;
}

// The 3840x2896 mosaic: samples 1-4 in a 2x2 grid of 1920x1448 cells, each centred (the odd
// remainder on top), as scripts/fetch-models.sh builds it; boxes shifted accordingly.
inline Truth Mosaic(const std::vector<Truth>& groups) {
  Truth m;
  m.name = "mosaic";
  auto rgb = LoadRgb(testing::TestDataDir() / "faces/mosaic_3840x2896.jpg");
  if (!rgb.ok()) throw std::runtime_error(rgb.status().ToString());
  m.rgb = *rgb;
  for (int i = 0; i < 4; ++i) {
    const Truth& g = groups[i];
    const float ox = (i % 2) * 1920 + (1920 - g.rgb.cols + 1) / 2;
    const float oy = (i / 2) * 1448 + (1448 - g.rgb.rows + 1) / 2;
    for (FaceBox b : g.faces) m.faces.push_back({b.x + ox, b.y + oy, b.w, b.h, 1});
    for (FaceBox b : g.ignore) m.ignore.push_back({b.x + ox, b.y + oy, b.w, b.h, 1});
  }
  return m;
}

}  // namespace fusion::faceapi
