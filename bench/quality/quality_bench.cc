// bench/quality: the swap quality a person sees, in figures and in one picture.
// Runs the real pipeline (PipelineRunner on the CPU device, default options unless flags say
// otherwise) over (source, target) pairs: the group photos with their ground truth, Grace, and
// images this tool makes from them (colour casts, greyscale, rotated heads on a canvas, a
// collage of faces from 40 px up on a cluttered background, a 10 x 5 grid of 150-px faces, a
// face filling the frame, the fetched 11-MP mosaic, one 1200-px face in an 80-MP image; ground
// truth from how they were made). Writes a Markdown table (per face: size, found or missed against ground truth,
// identity distance of the target face and of the result to the source, blotch fraction,
// p99.5 chroma distance, job ms) with totals, and a contact sheet PNG (target | result crops,
// values printed under each).
// Usage: quality_bench [--out-dir DIR] [--models-dir DIR] [--testdata DIR] [--simple]
//                      [--sources astronaut,grace,cameraman] [--only SUBSTRING]
//                      [--crops-dir DIR] [--sheet-side PX]
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <random>
#include <sstream>

#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "device/cpu_device_memory.h"
#include "models/catalogue/catalogue.h"
#include "models/quality/blotch.h"
#include "loader/model_store.h"
#include "pipeline/pipeline_runner.h"

