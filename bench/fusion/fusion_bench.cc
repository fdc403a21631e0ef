// Prints wall and CPU time per fusion stage for one face: astronaut -> Grace Hopper, aligned
// 256 crops, classical generator, blend (simple, full), ESRGAN slim x2 / slim x4 / medium x4 on
// a face crop. Median of --runs runs after one warm-up. Usage:
//   fusion_bench [--threads N] [--runs N] [--models-dir DIR] [--esrgan-px 128] [--out swap.png]
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <time.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "models/blend/blend.h"
#include "models/catalogue/catalogue.h"
#include "models/faceapi/face_landmark_68.h"
#include "models/faceapi/face_recognition.h"
#include "models/faceapi/tiny_face_detector.h"
#include "models/generator/classical_generator.h"
#include "models/generator/face_crop.h"
#include "models/keras/enhancer.h"

namespace {

using namespace fusion;

double CpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

// Runs `fn` once to warm up, then `runs` times; prints median wall and CPU milliseconds.
// Median of `runs` timed calls of fn after one untimed; `reset` (untimed) runs before each call.
void Measure(const std::string& stage, int runs, const std::function<void()>& fn,
             const std::function<void()>& reset = [] {}) {
  reset();
  fn();
  std::vector<double> wall, cpu;
  for (int i = 0; i < runs; ++i) {
    reset();
    const auto t0 = std::chrono::steady_clock::now();
    const double c0 = CpuSeconds();
    fn();
    cpu.push_back((CpuSeconds() - c0) * 1e3);
    wall.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(wall.begin(), wall.end());
  std::sort(cpu.begin(), cpu.end());
  std::printf("%-34s wall %9.2f ms   cpu %9.2f ms\n", stage.c_str(), wall[runs / 2], cpu[runs / 2]);
}

std::vector<cv::Point2f> Landmarks(const std::string& image) {
  std::ifstream f(FUSION_SOURCE_DIR "/tests/data/fusion/landmarks68.json");
  const auto j = nlohmann::json::parse(f);
  std::vector<cv::Point2f> pts;
  for (const auto& p : j.at("images").at(image).at(0).at("landmarks")) pts.emplace_back(p[0], p[1]);
  return pts;
}

template <typename T>
T Must(absl::StatusOr<T> v) {
  if (!v.ok()) {
    std::fprintf(stderr, "fusion_bench: %s\n", std::string(v.status().message()).c_str());
    std::exit(1);
  }
  return std::move(*v);
}

// Detector (input 416), landmarks and descriptor for the target face.
void FaceApiStages(const cv::Mat& bgr, const std::string& models_dir, int runs) {
  auto cat = models::ModelCatalogue::Create({FUSION_SOURCE_DIR "/models/manifest.json", models_dir});
  if (!cat.ok()) return;
  auto det = faceapi::TinyFaceDetector::Load(**cat, {});
  auto lm = faceapi::FaceLandmark68Net::Load(**cat);
  auto rec = faceapi::FaceRecognitionNet::Load(**cat);
  if (!det.ok() || !lm.ok() || !rec.ok()) {
    std::printf("face-api stages skipped: run scripts/fetch-models.sh\n");
    return;
  }
  cv::Mat rgb;
  cv::cvtColor(bgr, rgb, cv::COLOR_BGR2RGB);
  std::vector<faceapi::FaceBox> boxes;
  faceapi::Landmarks68 pts;
  Measure("detect: tiny_face_detector @416", runs, [&] { boxes = Must((*det)->Detect(rgb)); });
  if (boxes.empty()) return;
  Measure("landmarks: face_landmark_68", runs, [&] { pts = Must((*lm)->Detect(rgb, boxes[0])); });
  Measure("encode: face_recognition", runs, [&] { Must((*rec)->Compute(rgb, pts)); });
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"fusion stage timings for one face"};
  int threads = 1, runs = 5, esrgan_px = 128;
  std::string models_dir = FUSION_MODELS_DIR, out;
  app.add_option("--threads", threads, "intra-op threads (at::set_num_threads)");
  app.add_option("--runs", runs, "timed runs per stage (median printed)");
  app.add_option("--models-dir", models_dir, "fetched models (scripts/fetch-models.sh)");
  app.add_option("--esrgan-px", esrgan_px, "side of the face crop fed to ESRGAN");
  app.add_option("--out", out, "write the full-mode swap as PNG");
  CLI11_PARSE(app, argc, argv);
  at::set_num_threads(threads);
  const std::string faces = FUSION_SOURCE_DIR "/tests/data/faces/";
  const cv::Mat src = cv::imread(faces + "astronaut_eileen_collins_512.png");
  const cv::Mat dst = cv::imread(faces + "grace_hopper_512x600.jpg");
  const auto src_lm = Landmarks("astronaut_eileen_collins_512.png");
  const auto dst_lm = Landmarks("grace_hopper_512x600.jpg");
  std::printf("fusion_bench: %d thread(s), median of %d runs, crop %d px\n", threads, runs, models::kCropSize);

  models::FaceCrop sc, dc;
  Measure("align 2 crops (host)", runs, [&] {
    sc = Must(models::AlignFaceCrop(src, src_lm, models::kCropSize));
    dc = Must(models::AlignFaceCrop(dst, dst_lm, models::kCropSize));
  });
  models::GeneratorInputs in;
  Measure("crops -> tensors", runs, [&] {
    in = {models::BgrToTensor(sc.bgr), models::LandmarksToTensor(sc.landmarks),
          models::BgrToTensor(dc.bgr), models::LandmarksToTensor(dc.landmarks), 1.0};
  });
  const auto gen = Must(models::ClassicalGenerator::Create({}));
  const auto warp_only = Must(models::ClassicalGenerator::Create({.colour_transfer = false}));
  at::Tensor fused;
  Measure("generator: warp only", runs, [&] { fused = Must(warp_only->Fuse(in)); });
  Measure("generator: warp + Lab transfer", runs, [&] { fused = Must(gen->Fuse(in)); });
  models::BlendInput blend;
  Measure("tensors -> host mats", runs, [&] {
    blend = {models::TensorToRgbMat(fused), models::TensorToRgbMat(in.target), dc.frame_to_crop, dst_lm};
  });
  for (auto mode : {models::BlendMode::kSimple, models::BlendMode::kFull}) {
    models::BlendOptions o;
    o.mode = mode;
    cv::Mat frame = dst.clone();
    Measure(
        mode == models::BlendMode::kFull ? "blend full (Poisson)" : "blend simple (feather)", runs,
        [&] {
          if (auto s = models::BlendFace(blend, o, &frame); !s.ok()) std::exit(1);
        },
        [&] { dst.copyTo(frame); });
    if (!out.empty() && mode == models::BlendMode::kFull) cv::imwrite(out, frame);
  }
  // Full blending per face at face sizes up to ~1400 px (the frame and landmarks scaled): the
  // Poisson membrane is solved at <= 160 px and a face over 512 px is colour-corrected and
  // feathered on a 512-px copy, so the cost is bounded by face count. The frame is restored
  // (untimed) before each run: the figure is the blend's, not a copy of a 33 MB frame.
  for (double k : {1.0, 2.0, 3.0, 6.0}) {
    cv::Mat big;
    cv::resize(dst, big, cv::Size(), k, k, cv::INTER_CUBIC);
    models::BlendInput in_k = blend;
    for (cv::Point2f& p : in_k.landmarks) p *= static_cast<float>(k);
    for (int r = 0; r < 2; ++r) {
      in_k.frame_to_crop(r, 0) /= k;
      in_k.frame_to_crop(r, 1) /= k;
    }
    const cv::Rect hull = cv::boundingRect(in_k.landmarks);
    cv::Mat frame = big.clone();
    Measure(
        "blend full, face " + std::to_string(hull.width) + "x" + std::to_string(hull.height) + " px", runs,
        [&] {
          if (auto s = models::BlendFace(in_k, models::BlendOptions{}, &frame); !s.ok()) std::exit(1);
        },
        [&] { big.copyTo(frame); });
  }
  FaceApiStages(dst, models_dir, runs);
  const at::Tensor crop = at::upsample_bilinear2d(in.target, {esrgan_px, esrgan_px}, false);
  for (const char* rel : {"esrgan-slim/x2", "esrgan-slim/x4", "esrgan-medium/x4"}) {
    auto model = keras::KerasModel::Load(models_dir + "/" + rel + "/model.json");
    if (!model.ok()) {
      std::printf("%-34s skipped: %s\n", rel, std::string(model.status().message()).c_str());
      continue;
    }
    const auto enhancer = Must(keras::Enhancer::Create(std::move(*model), {}));
    Measure(std::string(rel) + " on " + std::to_string(esrgan_px) + "^2", std::max(1, runs / 2),
            [&] { Must(enhancer->Run(crop)); });
  }
  return 0;
}
