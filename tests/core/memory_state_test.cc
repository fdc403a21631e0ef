// GetMemoryState's source and the budget re-evaluation, over a fake device and a fake loader.
#include "rpc/memory_state.h"

#include "../memory/fake_loader.h"
#include "gtest/gtest.h"

#include <algorithm>
#include <cstdio>
#include "device/host_memory.h"
#include "memory/budget_watcher.h"

namespace fusion {
namespace {

constexpr uint64_t kMiB = 1ull << 20;

class FakeDevice final : public Device {
 public:
  std::string Kind() const override { return kind; }
  absl::StatusOr<DeviceMemory> QueryMemory() const override {
    return DeviceMemory{8192 * kMiB, available};
  }
  uint64_t available = 4096 * kMiB;
  std::string kind = "cpu";
};

class MemoryStateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto m = ResidencyManager::Create({.device_budget_bytes = 1024 * kMiB, .loader = &loader_});
    ASSERT_TRUE(m.ok());
    manager_ = *std::move(m);
    for (const char* name : {"detector", "swapper"}) {
      loader_.SetBytes(name, 300 * kMiB);
      ASSERT_TRUE(manager_->RegisterModel({name, 300 * kMiB}).ok());
    }
  }
  FakeDevice device_;
  testing::FakeLoader loader_;
  std::unique_ptr<ResidencyManager> manager_;
};

TEST_F(MemoryStateTest, ReportsTiersModelsAndCountersFromTheManager) {
  auto lease = manager_->Acquire({"job", 1000}, "swapper", 100 * kMiB, absl::Now());
  ASSERT_TRUE(lease.ok());
  ResidencyMemoryStateSource source(&device_, manager_.get(), {1024 * kMiB, 0, 0});
  auto state = source.Snapshot();
  ASSERT_TRUE(state.ok()) << state.status();
  EXPECT_EQ(state->device().kind(), "cpu");
  EXPECT_EQ(state->device().budget_bytes(), 1024 * kMiB);
  EXPECT_EQ(state->device().used_bytes(), 300 * kMiB);
  EXPECT_EQ(state->device().reserved_bytes(), 100 * kMiB);
  EXPECT_EQ(state->device().peak_bytes(), 400 * kMiB);
  EXPECT_EQ(state->device().external_bytes(), (8192 - 4096 - 400) * kMiB);
  EXPECT_FALSE(state->device().over_budget());
  ASSERT_EQ(state->models_size(), 2);
  const v1::ModelInfo& swapper = state->models(1);
  EXPECT_EQ(swapper.name(), "swapper");
  EXPECT_EQ(swapper.state(), "IN_USE");
  EXPECT_EQ(swapper.tier(), "device");
  EXPECT_EQ(swapper.bytes(), 300 * kMiB);
  EXPECT_EQ(swapper.host_bytes(), 300 * kMiB);  // its host copy: the whole host tier
  EXPECT_EQ(state->host().used_bytes(), 300 * kMiB);
  EXPECT_EQ(swapper.leases(), 1u);
  EXPECT_EQ(swapper.uploads(), 1u);
  EXPECT_EQ(state->models(0).state(), "ABSENT");
  EXPECT_EQ(state->models(0).tier(), "storage");
  EXPECT_EQ(state->models(0).host_bytes(), 0u);
  EXPECT_EQ(state->counters().bytes_uploaded(), 300 * kMiB);
  EXPECT_EQ(state->counters().misses(), 1u);
  ASSERT_EQ(state->clients_size(), 1);
  EXPECT_EQ(state->clients(0).uid(), 1000u);
  EXPECT_EQ(state->clients(0).jobs_running(), 1u);
  EXPECT_EQ(state->clients(0).working_bytes(), 100 * kMiB);
}

