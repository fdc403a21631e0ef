// fusion_job_bench: where one image job's time goes, per stage, in wall and CPU time (the whole-job
// figure of docs/PERFORMANCE.md). The daemon's PipelineRunner in this process (catalogue over the
// fetched weights, the CPU device metered by the budget allocator), one job at a time, so the
// process's CPU time between a stage's start and finish events is that stage's CPU time (all its
// threads). Wall time alone is what another engineer's build on the same two cores moves most; CPU
// time moves much less, so both are printed. Not a test: it prints figures.
//
//   fusion_job_bench --models-dir DIR --source IMG --target IMG [--runs 5] [--threads 1]
//                    [--simple] [--min-face-px N] [--face-cache] [--json OUT]
//
// --face-cache: the runner keeps the source-face cache (PipelineRunner::Options::
// face_cache_bytes, 1 MiB): the warm-up job fills it, so the measured jobs are WARM (the source
// is not detected, landmarked or described again). Without it every job is cold.
// --threads: the job's threads (PipelineRunner::Options::job_threads: passes and faces at once).
// Prints per stage the median over --runs (after one warm-up job) of the stage's wall ms (the
// job report's) and CPU ms, then `rest` (per job: the Swap call less its stages: decode, the
// RGB copies, the working frame, the result's encode) and the whole Swap call (decode to
// encoded result). Exit 0 when every job succeeded.
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "models/catalogue/catalogue.h"
#include "loader/model_store.h"
#include "pipeline/pipeline_runner.h"
#include "bench/read_file.h"

namespace {

using namespace fusion;
using Clock = std::chrono::steady_clock;

using fusion::bench::ReadFile;

double CpuMs() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

// Records the process CPU time each stage took (start to finish event).
class Timing final : public jobs::JobRunner::Context {
 public:
  bool Cancelled() const override { return false; }
  void StageStarted(const std::string& stage, float) override { started_[stage] = CpuMs(); }
  void StageFinished(const v1::StageReport& r, float) override {
    cpu_ms[r.name()] += CpuMs() - started_[r.name()];
    wall_ms[r.name()] += r.ms();
    if (std::find(order.begin(), order.end(), r.name()) == order.end()) order.push_back(r.name());
  }
  void Degradation(const std::string&) override {}
  std::map<std::string, double> cpu_ms, wall_ms;
  std::vector<std::string> order;

 private:
  std::map<std::string, double> started_;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"fusion_job_bench: per-stage wall and CPU time of one image job"};
  std::string models_dir, source, target, json_out, manifest = FUSION_SOURCE_DIR "/models/manifest.json";
  int runs = 5, threads = 1;
  uint32_t min_face_px = 0;
  bool simple = false, face_cache = false;
  app.add_option("--models-dir", models_dir)->required();
  app.add_option("--source", source)->required();
  app.add_option("--target", target)->required();
  app.add_option("--manifest", manifest);
  app.add_option("--runs", runs)->check(CLI::Range(1, 1000));
  app.add_option("--threads", threads, "the job's threads (job_threads)")->check(CLI::Range(1, 64));
  app.add_option("--min-face-px", min_face_px);
  app.add_flag("--simple", simple);
  app.add_flag("--face-cache", face_cache, "keep the source-face cache (measured jobs are warm)");
  app.add_option("--json", json_out, "also write the figures as JSON");
  CLI11_PARSE(app, argc, argv);

  constexpr uint64_t kBudget = 2ull << 30;
  auto cat = models::ModelCatalogue::Create({manifest, models_dir});
  if (!cat.ok()) {
    std::fprintf(stderr, "fusion_job_bench: %s\n", cat.status().ToString().c_str());
    return 2;
  }
  auto meter = MakeCpuDeviceMeter(kBudget);
  auto store = ModelStore::Create(cat->get(), {.device = "cpu", .meter = meter.get()});
  auto residency = ResidencyManager::Create({.device_budget_bytes = kBudget, .loader = store->get()});
  if (!store.ok() || !residency.ok() || !(*store)->RegisterAll(**residency).ok()) {
    std::fprintf(stderr, "fusion_job_bench: model store setup failed\n");
    return 2;
  }
  PipelineRunner::Options options;
  options.job_threads = static_cast<uint32_t>(threads);
  if (face_cache) options.face_cache_bytes = 1ull << 20;
  PipelineRunner runner(store->get(), residency->get(), meter.get(), nullptr, options);

