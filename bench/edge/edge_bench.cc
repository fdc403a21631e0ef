// bench/edge: how well the frame-edge check (daemon/pipeline/frame_edge.h) measures faces cut by
// the frame edge. Makes its own set with a known truth: the 21 faces of the six group photos
// (boxes from tests/data/faces/ground_truth.json), Grace Hopper and the astronaut (boxes from the
// tiny detector on the uncut photo, as the ground truth's were made), each rolled by the given
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
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <sstream>
#include <thread>

#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "models/catalogue/catalogue.h"
#include "pipeline/frame_edge.h"
#include "pipeline/model_store.h"
#include "pipeline/parallel.h"
#include "pipeline/stages.h"

namespace {

using namespace fusion;

struct Base {
  std::string name;
  cv::Mat bgr;
  cv::Rect2f box;  // the whole face, photo pixels
};

struct Made {
  cv::Mat bgr;
  std::vector<cv::Point2f> face;  // the face's box rotated with the image, made-image pixels
};

enum Side { kL, kR, kT, kB };
const char* kSideName[] = {"left", "right", "top", "bottom"};

std::string Read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

cv::Rect2f Bound(const std::vector<cv::Point2f>& poly) {
  if (poly.empty()) return {};
  float x0 = poly[0].x, x1 = x0, y0 = poly[0].y, y1 = y0;
  for (const cv::Point2f& p : poly) x0 = std::min(x0, p.x), x1 = std::max(x1, p.x), y0 = std::min(y0, p.y), y1 = std::max(y1, p.y);
  return {x0, y0, x1 - x0, y1 - y0};
}

double Area(const std::vector<cv::Point2f>& poly) { return poly.size() < 3 ? 0 : std::abs(cv::contourArea(poly)); }

// The part of `poly` (convex) with coordinate `axis` (0 x, 1 y) below `t` (keep_below) or above.
std::vector<cv::Point2f> ClipHalf(const std::vector<cv::Point2f>& poly, int axis, float t, bool keep_below) {
  std::vector<cv::Point2f> out;
  auto coord = [axis](const cv::Point2f& p) { return axis == 0 ? p.x : p.y; };
  auto in = [&](const cv::Point2f& p) { return keep_below ? coord(p) <= t : coord(p) >= t; };
  for (size_t i = 0; i < poly.size(); ++i) {
    const cv::Point2f a = poly[i], b = poly[(i + 1) % poly.size()];
    if (in(a)) out.push_back(a);
    if (in(a) != in(b)) {
      const float u = (t - coord(a)) / (coord(b) - coord(a));
      out.push_back(a + u * (b - a));
    }
  }
  return out;
}

// The share of `poly` beyond the line of `side` at `t`.
double ShareBeyond(const std::vector<cv::Point2f>& poly, Side side, float t) {
  const int axis = side == kL || side == kR ? 0 : 1;
  const bool below = side == kL || side == kT;  // outside = below t for the left and top edges
  return Area(ClipHalf(poly, axis, t, below)) / Area(poly);
}

// The share of `poly` outside [0, w) x [0, h).
double ShareOutside(const std::vector<cv::Point2f>& poly, cv::Size s) {
  std::vector<cv::Point2f> in = ClipHalf(poly, 0, 0, false);
  in = ClipHalf(in, 0, s.width, true);
  in = ClipHalf(in, 1, 0, false);
  in = ClipHalf(in, 1, s.height, true);
  return 1 - Area(in) / Area(poly);
}

// `base` rolled by `roll` degrees (counter-clockwise as seen) about its face's centre, framed
// with 0.6 face sizes of context, the frame edge of `side` cutting `share` of the face's box.
Made Make(const Base& base, double roll, Side side, double share) {
  const cv::Point2f c(base.box.x + base.box.width / 2, base.box.y + base.box.height / 2);
  const cv::Mat r = cv::getRotationMatrix2D(c, roll, 1.0);
  std::vector<cv::Point2f> corners = {base.box.tl(), {base.box.x + base.box.width, base.box.y}, base.box.br(),
                                      {base.box.x, base.box.y + base.box.height}};
  std::vector<cv::Point2f> face;
  cv::transform(corners, face, r);
  const cv::Rect2f bound = Bound(face);
  const float pad = 0.6f * std::max(base.box.width, base.box.height);
  float x0 = bound.x - pad, x1 = bound.x + bound.width + pad, y0 = bound.y - pad, y1 = bound.y + bound.height + pad;
  if (share > 0) {
    const bool x = side == kL || side == kR;
    float lo = x ? bound.x : bound.y, hi = x ? bound.x + bound.width : bound.y + bound.height;
    for (int i = 0; i < 50; ++i) {  // bisection: the share beyond t grows with t (left/top)
      const float t = (lo + hi) / 2;
      const double s = ShareBeyond(face, side, t);
      const bool grow = side == kL || side == kT ? s < share : s > share;
      (grow ? lo : hi) = t;
    }
    const float t = std::round((lo + hi) / 2);  // whole pixels: the crop's edge
    if (side == kL) x0 = t;
    if (side == kR) x1 = t;
    if (side == kT) y0 = t;
    if (side == kB) y1 = t;
  }
  x0 = std::round(x0), y0 = std::round(y0), x1 = std::round(x1), y1 = std::round(y1);
  cv::Mat m = r.clone();
  m.at<double>(0, 2) -= x0;
  m.at<double>(1, 2) -= y0;
  Made out;
  cv::warpAffine(base.bgr, out.bgr, m, cv::Size(static_cast<int>(x1 - x0), static_cast<int>(y1 - y0)), cv::INTER_LINEAR,
                 cv::BORDER_REFLECT101);
  for (cv::Point2f& p : face) p -= cv::Point2f(x0, y0);
  out.face = face;
  return out;
}

Picture Pic(const cv::Mat& bgr) {
  Picture p;
  p.what = "target image";
  p.bgr = bgr;
  cv::cvtColor(bgr, p.rgb, cv::COLOR_BGR2RGB);
  return p;
}

float IoU(const faceapi::FaceBox& a, const cv::Rect2f& b) {
  const cv::Rect2f ra(a.x, a.y, a.w, a.h);
  const float i = (ra & b).area();
  return i <= 0 ? 0 : i / (ra.area() + b.area() - i);
}

struct Result {
  std::string base, what;
  double roll = 0, truth = 0;
  Side side = kL;
  bool found = false, turned = false, set_aside = false;
  float estimate = -1;
  faceapi::FaceBox box;
  faceapi::Landmarks68 points{};
};

struct Models {
  std::shared_ptr<const ModelCopy> ssd, tiny, landmarks;
};

Result Run(const Models& m, const Base& base, double roll, Side side, double share, const std::string& png_dir) {
  Made made = Make(base, roll, side, share);
  Result r{.base = base.name, .roll = roll, .truth = ShareOutside(made.face, made.bgr.size()), .side = side};
  Picture p = Pic(made.bgr);
  if (!DetectFaces(*m.ssd, 0, DetectSettings{}, p).ok()) return r;
  // The visible part of the face's box, its bounding box: the detection that overlaps it most.
  std::vector<cv::Point2f> vis = ClipHalf(made.face, 0, 0, false);
  vis = ClipHalf(vis, 0, p.rgb.cols, true);
  vis = ClipHalf(vis, 1, 0, false);
  vis = ClipHalf(vis, 1, p.rgb.rows, true);
  const cv::Rect2f visible = Bound(vis);
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
    cv::imwrite(absl::StrFormat("%s/%s_r%+.0f_%s%02.0f.png", png_dir, base.name, roll, kSideName[side], share * 100), v);
  }
  return r;
}

