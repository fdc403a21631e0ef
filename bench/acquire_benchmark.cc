// Cost of ResidencyManager::Acquire decisions with 1,000 registered models and 10,000 queued
// jobs feeding lookahead's future references (a per-model next-use index, as the job queue
// keeps it). Built, not run in CI; figures go to the closing notes / docs/PERFORMANCE.md.
//   BM_AcquireHit/<policy>:   the model is resident; Acquire + release of the lease.
//   BM_AcquireEvict/<policy>: every Acquire misses and must choose victims among ~60
//                             resident models (the fake loader costs nothing).
#include <random>

#include "absl/container/flat_hash_map.h"
#include "benchmark/benchmark.h"
#include "memory/residency_manager.h"

namespace fusion {
namespace {

constexpr int kModels = 1000;
constexpr int kQueuedJobs = 10000;
constexpr uint64_t kMB = 1000 * 1000;

class InstantLoader final : public ModelLoader {
 public:
  absl::StatusOr<uint64_t> LoadToHost(const std::string& m) override { return bytes.at(m); }
  absl::StatusOr<uint64_t> Upload(const std::string& m) override { return bytes.at(m); }
  void ReleaseDevice(const std::string&) override {}
  void ReleaseHost(const std::string&) override {}
  absl::flat_hash_map<std::string, uint64_t> bytes;
};

// Next use of each model over 10,000 queued 5-stage jobs, indexed as the queue would keep it.
class QueueIndex final : public FutureReferences {
 public:
  explicit QueueIndex(const std::vector<std::string>& names) {
    std::mt19937 rng(42);
    for (uint64_t turn = 0; turn < kQueuedJobs * 5; ++turn) {
      next_.try_emplace(names[rng() % names.size()], turn);
    }
  }
  uint64_t NextUse(const std::string& model) const override {
    auto it = next_.find(model);
    return it == next_.end() ? kNoFutureUse : it->second;
  }

 private:
  absl::flat_hash_map<std::string, uint64_t> next_;
};

struct Fixture {
  explicit Fixture(const std::string& policy) {
    std::mt19937 rng(7);
    for (int i = 0; i < kModels; ++i) {
      names.push_back("model_" + std::to_string(i));
      loader.bytes[names.back()] = (100 + rng() % 500) * kMB;
    }
    future = std::make_unique<QueueIndex>(names);
    manager = *ResidencyManager::Create({.device_budget_bytes = 24000 * kMB,
                                         .host_budget_bytes = 0,
                                         .policy = policy,
                                         .loader = &loader,
                                         .future = future.get(),
                                         .check_invariant = false});
    for (const std::string& n : names) (void)manager->RegisterModel({n, loader.bytes[n]});
  }
  InstantLoader loader;
  std::vector<std::string> names;
  std::unique_ptr<QueueIndex> future;
  std::unique_ptr<ResidencyManager> manager;
};

const Owner kOwner{"job", 1000};

void BM_AcquireHit(benchmark::State& state, const char* policy) {
  Fixture f(policy);
  auto warm = f.manager->Acquire(kOwner, f.names[0], 0, absl::Now());
  for (auto _ : state) {
    auto lease = f.manager->Acquire(kOwner, f.names[0], 64 * kMB, absl::InfiniteFuture());
    benchmark::DoNotOptimize(lease);
  }
}

void BM_AcquireEvict(benchmark::State& state, const char* policy) {
  Fixture f(policy);
  size_t i = 0;
  for (auto _ : state) {
    auto lease = f.manager->Acquire(kOwner, f.names[i], 64 * kMB, absl::InfiniteFuture());
    benchmark::DoNotOptimize(lease);
    i = (i + 1) % f.names.size();  // cycling over 1,000 models: every Acquire misses
  }
  const ResidencySnapshot s = f.manager->Snapshot();
  state.counters["resident"] = static_cast<double>(s.device.used_bytes) / (350.0 * kMB);
  state.counters["evictions/acquire"] =
      static_cast<double>(s.totals.evictions) / static_cast<double>(s.totals.misses);
}

BENCHMARK_CAPTURE(BM_AcquireHit, lru, "lru");
BENCHMARK_CAPTURE(BM_AcquireHit, lookahead, "lookahead");
BENCHMARK_CAPTURE(BM_AcquireEvict, lru, "lru");
BENCHMARK_CAPTURE(BM_AcquireEvict, lookahead, "lookahead");
BENCHMARK_CAPTURE(BM_AcquireEvict, smallest, "smallest");

}  // namespace
}  // namespace fusion

BENCHMARK_MAIN();
