// Cost of ResidencyManager::Acquire decisions with 1,000 registered models and 10,000 queued
// jobs feeding lookahead's future references (a per-model next-use index, as the job queue
// keeps it). Built, not run in CI; figures go to the closing notes / docs/PERFORMANCE.md.
//   BM_AcquireHit/<policy>:   the model is resident; Acquire + release of the lease.
//   BM_AcquireEvict/<policy>: every Acquire misses and must choose victims among ~60
//                             resident models (the fake loader costs nothing). The planner has
//                             more candidates than its exact window holds: it runs lookahead.
// The planner at the size it plans exactly (PlannerPolicy::kMaxModels): 12 models, 4-5 resident,
// a queue of 64 jobs x 5 stages (320 requests) in its request sequence:
//   BM_AcquireEvictPlanned/cached: the sequence is unchanged between Acquires (the plan is
//                                  read, not recomputed).
//   BM_AcquireEvictPlanned/replan: every Acquire follows a queue change nobody prepared for:
//                                  the eviction plans inline, under the manager's lock.
//   BM_AcquireEvictPlanned/prepared: every Acquire follows a queue change and PrepareEviction
//                                  (as fusiond's on_change): the plan is made before, off
//                                  the lock. Time = change + plan + Acquire; acquire_p50_us and
//                                  acquire_p99_us time the Acquire alone.
//   BM_PlanPerQueueChange/<models>: one plan + choice after a queue change, p50/p99 in us.
#include <algorithm>
#include <chrono>
#include <random>

#include "absl/container/flat_hash_map.h"
#include "benchmark/benchmark.h"
#include "memory/residency_manager.h"
#include "memory/residency_planner.h"

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

// A queue of 64 jobs x 5 stages over `models` models, as the planner's request sequence.
class QueueSequence final : public FutureReferences {
 public:
  QueueSequence(const std::vector<std::string>& names, const std::vector<uint64_t>& bytes,
                uint64_t seed) {
    std::mt19937 rng(seed);
    auto seq = std::make_shared<FutureSequence>();
    for (int j = 0; j < 64 * 5; ++j) {
      const size_t m = rng() % names.size();
      seq->requests.push_back({names[m], bytes[m], (50 + rng() % 400) * kMB, false});
    }
    seq_ = std::move(seq);
  }
  void Bump() {
    auto seq = std::make_shared<FutureSequence>(*seq_);
    ++seq->version;
    std::rotate(seq->requests.begin(), seq->requests.begin() + 1, seq->requests.end());
    seq_ = std::move(seq);
  }
  uint64_t NextUse(const std::string& model) const override {
    for (size_t i = 0; i < seq_->requests.size(); ++i) {
      if (seq_->requests[i].model == model) return i;
    }
    return kNoFutureUse;
  }
  std::shared_ptr<const FutureSequence> Sequence() const override { return seq_; }

 private:
  std::shared_ptr<const FutureSequence> seq_;
};

enum class Change { kNone, kInline, kPrepared };

void BM_AcquireEvictPlanned(benchmark::State& state, Change change) {
  InstantLoader loader;
  std::vector<std::string> names;
  std::vector<uint64_t> bytes;
  std::mt19937 rng(11);
  for (int i = 0; i < 12; ++i) {
    names.push_back("model_" + std::to_string(i));
    bytes.push_back((10 + rng() % 590) * kMB);
    loader.bytes[names.back()] = bytes.back();
  }
  QueueSequence future(names, bytes, 5);
  auto manager = *ResidencyManager::Create({.device_budget_bytes = 2000 * kMB,
                                            .host_budget_bytes = 0,
                                            .policy = "planner",
                                            .loader = &loader,
                                            .future = &future,
                                            .check_invariant = false});
  for (size_t i = 0; i < names.size(); ++i) (void)manager->RegisterModel({names[i], bytes[i]});
  size_t i = 0;
  std::vector<double> us;
  for (auto _ : state) {
    if (change != Change::kNone) future.Bump();
    if (change == Change::kPrepared) manager->PrepareEviction();  // as fusiond's on_change
    // After a queue change, the stage the new forecast runs first (the planner plans from the
    // model admitted: one the prepared plans do not cover is planned inline).
    const std::string& model = change != Change::kNone ? future.Sequence()->requests[0].model : names[i];
    const auto t0 = std::chrono::steady_clock::now();
    auto lease = manager->Acquire(kOwner, model, 64 * kMB, absl::InfiniteFuture());
    const auto t1 = std::chrono::steady_clock::now();
    benchmark::DoNotOptimize(lease);
    us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
    i = (i + 5) % names.size();  // 5 and 12 coprime: every model in turn, mostly misses
  }
  const ResidencySnapshot s = manager->Snapshot();
  state.counters["misses/acquire"] =
      static_cast<double>(s.totals.misses) / static_cast<double>(s.totals.misses + s.totals.hits);
  std::sort(us.begin(), us.end());
  state.counters["acquire_p50_us"] = us[us.size() / 2];
  state.counters["acquire_p99_us"] = us[us.size() * 99 / 100];
}

// One plan (after a queue change) and the choice among 5 candidates: the latency a queue
// change adds to the first eviction that follows it. p50/p99 over the iterations.
void BM_PlanPerQueueChange(benchmark::State& state) {
  const int models = static_cast<int>(state.range(0));
  std::vector<std::string> names;
  std::vector<uint64_t> bytes;
  std::mt19937 rng(13);
  for (int i = 0; i < models; ++i) {
    names.push_back("model_" + std::to_string(i));
    bytes.push_back((10 + rng() % 590) * kMB);
  }
  std::vector<EvictionCandidate> candidates;
  for (int i = 0; i < 5; ++i) candidates.push_back({&names[i], bytes[i], uint64_t(i)});
  QueueSequence future(names, bytes, 17);
  PlannerPolicy planner;
  std::vector<double> us;
  for (auto _ : state) {
    future.Bump();
    const auto t0 = std::chrono::steady_clock::now();
    auto v = planner.ChooseVictims(candidates, 300 * kMB, &future);
    const auto t1 = std::chrono::steady_clock::now();
    benchmark::DoNotOptimize(v);
    us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
  }
  std::sort(us.begin(), us.end());
  state.counters["p50_us"] = us[us.size() / 2];
  state.counters["p99_us"] = us[us.size() * 99 / 100];
  state.counters["plans"] = static_cast<double>(planner.plans());
}

BENCHMARK_CAPTURE(BM_AcquireHit, lru, "lru");
BENCHMARK_CAPTURE(BM_AcquireHit, lookahead, "lookahead");
BENCHMARK_CAPTURE(BM_AcquireEvict, lru, "lru");
BENCHMARK_CAPTURE(BM_AcquireEvict, lookahead, "lookahead");
BENCHMARK_CAPTURE(BM_AcquireEvict, smallest, "smallest");
BENCHMARK_CAPTURE(BM_AcquireEvict, planner, "planner");
BENCHMARK_CAPTURE(BM_AcquireEvict, default, "default");
BENCHMARK_CAPTURE(BM_AcquireEvictPlanned, cached, Change::kNone);
BENCHMARK_CAPTURE(BM_AcquireEvictPlanned, replan, Change::kInline);
BENCHMARK_CAPTURE(BM_AcquireEvictPlanned, prepared, Change::kPrepared);
BENCHMARK(BM_PlanPerQueueChange)->Arg(6)->Arg(10)->Arg(12);

}  // namespace
}  // namespace fusion

BENCHMARK_MAIN();
