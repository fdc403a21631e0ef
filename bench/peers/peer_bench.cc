// fusion_peer_bench: the C++ side of the peer benchmark (bench/peers/run.sh drives it).
// It runs fusiond's own forward (fusiond_nets.h) and OpenCV dnn on the ONNX export
// (opencv_dnn_net.h) in this process; ONNX Runtime runs in the Python driver (driver.py), which
// starts this program as its worker, so the three runtimes are timed interleaved, one at a time.
//
//   fusion_peer_bench dump   --models-dir DIR --image PNG --out DIR [ID...]
//       writes OUT/ID.input.f32 and OUT/ID.fusiond.f32 (raw little-endian fp32) and OUT/ID.json
//       ({"id", "input_shape", "output_numel"}) per network (default: all of NetIds()).
//   fusion_peer_bench worker --models-dir DIR --image PNG --out DIR
//       reads commands on stdin, one per line, and answers one JSON line each on stdout:
//         net ID [PRECISION]         load fusiond's network ID and its input -> {"ok":true};
//                                    PRECISION fp32|bf16 sets FUSION_ONEDNN_PRECISION for the
//                                    load (onednn/program.h), else the nets' defaults
//         variant PRECISION          the same network again in PRECISION (a second fusiond
//                                    runtime, "fusiond_variant") -> {"ok":true,
//                                    "max_abs_diff":d,"max_rel_diff":r} against `net`'s output
//                                    (r: d over the largest magnitude of that output)
//         onnx PATH                  import PATH into OpenCV dnn, run it once on the input
//                                    -> {"ok":true,"max_abs_diff":d} (against fusiond's output)
//                                    or {"ok":false,"error":"..."} when OpenCV refuses it
//         time fusiond|fusiond_variant|opencv T N    N forwards at T threads (at::set_num_threads /
//                                    cv::setNumThreads) -> {"ok":true,"ms":[...],"cpu_ms":[...]}
//                                    (wall ms and this process's CPU ms, all threads, per run)
//         peak                       one core's fp32 FMA peak -> {"ok":true,"gflops":g}
//         quit
// Not a test: it measures and prints; nothing here passes or fails CI.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/InferenceMode.h>

#include <opencv2/core/utility.hpp>

#include <stdlib.h>
#include <time.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "bench/peers/fma_peak.h"
#include "bench/peers/fusiond_nets.h"
#include "bench/peers/opencv_dnn_net.h"

namespace {

namespace fs = std::filesystem;

// CPU time of the whole process (every thread), ms: with wall time it tells how many cores a
// run kept busy, and it is less sensitive than wall time to other processes' load.
double ProcessCpuMs() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return t.tv_sec * 1e3 + t.tv_nsec * 1e-6;
}
using fusion::peers::FusiondNet;

struct Args {
  std::string mode;
  fs::path models_dir, image, out;
  std::vector<std::string> ids;
};

bool Parse(int argc, char** argv, Args& a) {
  if (argc < 2) return false;
  a.mode = argv[1];
  for (int i = 2; i < argc; ++i) {
    const std::string k = argv[i];
    if ((k == "--models-dir" || k == "--image" || k == "--out") && i + 1 < argc) {
      (k == "--models-dir" ? a.models_dir : k == "--image" ? a.image : a.out) = argv[++i];
    } else {
      a.ids.push_back(k);
    }
  }
  return (a.mode == "dump" || a.mode == "worker") && !a.models_dir.empty() && !a.image.empty() && !a.out.empty();
}

void WriteF32(const fs::path& path, const at::Tensor& t) {
  const at::Tensor c = t.contiguous();
  std::ofstream f(path, std::ios::binary);
  f.write(static_cast<const char*>(c.data_ptr()), static_cast<std::streamsize>(c.numel() * sizeof(float)));
}

std::string Shape(const at::Tensor& t) { return absl::StrCat("[", absl::StrJoin(t.sizes(), ","), "]"); }

std::string JsonString(const std::string& s) {
  std::string o = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    o += (c == '\n' || c == '\r' || c == '\t') ? ' ' : c;
  }
  return o + "\"";
}

int Dump(const Args& a) {
  const std::vector<std::string>& ids = a.ids.empty() ? fusion::peers::NetIds() : a.ids;
  fs::create_directories(a.out);
  for (const std::string& id : ids) {
    absl::StatusOr<FusiondNet> net = fusion::peers::MakeFusiondNet(id, a.models_dir, a.image);
    if (!net.ok()) {
      std::fprintf(stderr, "%s\n", net.status().ToString().c_str());
      return 1;
    }
    const at::Tensor y = net->forward(net->input);
    WriteF32(a.out / (id + ".input.f32"), net->input);
    WriteF32(a.out / (id + ".fusiond.f32"), y);
    std::ofstream(a.out / (id + ".json")) << "{\"id\":\"" << id << "\",\"input_shape\":" << Shape(net->input)
                                          << ",\"output_numel\":" << y.numel() << "}\n";
    std::printf("dumped %s: input %s, output %lld values\n", id.c_str(), Shape(net->input).c_str(),
                static_cast<long long>(y.numel()));
  }
  return 0;
}

class Worker {
 public:
  explicit Worker(const Args& a) : args_(a) {}

