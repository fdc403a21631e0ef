// bench/edge: how well the frame-edge check (daemon/pipeline/frame_edge.h) measures faces cut by
// the frame edge. Makes its own set with a known truth: the 21 faces of the six group photos
// (boxes from tests/data/faces/ground_truth.json), Grace Hopper and the astronaut (the tiny
// detector's reference boxes, golden_faceapi.json, as the ground truth's were made), each rolled by the given
// angles about the face's centre and cut by each frame edge so that a known share of the face's
// box (rotated with it) lies outside the frame. Then runs the pipeline's own stage functions on
// each made image (DetectFaces with SSD, FindLandmarks, FaceOutsideShare, SetAsideCutFaces) and
// prints one line per case and a table per side and roll: the true share against the estimate,
// and whether the face would be swapped, set aside as cut, or reported as turned sideways.
// Usage: fusion_edge_bench [--models-dir DIR] [--testdata DIR] [--rolls 0,15,-15,30,-30]
//                          [--shares 0.1,...] [--only SUBSTRING] [--png-dir DIR] [--threads N]
//                          [--calibrate]
// --calibrate prints the uncut faces' 68 points normalised by a similarity (Procrustes) and
// their boxes in that frame: the template frame_edge.cc carries.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <thread>

#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "bench/read_file.h"
#include "models/catalogue/catalogue.h"
#include "pipeline/execution.h"
#include "geometry/frame_edge.h"
#include "loader/model_store.h"
#include "pipeline/parallel.h"
#include "pipeline/stages.h"
#include "tests/pipeline/made_cut.h"