TEST_F(MemoryStateTest, ACachesHostLeasesAreTheHostTiersCacheBytesNotAClientsWork) {
  auto slab = manager_->AcquireHost({kCacheOwnerJob, 0}, "the source-face cache", 64 << 10, absl::Now());
  ASSERT_TRUE(slab.ok()) << slab.status();
  auto work = manager_->AcquireHost({"job", 1000}, "a CPU stage", 3 * kMiB, absl::Now());
  ASSERT_TRUE(work.ok()) << work.status();
  ResidencyMemoryStateSource source(&device_, manager_.get(), {1024 * kMiB, 0, 0});
  auto state = source.Snapshot();
  ASSERT_TRUE(state.ok()) << state.status();
  EXPECT_EQ(state->host().reserved_bytes(), 3 * kMiB + (64 << 10));
  EXPECT_EQ(state->host().cache_bytes(), 64u << 10);
  EXPECT_EQ(state->device().cache_bytes(), 0u);
  work->Release();
  state = source.Snapshot();
  ASSERT_TRUE(state.ok());
  EXPECT_EQ(state->host().reserved_bytes(), 64u << 10);
  EXPECT_EQ(state->host().cache_bytes(), 64u << 10);
  for (const v1::ClientUsage& c : state->clients()) EXPECT_NE(c.uid(), 0u) << "the cache is no client";
  slab->Release();
  state = source.Snapshot();
  ASSERT_TRUE(state.ok());
  EXPECT_EQ(state->host().cache_bytes(), 0u);
}

TEST_F(MemoryStateTest, BudgetShrinksAndEvictsWhenAnotherProcessTakesMemory) {
  device_.kind = "cuda:0";  // device memory apart from the host's (on cpu the host keeps a share)
  ASSERT_TRUE(manager_->Load("detector", absl::Now()).ok());
  ASSERT_TRUE(manager_->Load("swapper", absl::Now()).ok());
  auto watcher = BudgetWatcher::Create(&device_, manager_.get(),
                                       {.device_limit = 1024 * kMiB, .device_reserve = 0,
                                        .period = absl::Hours(1)});
  ASSERT_TRUE(watcher.ok());
  EXPECT_EQ(manager_->Snapshot().device.budget_bytes, 1024 * kMiB);  // the limit binds
  // Another process takes RAM: free 100 MiB + our 600 MiB = 700 MiB budget.
  device_.available = 100 * kMiB;
  ASSERT_TRUE((*watcher)->Refresh().ok());
  ResidencySnapshot s = manager_->Snapshot();
  EXPECT_EQ(s.device.budget_bytes, 700 * kMiB);
  EXPECT_EQ(s.device.used_bytes, 600 * kMiB);
  // Below what is resident (the reserve now matters too): evicts down to the new budget.
  auto strict = BudgetWatcher::Create(&device_, manager_.get(),
                                      {.device_limit = 1024 * kMiB, .device_reserve = 300 * kMiB,
                                       .period = absl::Hours(1)});
  ASSERT_TRUE(strict.ok());
  EXPECT_EQ(manager_->Snapshot().device.budget_bytes, 400 * kMiB);  // 100 + 600 - 300
  s = manager_->Snapshot();
  EXPECT_EQ(s.device.used_bytes, 300 * kMiB);
  EXPECT_EQ(s.totals.evictions, 1u);
  EXPECT_FALSE(s.device.over_budget);
}

// On `cpu` both tiers are RAM: with a host limit far above the machine, the host budget is what
// MemAvailable leaves after the device budget, so the two together stay within MemAvailable
// (plus fusiond's own usage, which MemAvailable no longer counts). A small limit binds as is.
TEST_F(MemoryStateTest, OnTheCpuDeviceAndHostBudgetsTogetherStayWithinMemAvailable) {
  auto mem = ReadHostMemory();
  ASSERT_TRUE(mem.ok()) << mem.status();
  device_.available = mem->available_bytes;  // the CPU device's free memory is MemAvailable
  auto watcher = BudgetWatcher::Create(&device_, manager_.get(),
                                       {.device_limit = 1024 * kMiB, .device_reserve = 256 * kMiB,
                                        .host_limit = uint64_t{1} << 50, .period = absl::Hours(1)});
  ASSERT_TRUE(watcher.ok());
  const ResidencySnapshot s = manager_->Snapshot();
  const uint64_t own = s.device.used_bytes + s.device.reserved_bytes + s.host.used_bytes + s.host.reserved_bytes;
  const uint64_t slack = 64 * kMiB;  // MemAvailable moves between the two reads
  EXPECT_EQ(s.device.budget_bytes, 1024 * kMiB);
  EXPECT_GT(s.host.budget_bytes, 0u);
  EXPECT_LE(s.device.budget_bytes + s.host.budget_bytes, mem->available_bytes + own + slack);
  EXPECT_LT(s.host.budget_bytes, uint64_t{1} << 50);
  auto small = BudgetWatcher::Create(&device_, manager_.get(),
                                     {.device_limit = 1024 * kMiB, .host_limit = 10 * kMiB, .period = absl::Hours(1)});
  ASSERT_TRUE(small.ok());
  EXPECT_EQ(manager_->Snapshot().host.budget_bytes, 10 * kMiB);
}