namespace {

using namespace fusion;

struct Case {
  std::string name;
  cv::Mat bgr;
  std::vector<cv::Rect2f> faces;   // ground truth, target pixels
  std::vector<cv::Rect2f> ignore;  // a detection here is neither a hit nor a false box
  bool first_source_only = false;  // a slow case (the 80-MP image) runs with the first source
};

struct Row {
  std::string image, source;
  cv::Rect2f box;   // ground truth (missed) or the detection (found, false)
  bool found = false, truth = true;
  float target_d = 0, result_d = 0;
  double blotch = 0, p995 = 0, ms = 0;
  cv::Mat target_crop, result_crop;
};

double IoU(const cv::Rect2f& a, const cv::Rect2f& b) {
  const float i = (a & b).area();
  return i <= 0 ? 0 : i / (a.area() + b.area() - i);
}

std::string Read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string Png(const cv::Mat& m) {
  std::vector<uchar> out;
  cv::imencode(".png", m, out);
  return {out.begin(), out.end()};
}

// `b` grown by pad_x / pad_y pixels on each side, clipped to `img`.
cv::Rect Around(const cv::Rect2f& b, double pad_x, double pad_y, const cv::Mat& img) {
  return cv::Rect(cv::Point(b.x - pad_x, b.y - pad_y), cv::Point(b.x + b.width + pad_x, b.y + b.height + pad_y)) &
         cv::Rect(0, 0, img.cols, img.rows);
}

// A colour cast: per-channel gains (B, G, R).
cv::Mat Cast(const cv::Mat& bgr, double b, double g, double r) {
  cv::Mat out;
  bgr.convertTo(out, CV_32FC3);
  out = out.mul(cv::Scalar(b, g, r));
  out.convertTo(out, CV_8UC3);
  return out;
}

cv::Mat Grey(const cv::Mat& bgr) {
  cv::Mat g, out;
  cv::cvtColor(bgr, g, cv::COLOR_BGR2GRAY);
  cv::cvtColor(g, out, cv::COLOR_GRAY2BGR);
  return out;
}

// `src` rotated by `deg` about the centre of `face`, on a canvas 1.6x its size; the face's box
// keeps its size and follows its centre.
Case Rotated(const std::string& name, const cv::Mat& src, const cv::Rect2f& face, double deg) {
  const cv::Size canvas(src.cols * 8 / 5, src.rows * 8 / 5);
  const cv::Point2f c(face.x + face.width / 2, face.y + face.height / 2);
  cv::Mat m = cv::getRotationMatrix2D(c, deg, 1.0);
  m.at<double>(0, 2) += (canvas.width - src.cols) / 2.0;
  m.at<double>(1, 2) += (canvas.height - src.rows) / 2.0;
  Case out{name, {}, {}, {}};
  cv::warpAffine(src, out.bgr, m, canvas, cv::INTER_LINEAR, cv::BORDER_REPLICATE);  // a reflection would add faces
  const cv::Point2f nc(m.at<double>(0, 0) * c.x + m.at<double>(0, 1) * c.y + m.at<double>(0, 2),
                       m.at<double>(1, 0) * c.x + m.at<double>(1, 1) * c.y + m.at<double>(1, 2));
  out.faces = {cv::Rect2f(nc.x - face.width / 2, nc.y - face.height / 2, face.width, face.height)};
  return out;
}

// Faces cut from `donors` (padded by 60% of the box), scaled so the box side is each of
// `sides`, pasted without overlap on a cluttered background (coloured noise blurred at two
// scales, plus lines) of `w` x `h`. Ground truth: every donor face at least 80% inside a piece;
// faces cut by a piece's edge are ignore regions.
// A cluttered background of w x h: coloured noise blurred (a 1/16 grid, cubic), plus `lines`
// random lines whose width scales with the image.
cv::Mat Clutter(int w, int h, int lines, unsigned seed) {
  std::mt19937 rng(seed);
  cv::Mat noise(std::max(2, h / 16), std::max(2, w / 16), CV_8UC3), bg;
  cv::randu(noise, 0, 255);
  cv::resize(noise, bg, cv::Size(w, h), 0, 0, cv::INTER_CUBIC);
  const int wide = std::max(1, std::max(w, h) / 1600);
  for (int i = 0; i < lines; ++i) {
    cv::line(bg, {int(rng() % w), int(rng() % h)}, {int(rng() % w), int(rng() % h)},
             cv::Scalar(rng() % 255, rng() % 255, rng() % 255), wide * (1 + rng() % 6));
  }
  return bg;
}

// `piece` (cut from a donor at `crop`, scaled by `s`) placed at (x, y): every donor face at
// least 80% inside the crop becomes ground truth, one cut by its edge an ignore region.
void AddTruth(const Case& donor, const cv::Rect& crop, double s, int x, int y, Case& out) {
  for (const cv::Rect2f& g : donor.faces) {
    const float inside = (g & cv::Rect2f(crop)).area();
    if (inside <= 0) continue;
    const cv::Rect2f mapped(x + (g.x - crop.x) * s, y + (g.y - crop.y) * s, g.width * s, g.height * s);
    (inside >= 0.8f * g.area() ? out.faces : out.ignore).push_back(mapped);
  }
}

Case Collage(const std::vector<Case>& donors, const std::vector<int>& sides, int w, int h) {
  Case out{"collage", Clutter(w, h, 60, 7), {}, {}};
  int x = 8, y = 8, row_h = 0, k = 0;
  for (int side : sides) {
    const Case& d = donors[k % donors.size()];
    const cv::Rect2f f = d.faces[(k / donors.size()) % d.faces.size()];
    ++k;
    const cv::Rect crop = Around(f, 0.6 * f.width, 0.6 * f.height, d.bgr);
    const double s = side / std::max(f.width, f.height);
    cv::Mat piece;
    cv::resize(d.bgr(crop), piece, cv::Size(), s, s, s < 1 ? cv::INTER_AREA : cv::INTER_CUBIC);
    if (x + piece.cols > w) x = 8, y += row_h + 8, row_h = 0;
    if (y + piece.rows > h) break;
    piece.copyTo(out.bgr(cv::Rect(x, y, piece.cols, piece.rows)));
    AddTruth(d, crop, s, x, y, out);  // the padding takes in neighbours
    x += piece.cols + 8;
    row_h = std::max(row_h, piece.rows);
  }
  return out;
}

// The first miss: a grid of `cols` x `rows` cells of `cell` px, each holding one donor
// face scaled to `side` px (cut with 35% of the box around it, so the piece fits its cell),
// on the clutter background. 10 x 5 cells of 256 px, faces of 150 px: 2560 x 1280, 50 faces.
Case GridCollage(const std::vector<Case>& donors, int cols, int rows, int cell, int side) {
  Case out{"grid50", Clutter(cols * cell, rows * cell, 40, 11), {}, {}};
  std::vector<std::pair<int, int>> all;  // (donor, face): every donor face, round robin
  for (size_t f = 0, added = 1; added; ++f) {
    added = 0;
    for (size_t d = 0; d < donors.size(); ++d) {
      if (f < donors[d].faces.size()) all.emplace_back(int(d), int(f)), ++added;
    }
  }
  std::vector<std::pair<int, int>> faces;  // then again from the first, to fill every cell
  for (size_t i = 0; !all.empty() && faces.size() < size_t(cols * rows); ++i) faces.push_back(all[i % all.size()]);
  for (int i = 0; i < cols * rows; ++i) {
    const Case& d = donors[faces[i].first];
    const cv::Rect2f f = d.faces[faces[i].second];
    const double s = side / std::max(f.width, f.height);
    const float pad = 0.5f * (cell / s - std::max(f.width, f.height)) - 1;  // the piece fills its cell
    const cv::Rect crop = Around(f, pad, pad, d.bgr);
    cv::Mat piece;
    cv::resize(d.bgr(crop), piece, cv::Size(), s, s, cv::INTER_AREA);
    const int x = (i % cols) * cell + (cell - piece.cols) / 2, y = (i / cols) * cell + (cell - piece.rows) / 2;
    const cv::Rect dst = cv::Rect(x, y, piece.cols, piece.rows) & cv::Rect((i % cols) * cell, (i / cols) * cell, cell, cell);
    piece(cv::Rect(dst.x - x, dst.y - y, dst.width, dst.height)).copyTo(out.bgr(dst));
    AddTruth(d, crop, s, x, y, out);
  }
  return out;
}

// The mosaic that scripts/fetch-models.sh makes (samples 1-4 in a 2 x 2 grid, each centred on
// a black 1920 x 1448 cell; an odd remainder puts the extra row on top): its ground truth is
// the samples' moved by each cell's offset.
Case Mosaic(const std::string& testdata, const std::vector<Case>& samples) {
  Case out{"mosaic", cv::imread(testdata + "/faces/mosaic_3840x2896.jpg"), {}, {}};
  if (out.bgr.empty() || samples.size() < 4) return out;
  for (int i = 0; i < 4; ++i) {
    const cv::Mat& img = samples[i].bgr;
    const float y = (i / 2) * 1448 + (1448 - img.rows + 1) / 2, x = (i % 2) * 1920 + (1920 - img.cols + 1) / 2;
    for (const cv::Rect2f& g : samples[i].faces) out.faces.emplace_back(g.x + x, g.y + y, g.width, g.height);
    for (const cv::Rect2f& g : samples[i].ignore) out.ignore.emplace_back(g.x + x, g.y + y, g.width, g.height);
  }
  return out;
}

// One donor face scaled to `side` px (cut with 60% of the box around it) pasted at the
// centre-left of a w x h clutter image: the 80 MP class (7728 x 10304, a 1200-px face).
Case Pasted(const std::string& name, const Case& donor, int side, int w, int h) {
  Case out{name, Clutter(w, h, 60, 13), {}, {}};
  const cv::Rect2f f = donor.faces[0];
  const cv::Rect crop = Around(f, 0.6 * f.width, 0.6 * f.height, donor.bgr);
  const double s = side / std::max(f.width, f.height);
  cv::Mat piece;
  cv::resize(donor.bgr(crop), piece, cv::Size(), s, s, cv::INTER_CUBIC);
  const int x = w / 5, y = (h - piece.rows) / 3;
  piece.copyTo(out.bgr(cv::Rect(x, y, piece.cols, piece.rows)));
  AddTruth(donor, crop, s, x, y, out);
  return out;
}

// A face that is nearly the whole frame: the donor cut to its box plus 15%, scaled to `side`.
Case FullFrame(const std::string& name, const Case& donor, int side) {
  const cv::Rect2f f = donor.faces[0];
  const cv::Rect crop = Around(f, 0.15 * f.width, 0.15 * f.height, donor.bgr);
  const double s = double(side) / std::max(crop.width, crop.height);
  Case out{name, {}, {}, {}};
  cv::resize(donor.bgr(crop), out.bgr, cv::Size(), s, s, cv::INTER_CUBIC);
  AddTruth(donor, crop, s, 0, 0, out);
  return out;
}

std::vector<Case> MakeCases(const std::string& testdata) {
  std::vector<Case> cases;
  const auto gt = nlohmann::json::parse(Read(FUSION_SOURCE_DIR "/tests/data/faces/ground_truth.json"));
  for (int i = 1; i <= 6; ++i) {
    Case c{absl::StrFormat("sample%d", i), cv::imread(absl::StrFormat("%s/faces/sample%d.jpg", testdata, i)), {}, {}};
    if (c.bgr.empty()) continue;
    const auto& g = gt["images"][absl::StrFormat("faceapi_group_sample%d.jpg", i)];
    for (const auto& b : g["faces"]) c.faces.emplace_back(b[0], b[1], b[2], b[3]);
    for (const auto& b : g["ignore"]) c.ignore.emplace_back(b[0], b[1], b[2], b[3]);
    cases.push_back(std::move(c));
  }
  const cv::Mat grace = cv::imread(FUSION_SOURCE_DIR "/tests/data/faces/grace_hopper_512x600.jpg");
  const cv::Rect2f grace_box(142.2f, 137.1f, 240.7f, 214.7f);  // golden_faceapi.json
  cases.push_back({"grace", grace, {grace_box}, {}});
  if (cases.size() < 7) return cases;  // group photos not fetched: Grace only
  const Case s1 = cases[0], s3 = cases[2], s5 = cases[4];
  cases.push_back({"sample3-warm", Cast(s3.bgr, 0.70, 0.95, 1.25), s3.faces, s3.ignore});
  cases.push_back({"sample1-cold", Cast(s1.bgr, 1.25, 1.0, 0.72), s1.faces, s1.ignore});
  cases.push_back({"sample5-grey", Grey(s5.bgr), s5.faces, s5.ignore});
  for (double deg : {-30.0, 30.0}) {
    cases.push_back(Rotated(absl::StrFormat("grace-roll%+d", int(deg)), grace, grace_box, deg));
  }
  const std::vector<Case> donors(cases.begin(), cases.begin() + 6);
  cases.push_back(Collage(donors, {40, 48, 56, 64, 80, 100, 120, 160, 200, 260, 320}, 1600, 1000));
  std::vector<Case> grid_donors = donors;
  grid_donors.push_back(cases[6]);  // Grace
  cases.push_back(GridCollage(grid_donors, 10, 5, 256, 150));
  cases.push_back(FullFrame("grace-full-frame", cases[6], 512));
  if (Case m = Mosaic(testdata, donors); !m.bgr.empty()) cases.push_back(std::move(m));
  cases.push_back(Pasted("grace-in-80mp", cases[6], 1200, 7728, 10304));
  cases.back().first_source_only = true;  // its detection pyramid is most of a job of minutes
  return cases;
}

// The target and result around `box` (padded by 25%), each `side` px square.
std::pair<cv::Mat, cv::Mat> Crops(const cv::Mat& target, const cv::Mat& result, const cv::Rect2f& box, int side) {
  const float pad = 0.25f * std::max(box.width, box.height);
  const cv::Rect r = Around(box, pad, pad, target);
  cv::Mat a, b;
  cv::resize(target(r), a, cv::Size(side, side), 0, 0, cv::INTER_AREA);
  cv::resize(result(r), b, cv::Size(side, side), 0, 0, cv::INTER_AREA);
  return {a, b};
}

void ContactSheet(const std::vector<Row>& rows, const std::string& path, int side) {
  constexpr int kText = 34, kCols = 6;
  const int cell_w = 2 * side + 8, cell_h = side + kText + 8;
  const int n = static_cast<int>(rows.size()), grid_rows = (n + kCols - 1) / kCols;
  cv::Mat sheet(std::max(1, grid_rows) * cell_h, kCols * cell_w, CV_8UC3, cv::Scalar(255, 255, 255));
  for (int i = 0; i < n; ++i) {
    const Row& r = rows[i];
    const cv::Point o((i % kCols) * cell_w + 4, (i / kCols) * cell_h + 4);
    for (int k = 0; k < 2; ++k) {
      const cv::Mat& crop = k == 0 ? r.target_crop : r.result_crop;
      if (crop.empty()) continue;
      cv::Mat small;
      cv::resize(crop, small, cv::Size(side, side), 0, 0, cv::INTER_AREA);
      small.copyTo(sheet(cv::Rect(o.x + k * side, o.y, side, side)));
    }
    const cv::Scalar ink = !r.found ? cv::Scalar(0, 0, 200) : r.blotch > 0.03 || r.result_d >= 0.6 ? cv::Scalar(0, 110, 220) : cv::Scalar(30, 30, 30);
    const std::string l1 = absl::StrFormat("%s %s %dpx", r.image, r.source.substr(0, 5), int(std::max(r.box.width, r.box.height)));
    const std::string l2 = !r.truth ? std::string("FALSE BOX") : !r.found ? std::string("MISSED")
                         : absl::StrFormat("id %.2f>%.2f bl %.1f%% p%.0f", r.target_d, r.result_d, 100 * r.blotch, r.p995);
    cv::putText(sheet, l1, o + cv::Point(0, side + 13), cv::FONT_HERSHEY_PLAIN, 0.9, ink, 1, cv::LINE_AA);
    cv::putText(sheet, l2, o + cv::Point(0, side + 28), cv::FONT_HERSHEY_PLAIN, 0.9, ink, 1, cv::LINE_AA);
  }
  cv::imwrite(path + ".png", sheet);
  cv::imwrite(path + ".jpg", sheet, {cv::IMWRITE_JPEG_QUALITY, 85});  // docs/quality: a third of the bytes
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"swap quality over the bench's image set: table + contact sheet"};
  std::string out_dir = ".", models_dir = FUSION_MODELS_DIR, testdata = FUSION_TESTDATA_DIR, only, sources_arg = "astronaut,grace,cameraman";
  bool simple = false;
  app.add_option("--out-dir", out_dir, "where quality.md and contact_sheet.png/.jpg go");
  app.add_option("--models-dir", models_dir, "fetched weights (scripts/fetch-models.sh)");
  app.add_option("--testdata", testdata, "fetched test photos (faces/sample1..6.jpg)");
  app.add_option("--sources", sources_arg, "comma-separated: astronaut, grace, cameraman");
  app.add_option("--only", only, "run only images whose name contains this");
  app.add_flag("--simple", simple, "simple (feathered) blending");
  std::string crops_dir;
  int sheet_side = 128;
  app.add_option("--sheet-side", sheet_side, "side of each crop on the contact sheet, px (>= 96 keeps the text legible)");
  app.add_option("--crops-dir", crops_dir, "also write each target image and each face's target | result pair (256 px) as PNG here");
  CLI11_PARSE(app, argc, argv);
  // The output directories are made here: a missing one used to end a 25-minute run with nothing
  // written and no error.
  for (const std::string& dir : {out_dir, crops_dir}) {
    std::error_code ec;
    if (!dir.empty() && !std::filesystem::create_directories(dir, ec) && ec) {
      return std::fprintf(stderr, "quality_bench: cannot create %s: %s\n", dir.c_str(), ec.message().c_str()), 2;
    }
  }