  v1::JobOptions o;
  o.set_simple(simple);
  o.set_min_face_px(min_face_px);
  const std::string src = ReadFile(source), tgt = ReadFile(target);
  std::map<std::string, std::vector<double>> cpu, wall;
  std::vector<std::string> order;
  std::vector<double> job_wall, job_cpu, rest_wall, rest_cpu;
  uint32_t faces = 0;
  for (int j = 0; j <= runs; ++j) {  // job 0 warms up (model uploads, oneDNN plans)
    Timing t;
    const auto t0 = Clock::now();
    const double c0 = CpuMs();
    auto out = runner.Swap(Owner{"job-bench", 0}, src, tgt, o, t);
    if (!out.ok()) {
      std::fprintf(stderr, "fusion_job_bench: %s\n", out.status().ToString().c_str());
      return 1;
    }
    if (j == 0) continue;
    faces = out->report.faces_swapped();
    job_cpu.push_back(CpuMs() - c0);
    job_wall.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    // Outside every stage: decode, the RGB copies, the working frame, the PNG encode.
    double stage_cpu = 0, stage_wall = 0;
    for (const auto& [k, v] : t.cpu_ms) stage_cpu += v;
    for (const auto& [k, v] : t.wall_ms) stage_wall += v;
    rest_cpu.push_back(job_cpu.back() - stage_cpu);
    rest_wall.push_back(job_wall.back() - stage_wall);
    order = t.order;
    for (const auto& [k, v] : t.cpu_ms) cpu[k].push_back(v);
    for (const auto& [k, v] : t.wall_ms) wall[k].push_back(v);
  }
  std::printf("fusion_job_bench: %s -> %s, %u faces, job_threads %d, median of %d jobs, %s\n", source.c_str(),
              target.c_str(), faces, threads, runs, face_cache ? "face cache on (warm)" : "no face cache (cold)");
  if (const FaceCache* c = runner.face_cache()) {
    const FaceCache::Stats s = c->stats();
    std::printf("face cache: %llu hits, %llu misses, %llu entries, %llu bytes (%llu charged)\n",
                static_cast<unsigned long long>(s.hits), static_cast<unsigned long long>(s.misses),
                static_cast<unsigned long long>(s.entries), static_cast<unsigned long long>(s.bytes),
                static_cast<unsigned long long>(s.charged_bytes));
  }
  std::printf("%-12s %10s %10s\n", "stage", "wall ms", "cpu ms");
  nlohmann::json j = {{"threads", threads}, {"runs", runs}, {"faces", faces}, {"face_cache", face_cache}};
  double wall_sum = 0, cpu_sum = 0;
  for (const std::string& s : order) {
    const double w = Median(wall[s]), c = Median(cpu[s]);
    wall_sum += w;
    cpu_sum += c;
    std::printf("%-12s %10.1f %10.1f\n", s.c_str(), w, c);
    j["stages"][s] = {{"wall_ms", w}, {"cpu_ms", c}};
  }
  std::printf("%-12s %10.1f %10.1f\n", "stages", wall_sum, cpu_sum);
  std::printf("%-12s %10.1f %10.1f\n", "rest", Median(rest_wall), Median(rest_cpu));
  std::printf("%-12s %10.1f %10.1f\n", "job", Median(job_wall), Median(job_cpu));
  j["rest"] = {{"wall_ms", Median(rest_wall)}, {"cpu_ms", Median(rest_cpu)}};
  j["job"] = {{"wall_ms", Median(job_wall)}, {"cpu_ms", Median(job_cpu)}};
  if (!json_out.empty()) std::ofstream(json_out) << j.dump(2) << "\n";
  return 0;
}