std::vector<Base> Bases(const Models& m, const std::string& testdata) {
  std::vector<Base> out;
  const auto gt = nlohmann::json::parse(Read(FUSION_SOURCE_DIR "/tests/data/faces/ground_truth.json"));
  for (const auto& [file, entry] : gt["images"].items()) {
    const cv::Mat bgr = cv::imread(testdata + "/faces/" + file, cv::IMREAD_COLOR);
    if (bgr.empty()) throw std::runtime_error("cannot read " + testdata + "/faces/" + file);
    int k = 0;
    for (const auto& b : entry["faces"]) {
      const std::string name = absl::StrFormat("%s#%d", file.substr(file.find("sample"), 7), k++);
      out.push_back({name, bgr, cv::Rect2f(b[0], b[1], b[2], b[3])});
    }
  }
  for (const auto& [name, file] : std::vector<std::pair<std::string, std::string>>{
           {"grace", "grace_hopper_512x600.jpg"}, {"astronaut", "astronaut_eileen_collins_512.png"}}) {
    const cv::Mat bgr = cv::imread(FUSION_SOURCE_DIR "/tests/data/faces/" + file, cv::IMREAD_COLOR);
    Picture p = Pic(bgr);
    if (!DetectFaces(*m.tiny, 0, DetectSettings{}, p).ok() || p.faces.size() != 1) {
      throw std::runtime_error("the tiny detector does not find one face in " + file);
    }
    const faceapi::FaceBox& b = p.faces[0].box;
    out.push_back({name, bgr, cv::Rect2f(b.x, b.y, b.w, b.h)});
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
  std::vector<cv::Point2f> box_sum(4, {0, 0}), ssd_sum(4, {0, 0});
  for (size_t i = 0; i < shapes.size(); ++i) {
    const Similarity t = FitSimilarity(shapes[i], mean);
    std::vector<cv::Point2f> a, d;
    for (int k = 0; k < 4; ++k) a.push_back(t(boxes[i][k])), d.push_back(t(ssd_boxes[i][k]));
    for (int k = 0; k < 4; ++k) box_sum[k] += a[k], ssd_sum[k] += d[k];
    std::printf("// %s box in the template: (%.3f,%.3f)-(%.3f,%.3f), ssd (%.3f,%.3f)-(%.3f,%.3f)\n",
                names[i].c_str(), a[0].x, a[0].y, a[2].x, a[2].y, d[0].x, d[0].y, d[2].x, d[2].y);
  }
  std::printf("// %zu faces\nkMeanFace = {", shapes.size());
  for (int k = 0; k < 68; ++k) std::printf("%s{%.4ff, %.4ff}", k % 4 ? ", " : ",\n    ", mean[k].x, mean[k].y);
  std::printf("};\nkFaceBox = {");
  for (int k = 0; k < 4; ++k) std::printf("{%.4ff, %.4ff}, ", box_sum[k].x / shapes.size(), box_sum[k].y / shapes.size());
  std::printf("};\nkSsdBox = {");
  for (int k = 0; k < 4; ++k) std::printf("{%.4ff, %.4ff}, ", ssd_sum[k].x / shapes.size(), ssd_sum[k].y / shapes.size());
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
  Models m{*(*store)->HostCopy("ssd_mobilenetv1"), *(*store)->HostCopy("tiny_face_detector"),
           *(*store)->HostCopy("face_landmark_68")};
  std::vector<Base> bases = Bases(m, testdata);
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
      for (Side side : {kL, kR, kT, kB}) {
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
    std::printf("%-10s %+5.0f %-6s %5.2f %5.2f %+6.2f %s\n", r.base.c_str(), r.roll, kSideName[r.side], r.truth,
                r.estimate, r.estimate >= 0 ? r.estimate - r.truth : 0.0, verdict);
  }
  // Per side and roll: mean |error|, worst error, bias, over the faces found and landmarked.
  std::printf("\n%-6s %5s %5s %7s %7s %7s\n", "side", "roll", "n", "mean|e|", "max|e|", "bias");
  double all_abs = 0, all_max = 0;
  size_t all_n = 0;
  for (Side side : {kL, kR, kT, kB}) {
    for (double roll : Numbers(rolls_s)) {
      double sum = 0, abs_sum = 0, worst = 0;
      size_t n = 0;
      for (const Result& r : results) {
        if (r.side != side || r.roll != roll || r.estimate < 0) continue;
        const double e = r.estimate - r.truth;
        sum += e, abs_sum += std::abs(e), worst = std::max(worst, std::abs(e)), ++n;
      }
      all_abs += abs_sum, all_max = std::max(all_max, worst), all_n += n;
      std::printf("%-6s %+5.0f %5zu %7.3f %7.3f %+7.3f\n", kSideName[side], roll, n, n ? abs_sum / n : 0, worst,
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
