// A/B of each network's CPU fast path (onednn::Program) against its at:: path, in one
// process, runs interleaved (A, B, A, B, ...) so that load from other processes hits both alike.
// Not a test: it asserts nothing, it measures.
//
//   fusion_models_ab [--models-dir DIR] [--runs N] [--threads T]
//
// Per network: median wall ms and median process CPU ms (getrusage: all threads) per Forward,
// for the at:: path (A, built with FUSION_ONEDNN=0) and the fast path (B), and the largest
// absolute output difference between them. Inputs: the committed astronaut (512x512) as each
// network's input tensor.
#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <ATen/Parallel.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "models/catalogue/catalogue.h"
#include "models/faceapi/face_landmark_68.h"
#include "models/faceapi/face_recognition.h"
#include "models/faceapi/image.h"
#include "models/faceapi/ssd_mobilenet_v1.h"
#include "models/faceapi/tiny_face_detector.h"
#include "models/keras/keras_model.h"

namespace {

double CpuMs() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return (u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1e3 + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e3;
}

struct Sample {
  std::vector<double> wall, cpu;
  double Median(std::vector<double> v) const {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  }
};

void Time(const std::function<void()>& fn, Sample& s) {
  const double c0 = CpuMs();
  const auto t0 = std::chrono::steady_clock::now();
  fn();
  s.wall.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  s.cpu.push_back(CpuMs() - c0);
}

template <typename T>
T Must(absl::StatusOr<T> v, const char* what) {
  if (!v.ok()) {
    std::fprintf(stderr, "%s: %s\n", what, v.status().ToString().c_str());
    std::exit(1);
  }
  return std::move(*v);
}

void Row(const char* name, int runs, const std::function<at::Tensor()>& a, const std::function<at::Tensor()>& b) {
  const double diff = (a() - b()).abs().max().item<double>();
  Sample sa, sb;
  for (int i = 0; i < 2; ++i) { a(); b(); }
  for (int i = 0; i < runs; ++i) {
    Time([&] { a(); }, sa);
    Time([&] { b(); }, sb);
  }
  std::printf("%-26s %9.2f %9.2f %9.2f %9.2f %7.2fx %11.3g\n", name, sa.Median(sa.wall), sa.Median(sa.cpu),
              sb.Median(sb.wall), sb.Median(sb.cpu), sa.Median(sa.cpu) / sb.Median(sb.cpu), diff);
}

}  // namespace

int main(int argc, char** argv) {
  std::string models_dir = FUSION_BENCH_MODELS_DIR;
  int runs = 20, threads = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--models-dir")) models_dir = argv[i + 1];
    if (!std::strcmp(argv[i], "--runs")) runs = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--threads")) threads = std::atoi(argv[i + 1]);
  }
  using namespace fusion;
  at::set_num_threads(threads);
  c10::NoGradGuard no_grad;
  auto cat = Must(models::ModelCatalogue::Create({.manifest = FUSION_BENCH_SOURCE_DIR "/models/manifest.json",
                                                   .models_dir = models_dir}), "catalogue");
  auto load = [&](bool fast, auto&& fn) {
    setenv("FUSION_ONEDNN", fast ? "1" : "0", 1);
    return fn();
  };
  auto tiny_a = load(false, [&] { return Must(faceapi::TinyFaceDetector::Load(*cat, {}), "tiny"); });
  auto tiny_b = load(true, [&] { return Must(faceapi::TinyFaceDetector::Load(*cat, {}), "tiny"); });
  auto ssd_a = load(false, [&] { return Must(faceapi::SsdMobilenetV1::Load(*cat, {}), "ssd"); });
  auto ssd_b = load(true, [&] { return Must(faceapi::SsdMobilenetV1::Load(*cat, {}), "ssd"); });
  auto lm_a = load(false, [&] { return Must(faceapi::FaceLandmark68Net::Load(*cat), "landmarks"); });
  auto lm_b = load(true, [&] { return Must(faceapi::FaceLandmark68Net::Load(*cat), "landmarks"); });
  auto rec_a = load(false, [&] { return Must(faceapi::FaceRecognitionNet::Load(*cat), "recognition"); });
  auto rec_b = load(true, [&] { return Must(faceapi::FaceRecognitionNet::Load(*cat), "recognition"); });
  unsetenv("FUSION_ONEDNN");
  const cv::Mat rgb = Must(faceapi::LoadRgb(FUSION_BENCH_SOURCE_DIR "/tests/data/faces/astronaut_eileen_collins_512.png"), "image");
  const at::Tensor x416 = faceapi::ToBatchTensor(rgb, 416, false), x512 = faceapi::ToBatchTensor(rgb, 512, false);
  const at::Tensor x112 = faceapi::ToBatchTensor(rgb, 112, true), x150 = faceapi::ToBatchTensor(rgb, 150, true);

  std::printf("%d intra-op threads; median of %d interleaved runs; A = at:: path, B = oneDNN fast path\n",
              at::get_num_threads(), runs);
  std::printf("%-26s %9s %9s %9s %9s %8s %11s\n", "network", "A wall ms", "A cpu ms", "B wall ms", "B cpu ms",
              "cpu A/B", "max |A-B|");
  Row("tiny_face_detector @416", runs, [&] { return tiny_a->Forward(x416); }, [&] { return tiny_b->Forward(x416); });
  Row("ssd_mobilenetv1 @512", runs, [&] { return ssd_a->Forward(x512).second; },
      [&] { return ssd_b->Forward(x512).second; });
  Row("face_landmark_68 @112", runs, [&] { return lm_a->Forward(x112); }, [&] { return lm_b->Forward(x112); });
  Row("face_recognition @150", runs, [&] { return rec_a->Forward(x150); }, [&] { return rec_b->Forward(x150); });
  for (const char* name : {"esrgan-slim/x2", "esrgan-slim/x4", "esrgan-medium/x2", "esrgan-medium/x4"}) {
    const std::string json = models_dir + "/" + name + "/model.json";
    auto ka = load(false, [&] { return Must(keras::KerasModel::Load(json), name); });
    auto kb = load(true, [&] { return Must(keras::KerasModel::Load(json), name); });
    unsetenv("FUSION_ONEDNN");
    const at::Tensor x = at::rand({1, 3, 64, 64}) * 255;
    Row((std::string(name) + " @64").c_str(), std::max(3, runs / 3), [&] { return *ka->Forward(x); },
        [&] { return *kb->Forward(x); });
    std::printf("  resident bytes A / B: %llu / %llu (compiled: %d)\n", (unsigned long long)ka->resident_bytes(),
                (unsigned long long)kb->resident_bytes(), kb->compiled());
  }
  std::printf("resident bytes (A / B): tiny %llu / %llu, ssd %llu / %llu, landmarks %llu / %llu, recognition %llu / %llu\n",
              (unsigned long long)tiny_a->ResidentBytes(), (unsigned long long)tiny_b->ResidentBytes(),
              (unsigned long long)ssd_a->ResidentBytes(), (unsigned long long)ssd_b->ResidentBytes(),
              (unsigned long long)lm_a->ResidentBytes(), (unsigned long long)lm_b->ResidentBytes(),
              (unsigned long long)rec_a->ResidentBytes(), (unsigned long long)rec_b->ResidentBytes());
  return 0;
}
