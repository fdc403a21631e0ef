// The in-process pipeline environment of the pipeline_torch tests (one per test binary): the
// project catalogue over the fetched weights, a CPU "device" of kBudget bytes metered by the
// allocator, a model store, residency manager and PipelineRunner with a fault injector; the
// test photos; and helpers to run a swap and check that the residency state is at rest.
// Test-only; the environment is created on first use and never destroyed.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>

#include "models/catalogue/catalogue.h"
#include "loader/model_store.h"
#include "pipeline/pipeline_runner.h"

namespace fusion {

inline constexpr uint64_t kBudget = 512ull << 20;  // bytes of the shared environment's device

struct Env {
  std::unique_ptr<models::ModelCatalogue> catalogue;
  std::unique_ptr<DeviceMeter> meter;
  std::unique_ptr<ModelStore> store;
  std::unique_ptr<ResidencyManager> residency;
  FaultInjector faults;
  std::unique_ptr<PipelineRunner> runner;
};
Env& E();

// A job context that records the stages started and the degradations; `cancel` is its flag.
class Recorder : public jobs::JobRunner::Context {
 public:
  bool Cancelled() const override { return cancel; }
  void StageStarted(const std::string& stage, float p) override {
    started.push_back(stage);
    progress.push_back(p);
  }
  void StageFinished(const v1::StageReport&, float) override {}
  void Degradation(const std::string& what) override { degradations.push_back(what); }
  bool cancel = false;
  std::vector<std::string> started, degradations;
  std::vector<float> progress;  // of each StageStarted, in order
};

std::string ReadFile(const std::string& path);
const std::string& Astronaut();   // tests/data astronaut_eileen_collins_512.png (the source)
const std::string& Grace();       // tests/data grace_hopper_512x600.jpg (one face)
const std::string& SmallGrace();  // Grace resized to 256x300, PNG
std::string Png(const cv::Mat& m);
cv::Mat Decode(const std::string& bytes, int flags = cv::IMREAD_UNCHANGED);
double Psnr(const std::string& a, const std::string& b);

// The astronaut onto `target` through E().runner, reporting to `rec` when given.
absl::StatusOr<jobs::JobRunner::Output> Swap(v1::JobOptions o, const std::string& target = Grace(),
                                             Recorder* rec = nullptr);
v1::JobOptions Ratio(float r);
const v1::StageReport* StageOf(const v1::JobResult& r, const std::string& name);
// After any outcome: no lease, nothing reserved, device-scope bytes == resident models' bytes.
void ExpectAtRest();

}  // namespace fusion