  constexpr uint64_t kBudget = 1ull << 30;
  auto cat = models::ModelCatalogue::Create({FUSION_SOURCE_DIR "/models/manifest.json", models_dir});
  if (!cat.ok()) return std::fprintf(stderr, "quality_bench: %s\n", cat.status().ToString().c_str()), 1;
  auto meter = MakeCpuDeviceMeter(kBudget);
  auto store = ModelStore::Create(cat->get(), {.device = "cpu", .meter = meter.get()});
  auto residency = ResidencyManager::Create({.device_budget_bytes = kBudget, .loader = store->get()});
  if (absl::Status st = (*store)->RegisterAll(**residency); !st.ok()) return std::fprintf(stderr, "%s\n", st.ToString().c_str()), 1;
  FaultInjector faults;
  PipelineRunner runner(store->get(), residency->get(), meter.get(), &faults, {});
  struct NoContext : jobs::JobRunner::Context {
    bool Cancelled() const override { return false; }
    void StageStarted(const std::string&, float) override {}
    void StageFinished(const v1::StageReport&, float) override {}
    void Degradation(const std::string&) override {}
  } ctx;

  const std::map<std::string, std::string> source_files = {
      {"astronaut", FUSION_SOURCE_DIR "/tests/data/faces/astronaut_eileen_collins_512.png"},
      {"grace", FUSION_SOURCE_DIR "/tests/data/faces/grace_hopper_512x600.jpg"},
      {"cameraman", FUSION_SOURCE_DIR "/tests/data/faces/cameraman_profile_512_gray.png"}};
  std::vector<Row> rows;
  for (const Case& c : MakeCases(testdata)) {
    if (!only.empty() && c.name.find(only) == std::string::npos) continue;
    const std::string target = Png(c.bgr);
    if (!crops_dir.empty()) cv::imwrite(absl::StrFormat("%s/%s.png", crops_dir, c.name), c.bgr);
    const std::vector<std::string> sources = absl::StrSplit(sources_arg, ',');
    for (const std::string& source : sources) {
      if (source == "grace" && c.name.rfind("grace", 0) == 0) continue;  // herself
      if (c.first_source_only && source != sources.front()) continue;
      v1::JobOptions o;
      o.set_ratio(1.0f);
      o.set_simple(simple);
      const auto t0 = std::chrono::steady_clock::now();
      auto out = runner.Swap(Owner{"bench", 0}, Read(source_files.at(source)), target, o, ctx);
      const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      cv::Mat result = out.ok() ? cv::imdecode(cv::Mat(1, int(out->image.size()), CV_8U, out->image.data()), cv::IMREAD_COLOR) : cv::Mat();
      std::fprintf(stderr, "%-14s %-9s %s %.0f ms\n", c.name.c_str(), source.c_str(),
                   out.ok() ? absl::StrFormat("%u faces", out->report.faces_swapped()).c_str() : out.status().ToString().c_str(), ms);
      std::vector<bool> matched(c.faces.size(), false);
      if (out.ok()) {
        for (const v1::FaceReport& f : out->report.faces()) {
          const cv::Rect2f box(f.box(0), f.box(1), f.box(2), f.box(3));
          int best = -1;
          for (size_t g = 0; g < c.faces.size(); ++g) {
            if (!matched[g] && IoU(box, c.faces[g]) >= 0.4 && (best < 0 || IoU(box, c.faces[g]) > IoU(box, c.faces[best]))) best = int(g);
          }
          const bool ignored = std::any_of(c.ignore.begin(), c.ignore.end(), [&](const cv::Rect2f& r) { return (box & r).area() > 0.5 * box.area(); });
          if (best < 0 && ignored) continue;
          Row r{c.name, source, box, best >= 0, best >= 0, f.target_identity_distance(), f.identity_distance(), 0, 0, ms, {}, {}};
          if (best >= 0) matched[best] = true;
          auto score = quality::ScoreBlotches(result, c.bgr, box);
          if (score.ok()) r.blotch = score->fraction, r.p995 = score->p995;
          std::tie(r.target_crop, r.result_crop) = Crops(c.bgr, result, box, 128);
          if (!crops_dir.empty()) {
            auto [a, b] = Crops(c.bgr, result, box, 256);
            cv::Mat pair;
            cv::hconcat(a, b, pair);
            cv::imwrite(absl::StrFormat("%s/%s_%s_%d.png", crops_dir, c.name, source, rows.size()), pair);
          }
          rows.push_back(r);
        }
      }
      for (size_t g = 0; g < c.faces.size(); ++g) {
        if (matched[g]) continue;
        Row r{c.name, source, c.faces[g], false, true, 0, 0, 0, 0, ms, {}, {}};
        std::tie(r.target_crop, r.result_crop) = Crops(c.bgr, c.bgr, c.faces[g], 128);
        rows.push_back(r);
      }
    }
  }

