// Face-detection figures for the multi-scale pyramid (multiscale.h). Not a test: it measures.
//
//   fusion_detect_bench curve tiny|ssd [INPUT]
//       Single-pass recall per face width in network-input pixels: each of the 23 face crops
//       (collage.h) pasted alone, centred on a cluttered INPUT x INPUT canvas (416 tiny, 512
//       ssd), one Detect at INPUT (--min-score S: at score > S; below 0.5 it also prints, per
//       score level, the faces with a box at IoU >= 0.2 and the boxes elsewhere: proposals,
//       multiscale.h). Prints found/23 and false boxes per width (--widths A,B,...: only those).
//   fusion_detect_bench collage tiny|ssd W H MIN_FACE [MAX_FACE] [--png OUT] [--min-face-px N]
//       A W x H collage of faces MIN..MAX_FACE px wide (log-spaced, 23 crops in turn) on clutter;
//       DetectMultiScale; recall per size bin, false boxes, passes, largest pass input, ms.
//   fusion_detect_bench photo tiny|ssd FILE...   boxes and ms for real photos (--png OUT).
//   --full-scan (collage, photo, sweep): every planned pass, no proposal gating (multiscale.h).
//   --no-relook (collage, photo, sweep): no rolled second look at near-threshold boxes.
//   --roll DEG (collage): the face crops rolled in turn by +DEG and -DEG.
//   fusion_detect_bench sweep tiny|ssd W H MIN_FACE...
//       One face per W x H clutter frame, for each MIN_FACE (--min-face-px) at widths MIN_FACE x
//       1.0, 1.15, ... 4.0 (or up to the frame's short side / 1.3), 6 of the 23 crops each:
//       recall per width, misses listed; the pyramid's scale-response holes show up here.
#include <ATen/Parallel.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>

#include <opencv2/imgcodecs.hpp>

#include "absl/strings/str_cat.h"
#include "collage.h"
#include "models/faceapi/multiscale.h"
#include "models/faceapi/ssd_mobilenet_v1.h"