  std::string Handle(const std::string& line) {
    std::istringstream in(line);
    std::string cmd;
    in >> cmd;
    try {
      if (cmd == "net") return Net(in);
      if (cmd == "onnx") return Onnx(in);
      if (cmd == "variant") return Variant(in);
      if (cmd == "time") return Time(in);
      if (cmd == "peak") return absl::StrCat("{\"ok\":true,\"gflops\":", fusion::peers::MeasureFmaPeakGflops(), "}");
      return Error(absl::StrCat("unknown command '", cmd, "'"));
    } catch (const std::exception& e) {
      return Error(e.what());
    }
  }

 private:
  static std::string Error(const std::string& m) { return absl::StrCat("{\"ok\":false,\"error\":", JsonString(m), "}"); }

  // Network `id` with FUSION_ONEDNN_PRECISION=precision while it is made (empty: as set).
  absl::StatusOr<FusiondNet> Make(const std::string& id, const std::string& precision) {
    const char* was = getenv("FUSION_ONEDNN_PRECISION");
    const std::string before = was ? was : "";
    if (!precision.empty()) setenv("FUSION_ONEDNN_PRECISION", precision.c_str(), 1);
    absl::StatusOr<FusiondNet> net = fusion::peers::MakeFusiondNet(id, args_.models_dir, args_.image);
    if (!precision.empty()) {
      if (was) {
        setenv("FUSION_ONEDNN_PRECISION", before.c_str(), 1);
      } else {
        unsetenv("FUSION_ONEDNN_PRECISION");
      }
    }
    return net;
  }

  std::string Net(std::istringstream& in) {
    std::string id, precision;
    in >> id >> precision;
    opencv_.reset();
    variant_ = FusiondNet();
    absl::StatusOr<FusiondNet> net = Make(id, precision);
    if (!net.ok()) return Error(net.status().ToString());
    net_ = std::move(*net);
    reference_ = net_.forward(net_.input);
    return "{\"ok\":true}";
  }

  std::string Variant(std::istringstream& in) {
    std::string precision;
    in >> precision;
    if (!reference_.defined()) return Error("variant before net");
    absl::StatusOr<FusiondNet> net = Make(net_.id, precision);
    if (!net.ok()) return Error(net.status().ToString());
    variant_ = std::move(*net);
    const at::Tensor y = variant_.forward(variant_.input);
    const double d = (y - reference_).abs().max().item<double>();
    const double m = reference_.abs().max().item<double>();
    return absl::StrCat("{\"ok\":true,\"max_abs_diff\":", d, ",\"max_rel_diff\":", m > 0 ? d / m : 0.0, "}");
  }

  std::string Onnx(std::istringstream& in) {
    std::string path;
    in >> path;
    if (!reference_.defined()) return Error("onnx before net");
    auto net = fusion::peers::OpenCvDnnNet::Load(path);
    if (!net.ok()) return Error(net.status().ToString());
    opencv_ = std::move(*net);
    const at::Tensor y = opencv_->Forward(net_.input);
    if (y.numel() != reference_.numel()) {
      opencv_.reset();
      return Error(absl::StrCat("OpenCV output has ", y.numel(), " values, fusiond's ", reference_.numel()));
    }
    return absl::StrCat("{\"ok\":true,\"max_abs_diff\":", (y - reference_).abs().max().item<double>(), "}");
  }

  std::string Time(std::istringstream& in) {
    std::string runtime;
    int threads = 0, iters = 0;
    in >> runtime >> threads >> iters;
    if (threads < 1 || iters < 1) return Error("time RUNTIME THREADS ITERS");
    std::function<void()> fn;
    if (runtime == "fusiond" && reference_.defined()) {
      at::set_num_threads(threads);
      fn = [this] { net_.forward(net_.input); };
    } else if (runtime == "fusiond_variant" && variant_.forward) {
      at::set_num_threads(threads);
      fn = [this] { variant_.forward(variant_.input); };
    } else if (runtime == "opencv" && opencv_) {
      cv::setNumThreads(threads);
      fn = [this] { opencv_->Forward(net_.input); };
    } else {
      return Error(absl::StrCat("nothing loaded for ", runtime));
    }
    std::vector<double> ms, cpu;
    for (int i = 0; i < iters; ++i) {
      const double c0 = ProcessCpuMs();
      const auto t0 = std::chrono::steady_clock::now();
      fn();
      ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      cpu.push_back(ProcessCpuMs() - c0);
    }
    return absl::StrCat("{\"ok\":true,\"ms\":[", absl::StrJoin(ms, ","), "],\"cpu_ms\":[", absl::StrJoin(cpu, ","), "]}");
  }

  const Args& args_;
  FusiondNet net_, variant_;
  at::Tensor reference_;
  std::unique_ptr<fusion::peers::OpenCvDnnNet> opencv_;
};

}  // namespace

int main(int argc, char** argv) {
  Args a;
  if (!Parse(argc, argv, a)) {
    std::fprintf(stderr,
                 "usage: %s dump|worker --models-dir DIR --image PNG --out DIR [ID...]\n(see bench/peers/peer_bench.cc)\n",
                 argv[0]);
    return 2;
  }
  c10::InferenceMode inference;
  if (a.mode == "dump") return Dump(a);
  Worker w(a);
  std::string line;
  while (std::getline(std::cin, line)) {
    if (line == "quit") break;
    std::cout << w.Handle(line) << std::endl;
  }
  return 0;
}
