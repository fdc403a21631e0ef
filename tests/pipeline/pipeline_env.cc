#include "pipeline_env.h"

#include "host_copy.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <stdexcept>

#include <opencv2/imgproc.hpp>

#include "device/cpu_device_memory.h"

namespace fusion {

std::shared_ptr<const ModelCopy> HostCopyOf(const std::string& model) {
  static const auto* store = [] {
    static auto cat = models::ModelCatalogue::Create({FUSION_SOURCE_DIR "/models/manifest.json", FUSION_MODELS_DIR});
    if (!cat.ok()) throw std::runtime_error(cat.status().ToString());
    return ModelStore::Create(cat->get(), {.device = "cpu"})->release();
  }();
  auto c = store->HostCopy(model);
  if (!c.ok()) throw std::runtime_error(c.status().ToString());
  return *c;
}

Env& E() {
  static Env* env = [] {
    auto* e = new Env;
    auto cat = models::ModelCatalogue::Create({FUSION_SOURCE_DIR "/models/manifest.json", FUSION_MODELS_DIR});
    if (!cat.ok()) throw std::runtime_error(cat.status().ToString());
    e->catalogue = *std::move(cat);
    e->meter = MakeCpuDeviceMeter(kBudget);
    e->store = *ModelStore::Create(e->catalogue.get(), {.device = "cpu", .meter = e->meter.get()});
    e->residency = *ResidencyManager::Create({.device_budget_bytes = kBudget, .loader = e->store.get()});
    if (auto st = e->store->RegisterAll(*e->residency); !st.ok()) throw std::runtime_error(st.ToString());
    // One thread per job: these tests pin the stages' working sets and ladder paths of items
    // taken one at a time (job_threads > 1 admits and holds k items at once); the threaded path
    // has its own tests (parallel_test.cc, JobThreads.*).
    PipelineRunner::Options options;
    options.job_threads = 1;
    e->runner = std::make_unique<PipelineRunner>(e->store.get(), e->residency.get(), e->meter.get(),
                                                 &e->faults, options);
    return e;
  }();
  return *env;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}
const std::string& Astronaut() {
  static const std::string b = ReadFile(FUSION_TEST_DATA_DIR "/faces/astronaut_eileen_collins_512.png");
  return b;
}
const std::string& Grace() {
  static const std::string b = ReadFile(FUSION_TEST_DATA_DIR "/faces/grace_hopper_512x600.jpg");
  return b;
}
const std::string& SmallGrace() {
  static const std::string b = [] {
    cv::Mat small;
    cv::resize(Decode(Grace(), cv::IMREAD_COLOR), small, cv::Size(256, 300), 0, 0, cv::INTER_AREA);
    return Png(small);
  }();
  return b;
}
std::string Png(const cv::Mat& m) {
  std::vector<uchar> out;
  cv::imencode(".png", m, out);
  return std::string(out.begin(), out.end());
}
cv::Mat Decode(const std::string& bytes, int flags) {
  return cv::imdecode(cv::Mat(1, static_cast<int>(bytes.size()), CV_8U, const_cast<char*>(bytes.data())), flags);
}
double Psnr(const std::string& a, const std::string& b) {
  return cv::PSNR(Decode(a, cv::IMREAD_COLOR), Decode(b, cv::IMREAD_COLOR));
}

absl::StatusOr<jobs::JobRunner::Output> Swap(v1::JobOptions o, const std::string& target, Recorder* rec) {
  Recorder local;
  return E().runner->Swap(Owner{"test", 0}, Astronaut(), target, o, rec ? *rec : local);
}
v1::JobOptions Ratio(float r) {
  v1::JobOptions o;
  o.set_ratio(r);
  return o;
}

const v1::StageReport* StageOf(const v1::JobResult& r, const std::string& name) {
  for (const auto& s : r.stages()) {
    if (s.name() == name) return &s;
  }
  return nullptr;
}

void ExpectAtRest() {
  const ResidencySnapshot s = E().residency->Snapshot();
  EXPECT_TRUE(s.leases.empty());
  EXPECT_EQ(s.device.reserved_bytes, 0u);
  EXPECT_EQ(E().meter->AllocatedBytes(), s.device.used_bytes);
}

}  // namespace fusion
