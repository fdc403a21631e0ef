// Prints per-network CPU time for one face and device bytes per face-api model. Not a test: it
// asserts nothing, it measures. The networks run their CPU
// fast path (onednn::Program) unless FUSION_ONEDNN=0; "device bytes" are the fp32
// parameters (the catalogue's figure), "resident bytes" what the copy holds (packed weights).
//
//   fusion_models_bench [--models-dir DIR] [--runs N]
//
// Times are the median of N runs (default 10) after 2 warm-up runs, with LibTorch's default
// intra-op threads (at::get_num_threads() is printed). Image: the committed astronaut (512x512).
#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "models/catalogue/catalogue.h"
#include "models/faceapi/face_landmark_68.h"
#include "models/faceapi/face_recognition.h"
#include "models/faceapi/image.h"
#include "models/faceapi/multiscale.h"
#include "models/faceapi/ssd_mobilenet_v1.h"
#include "models/faceapi/tiny_face_detector.h"

namespace {

using fusion::faceapi::FaceBox;

double MedianMs(int runs, const std::function<void()>& fn) {
  for (int i = 0; i < 2; ++i) fn();
  std::vector<double> ms;
  for (int i = 0; i < runs; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

template <typename T>
T Must(absl::StatusOr<T> v, const char* what) {
  if (!v.ok()) {
    std::fprintf(stderr, "%s: %s\n", what, v.status().ToString().c_str());
    std::exit(1);
  }
  return std::move(*v);
}

}  // namespace

int main(int argc, char** argv) {
  std::string models_dir = FUSION_BENCH_MODELS_DIR;
  int runs = 10;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--models-dir")) models_dir = argv[i + 1];
    if (!std::strcmp(argv[i], "--runs")) runs = std::atoi(argv[i + 1]);
  }
  using namespace fusion;
  c10::NoGradGuard no_grad;
  auto cat = Must(models::ModelCatalogue::Create({.manifest = FUSION_BENCH_SOURCE_DIR "/models/manifest.json",
                                                   .models_dir = models_dir}), "catalogue");
  auto tiny = Must(faceapi::TinyFaceDetector::Load(*cat, {}), "tiny_face_detector");
  auto ssd = Must(faceapi::SsdMobilenetV1::Load(*cat, {}), "ssd_mobilenetv1");
  auto lm = Must(faceapi::FaceLandmark68Net::Load(*cat), "face_landmark_68");
  auto rec = Must(faceapi::FaceRecognitionNet::Load(*cat), "face_recognition");
  const cv::Mat rgb = Must(faceapi::LoadRgb(FUSION_BENCH_SOURCE_DIR "/tests/data/faces/astronaut_eileen_collins_512.png"), "image");
  const FaceBox box = (*tiny->Detect(rgb))[0];
  const faceapi::Landmarks68 pts = *lm->Detect(rgb, box);

  std::printf("LibTorch CPU, %d intra-op threads; image 512x512, one face; median of %d runs\n",
              at::get_num_threads(), runs);
  std::printf("%-34s %12s %16s %16s\n", "network (call)", "ms", "device bytes", "resident bytes");
  auto row = [&](const char* name, double ms, const auto& net) {
    std::printf("%-34s %12.2f %16llu %16llu\n", name, ms, (unsigned long long)net.DeviceBytes(),
                (unsigned long long)net.ResidentBytes());
  };
  row("tiny_face_detector (Detect @416)", MedianMs(runs, [&] { (void)tiny->Detect(rgb, 416); }), *tiny);
  row("tiny_face_detector (Forward only)", MedianMs(runs, [&] { tiny->Forward(at::zeros({1, 3, 416, 416})); }), *tiny);
  row("ssd_mobilenetv1 (Detect @512)", MedianMs(runs, [&] { (void)ssd->Detect(rgb); }), *ssd);
  row("face_landmark_68 (Detect)", MedianMs(runs, [&] { (void)lm->Detect(rgb, box); }), *lm);
  row("face_recognition (Compute)", MedianMs(runs, [&] { (void)rec->Compute(rgb, pts); }), *rec);
  const cv::Mat sample(1280, 1920, CV_8UC3, cv::Scalar(90, 100, 110));
  row("tiny multi-scale 1920x1280", MedianMs(std::max(1, runs / 3), [&] { (void)faceapi::DetectMultiScale(*tiny, sample); }), *tiny);
  row("ssd multi-scale 1920x1280", MedianMs(std::max(1, runs / 3), [&] { (void)faceapi::DetectMultiScale(*ssd, sample); }), *ssd);
  return 0;
}