// With no device limit on the CPU (fusiond --device cpu and nothing else) the device tier
// leaves the host tier its share: the host limit, at most half of what is reachable. Before,
// the device took all of MemAvailable and every job's decode or encode waited for 0 bytes.
TEST_F(MemoryStateTest, OnTheCpuDeviceWithNoDeviceLimitTheHostTierKeepsItsShare) {
  auto mem = ReadHostMemory();
  ASSERT_TRUE(mem.ok()) << mem.status();
  device_.available = mem->available_bytes;
  const uint64_t slack = 64 * kMiB;  // MemAvailable moves between the reads
  const uint64_t reserve = 256 * kMiB;
  for (const uint64_t host_limit : {uint64_t{512} * kMiB, uint64_t{0}}) {
    auto watcher = BudgetWatcher::Create(&device_, manager_.get(),
                                         {.device_reserve = reserve, .host_limit = host_limit, .period = absl::Hours(1)});
    ASSERT_TRUE(watcher.ok());
    const ResidencySnapshot s = manager_->Snapshot();
    const uint64_t own = s.device.used_bytes + s.device.reserved_bytes + s.host.used_bytes + s.host.reserved_bytes;
    const uint64_t reachable = mem->available_bytes + own - reserve;
    const uint64_t share = std::min(host_limit == 0 ? reachable : host_limit, reachable / 2);
    std::printf("host limit %llu: device budget %llu, host budget %llu bytes (share %llu)\n",
                static_cast<unsigned long long>(host_limit), static_cast<unsigned long long>(s.device.budget_bytes),
                static_cast<unsigned long long>(s.host.budget_bytes), static_cast<unsigned long long>(share));
    EXPECT_GE(s.host.budget_bytes + slack, share);
    EXPECT_LE(s.host.budget_bytes, share + slack);
    EXPECT_GT(s.device.budget_bytes, 0u);
    EXPECT_LE(s.device.budget_bytes + s.host.budget_bytes, reachable + slack);
  }
}

// A device limit above what fusiond can reach on the CPU (--device-memory-limit 2GiB under a
// 1280 MiB cgroup cap, as compare_status_quo.py --cap ran it) no longer takes the host tier's
// share: before, the device budget took all of the ~1 GiB reachable, the host budget was what
// was left (~60-110 MiB) and 4 concurrent jobs waited for host memory until their deadline.
TEST_F(MemoryStateTest, OnTheCpuDeviceADeviceLimitAboveWhatIsReachableLeavesTheHostItsShare) {
  device_.available = 1000 * kMiB;
  const HostMemoryInfo capped{1280 * kMiB, 1000 * kMiB};  // MemTotal and MemAvailable under the cap
  auto watcher = BudgetWatcher::Create(&device_, manager_.get(),
                                       {.device_limit = 2048 * kMiB, .device_reserve = 0,
                                        .period = absl::Hours(1),
                                        .read_host = [&] { return absl::StatusOr<HostMemoryInfo>(capped); }});
  ASSERT_TRUE(watcher.ok()) << watcher.status();
  const ResidencySnapshot s = manager_->Snapshot();
  EXPECT_EQ(s.device.budget_bytes, 500 * kMiB);  // reachable 1000 MiB, half of it kept for the host
  EXPECT_EQ(s.host.budget_bytes, 500 * kMiB);
  // A device limit under the rest binds as it is; the host gets the remainder.
  auto small = BudgetWatcher::Create(&device_, manager_.get(),
                                     {.device_limit = 300 * kMiB, .device_reserve = 0, .period = absl::Hours(1),
                                      .read_host = [&] { return absl::StatusOr<HostMemoryInfo>(capped); }});
  ASSERT_TRUE(small.ok()) << small.status();
  EXPECT_EQ(manager_->Snapshot().device.budget_bytes, 300 * kMiB);
  EXPECT_EQ(manager_->Snapshot().host.budget_bytes, 700 * kMiB);
}

}  // namespace
}  // namespace fusion
