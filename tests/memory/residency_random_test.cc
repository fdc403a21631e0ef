// Randomized concurrent test: several threads run >= 10,000 Acquire/Release/Pin/Unpin/Load/
// Unload/budget operations (fixed seed per thread) against one manager. The invariant is
// checked by the manager after every change (check_invariant) and by each thread after each
// operation; at the end every lease has been returned and the host tier is within its budget.
#include <atomic>
#include <chrono>
#include <random>
#include <thread>

#include "fake_loader.h"
#include "gtest/gtest.h"
#include "common/mutex.h"
#include "memory/residency_manager.h"

namespace fusion {
namespace {

constexpr uint64_t kMiB = 1ull << 20;

// A queue that changes while the workers run: a new random sequence per Change().
class ChangingFuture final : public FutureReferences {
 public:
  void Change(std::mt19937& rng, int models) {
    auto seq = std::make_shared<FutureSequence>();
    for (int k = 0; k < 30; ++k) {
      const int i = static_cast<int>(rng() % models);
      seq->requests.push_back({"m" + std::to_string(i), (40 + 37 * static_cast<uint64_t>(i)) * kMiB,
                               (rng() % 120) * kMiB, false});
    }
    MutexLock lock(&mu_);
    seq->version = ++version_;
    seq_ = std::move(seq);
  }
  uint64_t NextUse(const std::string& model) const override {
    auto seq = Sequence();
    for (size_t i = 0; seq != nullptr && i < seq->requests.size(); ++i) {
      if (seq->requests[i].model == model) return i;
    }
    return kNoFutureUse;
  }
  std::shared_ptr<const FutureSequence> Sequence() const override {
    MutexLock lock(&mu_);
    return seq_;
  }

 private:
  mutable Mutex mu_;
  std::shared_ptr<const FutureSequence> seq_ ABSL_GUARDED_BY(mu_);
  uint64_t version_ ABSL_GUARDED_BY(mu_) = 0;
};

// `policy` with a queue that changes and PrepareEviction running beside the workers.
void RunRandom(const std::string& policy) {
  testing::FakeLoader loader;
  ChangingFuture future;
  ResidencyManager::Options o;
  o.policy = policy;
  o.future = &future;
  o.device_budget_bytes = 1000 * kMiB;
  // Smaller than the models in use at once, and smaller than the largest models (412..447 MiB):
  // host copies of resident models are dropped and re-read all the time.
  o.host_budget_bytes = 400 * kMiB;
  o.loader = &loader;
  o.check_invariant = true;
  auto created = ResidencyManager::Create(o);
  ASSERT_TRUE(created.ok()) << created.status();
  ResidencyManager& m = **created;
  const int kModels = 12;
  for (int i = 0; i < kModels; ++i) {
    const std::string name = "m" + std::to_string(i);
    const uint64_t bytes = (40 + 37 * i) * kMiB;  // 40..447 MiB
    loader.SetBytes(name, i % 3 == 0 ? bytes + 5 * kMiB : bytes);  // some measure above estimate
    ASSERT_TRUE(m.RegisterModel({name, bytes, 0, i % 4 == 0}).ok());
  }

  constexpr int kThreads = 4;
  constexpr int kOpsPerThread = 2600;
  std::atomic<int> acquired{0}, released{0}, refused{0};
  std::atomic<bool> broken{false};
  auto worker = [&](int t) {
    std::mt19937 rng(1234 + t);
    std::vector<Lease> held;
    for (int op = 0; op < kOpsPerThread; ++op) {
      const std::string name = "m" + std::to_string(rng() % kModels);
      const int kind = static_cast<int>(rng() % 100);
      const absl::Time deadline = absl::Now() + absl::Microseconds(rng() % 300);
      if (kind < 55) {
        auto lease = m.Acquire({"job", static_cast<uint32_t>(t)}, name, (rng() % 120) * kMiB,
                               deadline);
        if (lease.ok()) ++acquired, held.push_back(*std::move(lease));
        else ++refused;
      } else if (kind < 80 && !held.empty()) {
        held.erase(held.begin() + rng() % held.size());
        ++released;
      } else if (kind < 84) {
        (void)m.Pin(name, deadline);
      } else if (kind < 90) {
        (void)m.Unpin(name);
      } else if (kind < 94) {
        (void)m.Load(name, deadline);
      } else if (kind < 97) {
        (void)m.Unload(name);
      } else {
        m.SetDeviceBudget((600 + rng() % 600) * kMiB);  // other processes come and go
      }
      if (held.size() > 3) held.erase(held.begin()), ++released;
      if (!m.CheckInvariant().ok()) broken = true;
    }
    released += static_cast<int>(held.size());
    held.clear();
  };
  std::atomic<bool> done{false};
  std::thread queue([&] {
    std::mt19937 rng(99);
    while (!done) {
      future.Change(rng, kModels);
      m.PrepareEviction();
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  });
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back(worker, t);
  for (auto& th : threads) th.join();
  done = true;
  queue.join();

  EXPECT_FALSE(broken);
  EXPECT_GE(kThreads * kOpsPerThread, 10000);
  EXPECT_EQ(acquired.load(), released.load());
  EXPECT_GT(acquired.load(), 1000);  // the test exercised admission, not only refusals
  ResidencySnapshot s = m.Snapshot();
  EXPECT_TRUE(s.leases.empty());
  EXPECT_EQ(s.device.reserved_bytes, 0u);
  for (const ModelSnapshot& model : s.models) EXPECT_EQ(model.leases, 0u) << model.name;
  EXPECT_TRUE(m.CheckInvariant().ok()) << m.CheckInvariant();
  EXPECT_GT(s.totals.evictions, 100u);
  EXPECT_EQ(s.totals.uploads, static_cast<uint64_t>(loader.Count("upload ")));
  // At rest (no upload in flight) the host tier is within its budget.
  EXPECT_LE(s.host.used_bytes, 400 * kMiB);
  EXPECT_FALSE(s.host.over_budget);
  uint64_t host_copies = 0;
  for (const ModelSnapshot& model : s.models) host_copies += model.host_bytes;
  EXPECT_EQ(host_copies, s.host.used_bytes);
  EXPECT_GT(loader.Count("release_host "), 100);
}

TEST(ResidencyRandomTest, ConcurrentOperationsKeepTheInvariantAndReturnEveryLease) {
  RunRandom("lookahead");
}

TEST(ResidencyRandomTest, SoWithThePlannerReplanningBesideThem) { RunRandom("planner"); }

}  // namespace
}  // namespace fusion