  std::ostringstream md;
  md << "| image | source | face px | found | target→source | result→source | blotch % | p99.5 | job ms |\n"
     << "|---|---|---:|---|---:|---:|---:|---:|---:|\n";
  int truth = 0, found = 0, false_boxes = 0, swapped = 0, clean = 0, same = 0, small = 0, small_same = 0;
  double margin = 0;
  for (const Row& r : rows) {
    const int px = int(std::lround(std::max(r.box.width, r.box.height)));
    md << absl::StrFormat("| %s | %s | %d | %s | %s | %s | %s | %s | %.0f |\n", r.image, r.source, px,
                          !r.truth ? "FALSE" : r.found ? "yes" : "MISSED",
                          r.found ? absl::StrFormat("%.3f", r.target_d) : "", r.found ? absl::StrFormat("%.3f", r.result_d) : "",
                          r.found ? absl::StrFormat("%.1f", 100 * r.blotch) : "", r.found ? absl::StrFormat("%.0f", r.p995) : "", r.ms);
    truth += r.truth;
    false_boxes += !r.truth;
    if (!r.found) continue;
    ++found, ++swapped;
    clean += r.blotch <= 0.03 && r.p995 <= 30;
    same += r.result_d < 0.6;
    margin += r.target_d - r.result_d;
    if (px < 80) ++small, small_same += r.result_d < 0.6;
  }
  md << absl::StrFormat(
      "\nFaces found %d of %d (%.1f%%), false boxes %d. Of %d swapped faces: %d (%.1f%%) with blotch "
      "fraction ≤ 3%% and p99.5 ≤ 30; %d (%.1f%%) at identity distance < 0.6 (faces < 80 px: %d of %d); "
      "mean margin (target − result distance) %.3f.\n",
      found, truth, 100.0 * found / std::max(1, truth), false_boxes, swapped, clean, 100.0 * clean / std::max(1, swapped),
      same, 100.0 * same / std::max(1, swapped), small_same, small, margin / std::max(1, swapped));
  if (!(std::ofstream(out_dir + "/quality.md") << md.str())) {
    return std::fprintf(stderr, "quality_bench: cannot write %s/quality.md\n", out_dir.c_str()), 1;
  }
  ContactSheet(rows, out_dir + "/contact_sheet", std::max(96, sheet_side));
  std::printf("%s", md.str().c_str());
  return 0;
}