namespace fusion::faceapi {
namespace {

const FaceDetector& Detector(const std::string& which) {
  if (which == "ssd") {
    static SsdMobilenetV1& n = LoadedOrDie(SsdMobilenetV1::Load(Catalogue(), {}));
    return n;
  }
  return Tiny();
}

double Ms(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

cv::Rect g_zoom;  // --zoom X Y W H: save only this region, full resolution

void SavePng(const std::string& path, const Truth& t, const std::vector<FaceBox>& dets, double max_side = 2400) {
  cv::Mat bgr;
  const double k = g_zoom.empty() ? std::min(1.0, max_side / std::max(t.rgb.cols, t.rgb.rows)) : 1.0;
  cv::resize(t.rgb, bgr, cv::Size(), k, k, cv::INTER_AREA);
  cv::cvtColor(bgr, bgr, cv::COLOR_RGB2BGR);
  auto rect = [&](const FaceBox& b) { return cv::Rect(b.x * k, b.y * k, b.w * k, b.h * k); };
  for (const FaceBox& b : t.faces) cv::rectangle(bgr, rect(b), {0, 255, 0}, 2);
  for (const FaceBox& b : dets) cv::rectangle(bgr, rect(b), {0, 0, 255}, 2);
  cv::imwrite(path, g_zoom.empty() ? bgr : bgr(g_zoom & cv::Rect(0, 0, bgr.cols, bgr.rows)));
}

std::vector<int> g_widths;  // --widths A,B,...: the curve's face widths (default: 12..416)

int Curve(const std::string& which, int input, float min_score) {
  const FaceDetector& det = Detector(which);
  const std::vector<FaceCrop> crops = FaceCrops(GroupPhotos());
  std::vector<int> widths = g_widths;
  if (widths.empty()) widths = {12, 16, 20, 24, 28, 32, 36, 40, 44, 48, 52, 56, 60, 64, 72, 80, 88, 96, 112, 128, 160, 192, 224, 256, 288, 320, 352, 384, 416};
  for (int f : widths) {
    if (f > input) break;
    int found = 0, false_boxes = 0, poor = 0;
    float min_hit = 1, max_false = 0;
    // Below the detector's threshold (--min-score), as proposals (multiscale.h): per face the
    // best score of a box at IoU >= 0.2, and per canvas the boxes elsewhere, by score.
    const std::vector<float> levels = {0.05f, 0.1f, 0.2f, 0.3f, 0.5f};
    std::vector<int> near(levels.size(), 0), elsewhere(levels.size(), 0);
    for (size_t i = 0; i < crops.size(); ++i) {
      Truth t;
      t.rgb = Clutter(input, input, 1000 + static_cast<uint32_t>(i));
      const double k = f / crops[i].face.w;
      const cv::Point at(static_cast<int>(input / 2 - (crops[i].face.x + crops[i].face.w / 2) * k),
                         static_cast<int>(input / 2 - (crops[i].face.y + crops[i].face.h / 2) * k));
      t.faces.push_back(Paste(t.rgb, crops[i], f, at));
      auto d = det.Detect(t.rgb, which == "ssd" ? 0 : input, 0, min_score);
      if (!d.ok()) return std::fprintf(stderr, "%s\n", d.status().ToString().c_str()), 1;
      const Score s = ScoreDetections(t, *d);
      found += s.found;
      false_boxes += s.false_boxes;
      float best_near = 0;
      for (const FaceBox& b : *d) {
        const float iou = IoU(b, t.faces[0]);
        if (iou >= 0.4f) min_hit = std::min(min_hit, b.score);
        else max_false = std::max(max_false, b.score);
        poor += iou > 0.1f && iou < 0.4f;
        if (iou >= 0.2f) best_near = std::max(best_near, b.score);
        for (size_t l = 0; l < levels.size(); ++l) elsewhere[l] += iou < 0.2f && b.score > levels[l];
      }
      for (size_t l = 0; l < levels.size(); ++l) near[l] += best_near > levels[l];
    }
    std::printf("%s @%d face %3d px: %2d/%zu found, %d false boxes (%d overlap the face at IoU < 0.4), "
                "lowest hit score %.2f, highest false %.2f\n", which.c_str(), input, f, found, crops.size(),
                false_boxes, poor, min_hit, max_false);
    if (min_score > 0 && min_score < 0.5f) {
      std::printf("   a box at IoU >= 0.2 / boxes elsewhere per %zu canvases, score >", crops.size());
      for (size_t l = 0; l < levels.size(); ++l) {
        if (levels[l] >= min_score) std::printf(" %.2f: %d/%d", levels[l], near[l], elsewhere[l]);
      }
      std::printf("\n");
    }
  }
  return 0;
}

struct Run {
  std::vector<FaceBox> dets;
  double ms = 0;
  size_t passes = 0, planned = 0;  // passes run (proposal gating skips tiles), planned
  int max_input = 0;
};

int g_working_side = 0;
double g_roll = 0;  // --roll DEG: the collage's crops rolled in turn by +DEG and -DEG  // --working-side N: detect on a copy scaled to N (the old job path)

Run Detect(const FaceDetector& det, const cv::Mat& full, const MultiScaleOptions& o) {
  Run r;
  cv::Mat rgb = full;
  double k = 1;
  if (g_working_side > 0 && std::max(full.cols, full.rows) > g_working_side) {
    k = static_cast<double>(std::max(full.cols, full.rows)) / g_working_side;
    cv::resize(full, rgb, cv::Size(std::lround(full.cols / k), std::lround(full.rows / k)), 0, 0, cv::INTER_AREA);
    k = static_cast<double>(full.cols) / rgb.cols;
  }
  for (const DetectionPass& p : PlanPasses(det, rgb.cols, rgb.rows, o)) r.max_input = std::max(r.max_input, p.input_size);
  r.planned = PlanPasses(det, rgb.cols, rgb.rows, o).size();
  MultiScaleOptions counted = o;
  std::atomic<size_t> ran{0};
  counted.before_pass = [&ran](size_t, size_t) { return ++ran, absl::OkStatus(); };
  const auto t0 = std::chrono::steady_clock::now();
  auto d = DetectMultiScale(det, rgb, counted);
  r.passes = ran.load();
  r.ms = Ms(t0);
  if (!d.ok()) {
    std::fprintf(stderr, "%s\n", d.status().ToString().c_str());
    std::exit(1);
  }
  r.dets = *d;
  for (FaceBox& b : r.dets) b.x *= k, b.y *= k, b.w *= k, b.h *= k;
  return r;
}

int Collage(const std::string& which, int w, int h, float lo, float hi, const MultiScaleOptions& o,
            const std::string& png) {
  std::vector<float> widths;
  const int n = std::max(1, static_cast<int>(std::log2(hi / lo) * 8));
  for (int rep = 0; rep < 400; ++rep) {
    for (int i = 0; i <= n; ++i) widths.push_back(lo * std::pow(hi / lo, static_cast<double>(i) / std::max(1, n)));
  }
  // As many faces as fit about half of the area.
  double area = 0;
  std::vector<float> fit;
  for (float f : widths) {
    area += 3.0 * f * f;
    if (area > 0.5 * w * h) break;
    fit.push_back(f);
  }
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<FaceCrop> crops = FaceCrops(GroupPhotos());
  Truth t = MakeCollage(w, h, g_roll == 0 ? crops : RolledCrops(crops, g_roll), fit, 7, "collage");
  const double make_ms = Ms(t0);
  const Run r = Detect(Detector(which), t.rgb, o);
  std::map<int, std::pair<int, int>> bins;  // lower bin edge -> (found, faces)
  std::string missed;
  for (const FaceBox& f : t.faces) {
    int edge = 1;
    while (edge * 2 <= f.w) edge *= 2;
    bool hit = false;
    for (const FaceBox& d : r.dets) hit |= IoU(d, f) >= 0.4f;
    if (!hit) missed += absl::StrCat(" (", static_cast<int>(f.x), ",", static_cast<int>(f.y), " ", static_cast<int>(f.w), "px)");
    bins[edge].first += hit;
    bins[edge].second += 1;
  }
  const Score s = ScoreDetections(t, r.dets);
  std::printf("%s collage %dx%d (made in %.0f ms), faces %.0f..%.0f px: %d/%d found, %d false boxes%s\n", which.c_str(), w,
              h, make_ms, lo, hi, s.found, s.faces, s.false_boxes, s.false_list.substr(0, 400).c_str());
  for (const auto& [edge, fc] : bins) std::printf("  faces %5d..%5d px: %d/%d\n", edge, 2 * edge - 1, fc.first, fc.second);
  if (!missed.empty()) std::printf("  missed:%s\n", missed.c_str());
  std::printf("  %zu of %zu passes, largest input %d, %.0f ms (%d threads)\n", r.passes, r.planned, r.max_input, r.ms,
              at::get_num_threads());
  if (!png.empty()) SavePng(png, t, r.dets);
  return 0;
}

int Sweep(const std::string& which, int w, int h, const std::vector<int>& min_faces, MultiScaleOptions o) {
  const FaceDetector& det = Detector(which);
  const std::vector<FaceCrop> crops = FaceCrops(GroupPhotos());
  int total = 0, total_found = 0;
  for (int min_face : min_faces) {
    o.min_face_px = min_face;
    const size_t passes = PlanPasses(det, w, h, o).size();
    int found_here = 0, faces_here = 0;
    std::string misses;
    for (double m = 1.0; m <= 4.0 + 1e-9; m *= 1.15) {
      const float f = static_cast<float>(min_face * m);
      if (f > std::min(w, h) / 1.3) break;
      int found = 0, n = 0;
      for (size_t i = 0; i < crops.size(); i += 4, ++n) {
        Truth t;
        t.rgb = Clutter(w, h, 2000 + static_cast<uint32_t>(i));
        const double k = f / crops[i].face.w;
        const cv::Point at(static_cast<int>(w * 0.4 - (crops[i].face.x + crops[i].face.w / 2) * k),
                           static_cast<int>(h * 0.45 - (crops[i].face.y + crops[i].face.h / 2) * k));
        t.faces.push_back(Paste(t.rgb, crops[i], f, at));
        const Run r = Detect(det, t.rgb, o);
        const Score s = ScoreDetections(t, r.dets);
        found += s.found;
        if (!s.found) misses += absl::StrCat(" ", static_cast<int>(f), "px#", i);
      }
      std::printf("  min %4d face %5.0f px (x%.2f): %d/%d\n", min_face, f, m, found, n);
      found_here += found;
      faces_here += n;
    }
    std::printf("%s %dx%d --min-face-px %d: %d/%d found, %zu passes;%s\n", which.c_str(), w, h, min_face, found_here,
                faces_here, passes, misses.empty() ? " no misses" : (" missed" + misses).c_str());
    total += faces_here;
    total_found += found_here;
  }
  std::printf("%s %dx%d sweep: %d/%d found\n", which.c_str(), w, h, total_found, total);
  return 0;
}

int Photos(const std::string& which, const std::vector<std::string>& files, const MultiScaleOptions& o,
           const std::string& png) {
  for (const std::string& f : files) {
    auto rgb = LoadRgb(f);
    if (!rgb.ok()) return std::fprintf(stderr, "%s\n", rgb.status().ToString().c_str()), 1;
    if (std::getenv("FUSION_BENCH_GREY") != nullptr) {  // as a grey target reaches detection
      cv::Mat g;
      cv::cvtColor(*rgb, g, cv::COLOR_RGB2GRAY);
      cv::cvtColor(g, *rgb, cv::COLOR_GRAY2RGB);
    }
    const Run r = Detect(Detector(which), *rgb, o);
    std::printf("%s %s %dx%d: %zu boxes, %zu of %zu passes, largest input %d, %.0f ms\n", which.c_str(), f.c_str(),
                rgb->cols, rgb->rows, r.dets.size(), r.passes, r.planned, r.max_input, r.ms);
    for (const FaceBox& b : r.dets) std::printf("  (%.0f,%.0f %.0fx%.0f) %.3f\n", b.x, b.y, b.w, b.h, b.score);
    if (!png.empty()) SavePng(png, Truth{f, *rgb, {}, {}}, r.dets);
  }
  return 0;
}

}  // namespace
}  // namespace fusion::faceapi

int main(int argc, char** argv) {
  using namespace fusion::faceapi;
  std::vector<std::string> args;
  std::string png;
  MultiScaleOptions o;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--png") && i + 1 < argc) png = argv[++i];
    else if (!std::strcmp(argv[i], "--min-face-px") && i + 1 < argc) o.min_face_px = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--zoom") && i + 4 < argc) {
      g_zoom = cv::Rect(std::atoi(argv[i + 1]), std::atoi(argv[i + 2]), std::atoi(argv[i + 3]), std::atoi(argv[i + 4]));
      i += 4;
    }
    else if (!std::strcmp(argv[i], "--working-side") && i + 1 < argc) g_working_side = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--max-input") && i + 1 < argc) o.max_input = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--min-score") && i + 1 < argc) o.min_score = std::atof(argv[++i]);
    else if (!std::strcmp(argv[i], "--full-scan")) o.gate_tiles = false;
    else if (!std::strcmp(argv[i], "--roll") && i + 1 < argc) g_roll = std::atof(argv[++i]);
    else if (!std::strcmp(argv[i], "--no-relook")) o.relook_rolls.clear();
    else if (!std::strcmp(argv[i], "--widths") && i + 1 < argc) {
      for (const char* p = argv[++i]; *p != 0;) {
        char* end = nullptr;
        g_widths.push_back(static_cast<int>(std::strtol(p, &end, 10)));
        p = *end == ',' ? end + 1 : end;
      }
    }
    else args.push_back(argv[i]);
  }
  if (args.size() >= 2 && args[0] == "curve") return Curve(args[1], args.size() > 2 ? std::stoi(args[2]) : (args[1] == "ssd" ? 512 : 416), o.min_score);
  if (args.size() >= 5 && args[0] == "collage") {
    return Collage(args[1], std::stoi(args[2]), std::stoi(args[3]), std::stof(args[4]),
                   args.size() > 5 ? std::stof(args[5]) : std::min(std::stoi(args[2]), std::stoi(args[3])) * 0.8f, o, png);
  }
  if (args.size() >= 5 && args[0] == "sweep") {
    std::vector<int> mins;
    for (size_t i = 4; i < args.size(); ++i) mins.push_back(std::stoi(args[i]));
    return Sweep(args[1], std::stoi(args[2]), std::stoi(args[3]), mins, o);
  }
  if (args.size() >= 3 && args[0] == "photo") return Photos(args[1], {args.begin() + 2, args.end()}, o, png);
  std::fprintf(stderr, "usage: see the header of bench/detect/detect_bench.cc\n");
  return 2;
}
