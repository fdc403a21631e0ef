// inprocess: the status quo fusiond replaces — one tool running the face-fusion pipeline in its
// own process with its own model copies. The same libraries and PipelineRunner the
// daemon runs, with no daemon: catalogue over the fetched weights, the CPU device metered by the
// budget allocator, its own model store and residency manager. Not a test: it prints figures.
//
//   inprocess --models-dir DIR --photos DIR [--jobs 2] [--offset 0] [--simple] [--max-side 640]
//             [--enhance 0|2|4] [--device-memory-limit 2GiB]
//
// Job j swaps photo (offset + j) onto photo (offset + j + 1), like loadgen's client `offset`.
// Prints one JSON line: per-job ms (Swap call, decode to encoded result), states, errors,
// load_ms (catalogue + registration), and this process's VmHWM/VmRSS, KiB.
// Exit 0 when every job succeeded, 1 otherwise.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "base/size.h"
#include "models/catalogue/catalogue.h"
#include "loader/model_store.h"
#include "pipeline/pipeline_runner.h"
#include "bench/read_file.h"

namespace {

using namespace fusion;
using Clock = std::chrono::steady_clock;

using fusion::bench::ReadFile;

uint64_t StatusKib(const std::string& key) {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(key + ":", 0) == 0) return std::stoull(line.substr(key.size() + 1));
  }
  return 0;
}

class Quiet final : public jobs::JobRunner::Context {
 public:
  bool Cancelled() const override { return false; }
  void StageStarted(const std::string&, float) override {}
  void StageFinished(const v1::StageReport&, float) override {}
  void Degradation(const std::string&) override {}
};

double Ms(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"inprocess: the pipeline in this process with its own models (the status quo)"};
  std::string models_dir, photos_dir, limit = "2GiB", manifest = FUSION_SOURCE_DIR "/models/manifest.json";
  int jobs = 2, offset = 0;
  uint32_t max_side = 640, enhance = 0;
  bool simple = false;
  app.add_option("--models-dir", models_dir)->required();
  app.add_option("--photos", photos_dir)->required();
  app.add_option("--manifest", manifest);
  app.add_option("--jobs", jobs)->check(CLI::Range(1, 1000));
  app.add_option("--offset", offset);
  app.add_option("--max-side", max_side);
  app.add_option("--enhance", enhance);
  app.add_flag("--simple", simple);
  app.add_option("--device-memory-limit", limit);
  CLI11_PARSE(app, argc, argv);
  auto budget = ParseSize(limit);
  if (!budget.ok()) {
    std::fprintf(stderr, "inprocess: --device-memory-limit: %s\n", std::string(budget.status().message()).c_str());
    return 2;
  }
  std::vector<std::string> photos;
  for (const auto& e : std::filesystem::directory_iterator(photos_dir)) {
    const std::string ext = e.path().extension().string();
    if ((ext == ".jpg" || ext == ".png") && e.file_size() < (8u << 20)) photos.push_back(e.path().string());
  }
  std::sort(photos.begin(), photos.end());
  if (photos.size() < 2) {
    std::fprintf(stderr, "inprocess: need >= 2 photos in %s\n", photos_dir.c_str());
    return 2;
  }

  const auto t0 = Clock::now();
  auto cat = models::ModelCatalogue::Create({manifest, models_dir});
  if (!cat.ok()) {
    std::fprintf(stderr, "inprocess: %s\n", cat.status().ToString().c_str());
    return 2;
  }
  auto meter = MakeCpuDeviceMeter(*budget);
  auto store = ModelStore::Create(cat->get(), {.device = "cpu", .meter = meter.get()});
  auto residency = ResidencyManager::Create({.device_budget_bytes = *budget, .loader = store->get()});
  if (!store.ok() || !residency.ok() || !(*store)->RegisterAll(**residency).ok()) {
    std::fprintf(stderr, "inprocess: model store setup failed\n");
    return 2;
  }
  PipelineRunner runner(store->get(), residency->get(), meter.get(), nullptr, PipelineRunner::Options{});
  const double load_ms = Ms(t0);

  v1::JobOptions o;
  o.set_simple(simple);
  o.set_max_side(max_side);
  o.set_enhance_scale(enhance);
  nlohmann::json ms = nlohmann::json::array(), states = nlohmann::json::array(), errors = nlohmann::json::array();
  int failed = 0;
  for (int j = 0; j < jobs; ++j) {
    const size_t k = static_cast<size_t>(offset + j);
    const std::string src = ReadFile(photos[k % photos.size()]), tgt = ReadFile(photos[(k + 1) % photos.size()]);
    Quiet ctx;
    const auto t1 = Clock::now();
    auto out = runner.Swap(Owner{"inprocess-" + std::to_string(j), 0}, src, tgt, o, ctx);
    ms.push_back(Ms(t1));
    states.push_back(out.ok() ? "SUCCEEDED" : "FAILED");
    if (!out.ok()) {
      ++failed;
      errors.push_back(out.status().ToString());
    }
  }
  nlohmann::json r = {{"jobs", jobs}, {"ms", ms}, {"states", states}, {"errors", errors}, {"load_ms", load_ms},
                      {"vmhwm_kib", StatusKib("VmHWM")}, {"vmrss_kib", StatusKib("VmRSS")}};
  std::printf("%s\n", r.dump().c_str());
  return failed == 0 ? 0 : 1;
}