namespace {

using namespace fusion;

struct Base {
  std::string name;
  cv::Mat bgr;
  cv::Rect2f box;  // the whole face, photo pixels
};

using made_cut::Side;
using made_cut::kLeft, made_cut::kRight, made_cut::kTop, made_cut::kBottom;
using made_cut::Bound, made_cut::ClipHalf;

Picture Pic(const cv::Mat& bgr) { return *MakePicture(bgr, "target image"); }  // never fails

float IoU(const faceapi::FaceBox& a, const cv::Rect2f& b) {
  const cv::Rect2f ra(a.x, a.y, a.w, a.h);
  const float i = (ra & b).area();
  return i <= 0 ? 0 : i / (ra.area() + b.area() - i);
}

struct Result {
  std::string base, what;
  double roll = 0, truth = 0;
  Side side = kLeft;
  bool found = false, turned = false, set_aside = false;
  float estimate = -1;
  faceapi::FaceBox box;
  faceapi::Landmarks68 points{};
};

struct Models {
  std::shared_ptr<const ModelCopy> ssd, landmarks;
};

Result Run(const Models& m, const Base& base, double roll, Side side, double share, const std::string& png_dir) {
  const made_cut::Made made = made_cut::Make(base.bgr, base.box, roll, side, share);
  Result r{.base = base.name, .roll = roll, .truth = made.truth, .side = side};
  Picture p = Pic(made.bgr);
  if (!DetectFaces(*m.ssd, 0, DetectSettings{}, p).ok()) return r;
  // The visible part of the face's box, its bounding box: the detection that overlaps it most.
  const cv::Rect2f visible = Bound(made_cut::Inside(made.face, made.bgr.size()));
  int best = -1;
  float best_iou = 0.3f;
  bool turned = false;
  for (size_t i = 0; i < p.faces.size(); ++i) {
    if (IoU(p.faces[i].box, visible) > best_iou) best = static_cast<int>(i), best_iou = IoU(p.faces[i].box, visible);
  }
  for (size_t i = 0; i < p.turned.size(); ++i) {
    if (IoU(p.turned[i].box, visible) > best_iou) {
      best = static_cast<int>(i), best_iou = IoU(p.turned[i].box, visible), turned = true;
    }
  }
  if (best < 0) return r;
  r.found = true;
  if (turned) {
    r.turned = true;
    r.box = p.turned[best].box;
    r.what = TurnedFaceNote(p.what, p.turned[best]);
    return r;
  }
  p.faces = {p.faces[best]};
  if (!FindLandmarks(*m.landmarks, p).ok()) return r;
  r.box = p.faces[0].box;
  r.points = p.faces[0].landmarks;
  r.estimate = FaceOutsideShare(p.faces[0].box, p.faces[0].landmarks, p.rgb.size());
  SetAsideCutFaces(p);
  r.set_aside = !p.cut.empty();
  if (!png_dir.empty()) {
    cv::Mat v = made.bgr.clone();
    std::vector<cv::Point> face;
    for (const cv::Point2f& q : made.face) face.emplace_back(std::lround(q.x), std::lround(q.y));
    cv::polylines(v, face, true, {255, 255, 0}, 1);
    cv::rectangle(v, cv::Rect(std::lround(r.box.x), std::lround(r.box.y), std::lround(r.box.w), std::lround(r.box.h)),
                  {0, 0, 255}, 1);
    for (const faceapi::Point& q : r.points) cv::circle(v, cv::Point(std::lround(q.x), std::lround(q.y)), 2, {0, 255, 0}, -1);
    cv::imwrite(absl::StrFormat("%s/%s_r%+.0f_%s%02.0f.png", png_dir, base.name, roll, made_cut::SideName(side), share * 100), v);
  }
  return r;
}

std::vector<Base> Bases(const std::string& testdata) {
  std::vector<Base> out;
  const auto gt = nlohmann::json::parse(bench::ReadFile(FUSION_SOURCE_DIR "/tests/data/faces/ground_truth.json"));
  for (const auto& [file, entry] : gt["images"].items()) {
    const std::string path = testdata + "/faces/" + file.substr(file.find("sample"));
    const cv::Mat bgr = cv::imread(path, cv::IMREAD_COLOR);
    if (bgr.empty()) throw std::runtime_error("cannot read " + path);
    int k = 0;
    for (const auto& b : entry["faces"]) {
      const std::string name = absl::StrFormat("%s#%d", file.substr(file.find("sample"), 7), k++);
      out.push_back({name, bgr, cv::Rect2f(b[0], b[1], b[2], b[3])});
    }
  }
  // The tiny detector's reference boxes (tests/data/faces/golden_faceapi.json det_box_xywh).
  const std::vector<std::tuple<std::string, std::string, cv::Rect2f>> portraits = {
      {"grace", "grace_hopper_512x600.jpg", {142.2f, 137.1f, 240.7f, 214.7f}},
      {"astronaut", "astronaut_eileen_collins_512.png", {163.5f, 75.8f, 115.4f, 110.5f}}};
  for (const auto& [name, file, box] : portraits) {
    out.push_back({name, cv::imread(FUSION_SOURCE_DIR "/tests/data/faces/" + file, cv::IMREAD_COLOR), box});
  }
  return out;
}

// The uncut faces' points normalised by generalised Procrustes, and their boxes in that frame.
void Calibrate(const Models& m, const std::vector<Base>& bases) {
  std::vector<std::vector<cv::Point2f>> shapes, boxes, ssd_boxes;
  std::vector<std::string> names;
  for (const Base& b : bases) {
    Picture p = Pic(b.bgr);
    // The SSD box the pipeline would give the net: the detection that overlaps the truth most.
    if (!DetectFaces(*m.ssd, 0, DetectSettings{}, p).ok()) continue;
    int best = -1;
    float iou = 0.3f;
    for (size_t i = 0; i < p.faces.size(); ++i) {
      if (IoU(p.faces[i].box, b.box) > iou) best = static_cast<int>(i), iou = IoU(p.faces[i].box, b.box);
    }
    if (best < 0) continue;
    p.faces = {p.faces[best]};
    if (!FindLandmarks(*m.landmarks, p).ok()) continue;
    std::vector<cv::Point2f> s;
    for (const faceapi::Point& q : p.faces[0].landmarks) s.emplace_back(q.x, q.y);
    shapes.push_back(s);
    names.push_back(b.name);
    boxes.push_back({b.box.tl(), {b.box.x + b.box.width, b.box.y}, b.box.br(), {b.box.x, b.box.y + b.box.height}});
    const faceapi::FaceBox& d = p.faces[0].box;
    ssd_boxes.push_back({{d.x, d.y}, {d.x + d.w, d.y}, {d.x + d.w, d.y + d.h}, {d.x, d.y + d.h}});
  }
  // Normalise: centroid 0, RMS radius 1; iterate aligning to the mean.
  auto normalise = [](std::vector<cv::Point2f> s) {
    cv::Point2f c(0, 0);
    for (auto& q : s) c += q;
    c *= 1.0f / s.size();
    double r = 0;
    for (auto& q : s) q -= c, r += q.dot(q);
    r = std::sqrt(r / s.size());
    for (auto& q : s) q *= static_cast<float>(1 / r);
    return s;
  };
  std::vector<cv::Point2f> mean = normalise(shapes[0]);
  for (int it = 0; it < 10; ++it) {
    std::vector<cv::Point2f> sum(68, {0, 0});
    for (size_t i = 0; i < shapes.size(); ++i) {
      const Similarity t = FitSimilarity(shapes[i], mean);
      for (int k = 0; k < 68; ++k) sum[k] += t(shapes[i][k]);
    }
    for (auto& q : sum) q *= 1.0f / shapes.size();
    mean = normalise(sum);
  }
  // Upright: the eyes' centres level.
  cv::Point2f le(0, 0), re(0, 0);
  for (int k = 36; k < 42; ++k) le += mean[k] * (1.0f / 6), re += mean[k + 6] * (1.0f / 6);
  const double angle = std::atan2(re.y - le.y, re.x - le.x);
  const Similarity level{std::cos(-angle), std::sin(-angle), 0, 0};
  for (cv::Point2f& q : mean) q = level(q);
  // The boxes of the faces the photo holds upright (roll under 8 degrees), in the mean face's
  // frame: the per-corner median (a few faces' points are off).
  std::vector<std::vector<float>> box_c(8), ssd_c(8);
  for (size_t i = 0; i < shapes.size(); ++i) {
    const Similarity t = FitSimilarity(shapes[i], mean);
    const double roll = std::atan2(t.b, t.a) * 180 / M_PI;
    std::vector<cv::Point2f> a, d;
    for (int k = 0; k < 4; ++k) a.push_back(t(boxes[i][k])), d.push_back(t(ssd_boxes[i][k]));
    std::printf("// %-10s roll %+6.1f box (%.3f,%.3f)-(%.3f,%.3f), ssd (%.3f,%.3f)-(%.3f,%.3f)\n", names[i].c_str(), roll,
                a[0].x, a[0].y, a[2].x, a[2].y, d[0].x, d[0].y, d[2].x, d[2].y);
    if (std::abs(roll) >= 8) continue;
    for (int k = 0; k < 4; ++k) {
      box_c[2 * k].push_back(a[k].x), box_c[2 * k + 1].push_back(a[k].y);
      ssd_c[2 * k].push_back(d[k].x), ssd_c[2 * k + 1].push_back(d[k].y);
    }
  }
  auto median = [](std::vector<float> v) {
    std::sort(v.begin(), v.end());
    return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
  };
  std::printf("// %zu faces, %zu upright\nkMeanFace = {", shapes.size(), box_c[0].size());
  for (int k = 0; k < 68; ++k) std::printf("%s{%.4ff, %.4ff}", k % 4 ? ", " : ",\n    ", mean[k].x, mean[k].y);
  std::printf("};\nkMeanFaceBox = {");
  for (int k = 0; k < 4; ++k) std::printf("{%.4ff, %.4ff}, ", median(box_c[2 * k]), median(box_c[2 * k + 1]));
  std::printf("};\nkMeanFaceNetBox = {");
  for (int k = 0; k < 4; ++k) std::printf("{%.4ff, %.4ff}, ", median(ssd_c[2 * k]), median(ssd_c[2 * k + 1]));
  std::printf("};\n");
}

std::vector<double> Numbers(const std::string& s) {
  std::vector<double> out;
  for (absl::string_view v : absl::StrSplit(s, ',')) out.push_back(std::stod(std::string(v)));
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("frame-edge estimate against made cuts with a known truth");
  std::string models_dir = FUSION_MODELS_DIR, testdata = FUSION_TESTDATA_DIR, rolls_s = "0,15,-15,30,-30",
              shares_s = "0.1,0.15,0.2,0.25,0.3,0.35,0.4,0.5,0.6,0.7", only, png_dir;
  int threads = 1;
  bool calibrate = false;
  app.add_option("--models-dir", models_dir);
  app.add_option("--testdata", testdata);
  app.add_option("--rolls", rolls_s);
  app.add_option("--shares", shares_s);
  app.add_option("--only", only, "bases whose name contains this");
  app.add_option("--png-dir", png_dir, "write each made image with the box and points");
  app.add_option("--threads", threads);
  app.add_flag("--calibrate", calibrate);
  CLI11_PARSE(app, argc, argv);
  SetThreadIntraOpThreads(1);
  auto cat = models::ModelCatalogue::Create({FUSION_SOURCE_DIR "/models/manifest.json", models_dir});
  if (!cat.ok()) return std::fprintf(stderr, "edge_bench: %s\n", cat.status().ToString().c_str()), 1;
  auto store = ModelStore::Create(cat->get(), {.device = "cpu"});
  if (!store.ok()) return std::fprintf(stderr, "edge_bench: %s\n", store.status().ToString().c_str()), 1;
  Models m{*(*store)->HostCopy("ssd_mobilenetv1"),
           *(*store)->HostCopy("face_landmark_68")};
  std::vector<Base> bases = Bases(testdata);
  if (calibrate) return Calibrate(m, bases), 0;
  if (!only.empty()) std::erase_if(bases, [&](const Base& b) { return b.name.find(only) == std::string::npos; });
  struct Job {
    const Base* base;
    double roll;
    Side side;
    double share;
  };
  std::vector<Job> jobs;
  for (const Base& b : bases) {
    for (double roll : Numbers(rolls_s)) {
      for (Side side : {kLeft, kRight, kTop, kBottom}) {
        for (double share : Numbers(shares_s)) jobs.push_back({&b, roll, side, share});
      }
    }
  }
  std::vector<Result> results(jobs.size());
  std::atomic<size_t> next{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < std::max(1, threads); ++t) {
    pool.emplace_back([&] {
      SetThreadIntraOpThreads(1);
      for (size_t i; (i = next.fetch_add(1)) < jobs.size();) {
        results[i] = Run(m, *jobs[i].base, jobs[i].roll, jobs[i].side, jobs[i].share, png_dir);
      }
    });
  }
  for (std::thread& t : pool) t.join();
  std::printf("%-10s %5s %-6s %5s %5s %6s %s\n", "face", "roll", "side", "true", "est", "err", "verdict");
  for (const Result& r : results) {
    const char* verdict = !r.found ? "not found" : r.turned ? "TURNED" : r.set_aside ? "set aside" : "swapped";
    std::printf("%-10s %+5.0f %-6s %5.2f %5.2f %+6.2f %s\n", r.base.c_str(), r.roll, made_cut::SideName(r.side), r.truth,
                r.estimate, r.estimate >= 0 ? r.estimate - r.truth : 0.0, verdict);
  }
  // Per side and roll: mean |error|, worst error, bias, over the faces found and landmarked.
  std::printf("\n%-6s %5s %5s %7s %7s %7s\n", "side", "roll", "n", "mean|e|", "max|e|", "bias");
  double all_abs = 0, all_max = 0;
  size_t all_n = 0;
  for (Side side : {kLeft, kRight, kTop, kBottom}) {
    for (double roll : Numbers(rolls_s)) {
      double sum = 0, abs_sum = 0, worst = 0;
      size_t n = 0;
      for (const Result& r : results) {
        if (r.side != side || r.roll != roll || r.estimate < 0) continue;
        const double e = r.estimate - r.truth;
        sum += e, abs_sum += std::abs(e), worst = std::max(worst, std::abs(e)), ++n;
      }
      all_abs += abs_sum, all_max = std::max(all_max, worst), all_n += n;
      std::printf("%-6s %+5.0f %5zu %7.3f %7.3f %+7.3f\n", made_cut::SideName(side), roll, n, n ? abs_sum / n : 0, worst,
                  n ? sum / n : 0);
    }
  }
  std::printf("all          %5zu %7.3f %7.3f\n", all_n, all_n ? all_abs / all_n : 0, all_max);
  // Per true share: the verdicts, and the estimate's spread.
  std::printf("\n%5s %5s %7s %7s %7s %7s %7s %7s %7s\n", "share", "cases", "swapped", "aside", "turned", "missed",
              "mean|e|", "max|e|", "p90|e|");
  for (double share : Numbers(shares_s)) {
    size_t n = 0, swapped = 0, aside = 0, turned = 0, missed = 0;
    std::vector<double> errs;
    for (size_t i = 0; i < jobs.size(); ++i) {
      if (jobs[i].share != share) continue;
      const Result& r = results[i];
      ++n;
      if (!r.found) ++missed;
      else if (r.turned) ++turned;
      else if (r.set_aside) ++aside;
      else ++swapped;
      if (r.estimate >= 0) errs.push_back(std::abs(r.estimate - r.truth));
    }
    std::sort(errs.begin(), errs.end());
    double mean = 0;
    for (double e : errs) mean += e;
    std::printf("%5.2f %5zu %7zu %7zu %7zu %7zu %7.3f %7.3f %7.3f\n", share, n, swapped, aside, turned, missed,
                errs.empty() ? 0 : mean / errs.size(), errs.empty() ? 0 : errs.back(),
                errs.empty() ? 0 : errs[errs.size() * 9 / 10]);
  }
  return 0;
}
