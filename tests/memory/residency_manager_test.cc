// Behaviour of the ResidencyManager with a fake loader: eviction order, pins, leases, refusal
// codes and messages, waits, measured charges, budget changes, one-shot release, counters.
#include "memory/residency_manager.h"

#include <atomic>
#include <thread>

#include "absl/strings/match.h"
#include "fake_loader.h"
#include "gtest/gtest.h"

namespace fusion {
namespace {

constexpr uint64_t kMiB = 1ull << 20;
const Owner kJob{"job-1", 1000};

absl::Time Soon() { return absl::Now() + absl::Milliseconds(50); }

class ResidencyTest : public ::testing::Test {
 protected:
  // Models a..e of the given MiB sizes; device budget in MiB.
  void Make(uint64_t budget_mib, std::string policy = "lru", uint64_t host_mib = 0,
            const FutureReferences* future = nullptr, double one_shot_pressure = 0.9,
            uint64_t one_shot_min_free_mib = 0) {
    ResidencyManager::Options o;
    o.one_shot_pressure = one_shot_pressure;
    o.one_shot_min_free_bytes = one_shot_min_free_mib * kMiB;
    o.device_budget_bytes = budget_mib * kMiB;
    o.host_budget_bytes = host_mib * kMiB;
    o.policy = std::move(policy);
    o.loader = &loader_;
    o.future = future;
    o.check_invariant = true;
    auto m = ResidencyManager::Create(o);
    ASSERT_TRUE(m.ok()) << m.status();
    manager_ = *std::move(m);
  }
  void Add(const std::string& name, uint64_t mib, bool one_shot = false) {
    loader_.SetBytes(name, mib * kMiB);
    ASSERT_TRUE(manager_->RegisterModel({name, mib * kMiB, 0, one_shot}).ok());
  }
  // Acquires and immediately releases (a stage that ran).
  void Use(const std::string& name, uint64_t working_mib = 0) {
    auto lease = manager_->Acquire(kJob, name, working_mib * kMiB, Soon());
    ASSERT_TRUE(lease.ok()) << lease.status();
  }
  ModelSnapshot Model(const std::string& name) {
    for (const ModelSnapshot& m : manager_->Snapshot().models) {
      if (m.name == name) return m;
    }
    ADD_FAILURE() << "no model " << name;
    return {};
  }

  testing::FakeLoader loader_;
  std::unique_ptr<ResidencyManager> manager_;
};

// The host tier is budgeted like the device tier (docs/ARCHITECTURE.md#invariants, 1): a host
// working set drops host copies of weights (a cache) to fit, waits for another job's host working
// set to end, and is refused at once, naming the tier and the bytes, when it exceeds the whole
// budget.
TEST_F(ResidencyTest, HostWorkingSetsDropWeightCopiesWaitForOthersAndRefuseWhatCanNeverFit) {
  Make(/*budget_mib=*/100, "lru", /*host_mib=*/50);
  Add("a", 20);
  Add("b", 20);
  Use("a");
  Use("b");  // both host copies (40 of 50 MiB) stay
  ASSERT_EQ(manager_->Snapshot().host.used_bytes, 40 * kMiB);

  auto first = manager_->AcquireHost(kJob, "stage 'x' CPU fallback", 25 * kMiB, Soon());
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->tier(), Tier::kHost);
  ResidencySnapshot s = manager_->Snapshot();
  EXPECT_EQ(s.host.reserved_bytes, 25 * kMiB);
  EXPECT_LE(s.host.used_bytes + s.host.reserved_bytes, 50 * kMiB);
  EXPECT_EQ(Model("a").host_bytes, 0u) << "the least recently used copy made room";
  EXPECT_EQ(Model("b").host_bytes, 20 * kMiB);
  ASSERT_EQ(s.host_leases.size(), 1u);
  EXPECT_EQ(s.host_leases[0].model, "stage 'x' CPU fallback");

  // 30 MiB more: dropping b leaves 25 free: it waits for the first working set.
  std::thread release([&] {
    absl::SleepFor(absl::Milliseconds(100));
    first->Release();
  });
  auto second = manager_->AcquireHost(Owner{"job-2", 1001}, "images", 30 * kMiB, absl::Now() + absl::Seconds(5));
  release.join();
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(manager_->Snapshot().host.reserved_bytes, 30 * kMiB);
  auto late = manager_->AcquireHost(kJob, "more images", 30 * kMiB, Soon());
  EXPECT_EQ(late.status().code(), absl::StatusCode::kDeadlineExceeded) << late.status();

  auto never = manager_->AcquireHost(kJob, "stage 'upscale' CPU fallback", 51 * kMiB, absl::InfiniteFuture());
  EXPECT_EQ(never.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(absl::StrContains(never.status().message(),
                                "host tier: stage 'upscale' CPU fallback needs 51.0 MiB (53477376 bytes), host budget 50.0 MiB"))
      << never.status();
  second->Release();
  EXPECT_EQ(manager_->Snapshot().host.reserved_bytes, 0u);
  EXPECT_TRUE(manager_->CheckInvariant().ok());
}

// An upload's temporaries (ModelSpec::upload_extra_bytes: the CPU device clones the weights)
// are reserved while it runs: 40 MiB of model + working set would fit the 50 MiB left beside a
// leased model, but the upload needs 30 MiB more, so it waits; the extra is capped at what the
// budget has beyond the model and its working set, so it never makes a model unfittable.
TEST_F(ResidencyTest, AnUploadReservesRoomForItsTemporaries) {
  Make(100);
  Add("b", 50);
  loader_.SetBytes("a", 30 * kMiB);
  ASSERT_TRUE(manager_->RegisterModel({.name = "a", .device_bytes = 30 * kMiB, .upload_extra_bytes = 30 * kMiB}).ok());
  auto held = manager_->Acquire(Owner{"job-2", 1001}, "b", 0, Soon());
  ASSERT_TRUE(held.ok()) << held.status();
  auto waited = manager_->Acquire(kJob, "a", 10 * kMiB, Soon());
  EXPECT_EQ(waited.status().code(), absl::StatusCode::kDeadlineExceeded) << waited.status();
  held->Release();
  auto lease = manager_->Acquire(kJob, "a", 10 * kMiB, Soon());
  ASSERT_TRUE(lease.ok()) << lease.status();
  // After the upload only the model and the working set are charged.
  EXPECT_EQ(manager_->Snapshot().device.reserved_bytes, 10 * kMiB);
  EXPECT_GE(manager_->Snapshot().device.peak_bytes, 70 * kMiB);
  lease->Release();
  EXPECT_TRUE(manager_->CheckInvariant().ok());
}

TEST_F(ResidencyTest, LruEvictsLeastRecentlyUsedModel) {
  Make(300);
  Add("a", 100), Add("b", 100), Add("c", 100), Add("d", 100);
  Use("a"), Use("b"), Use("c"), Use("a");  // b is now the least recently used
  loader_.ClearLog();
  Use("d");
  EXPECT_EQ(loader_.log(), (std::vector<std::string>{"release_device b", "load d", "upload d"}));
  EXPECT_EQ(Model("b").state, ModelState::kHost);
  EXPECT_EQ(Model("a").state, ModelState::kDevice);
}

TEST_F(ResidencyTest, EvictedModelStaysOnHostAndIsReuploadedWithoutReload) {
  Make(100);
  Add("a", 100), Add("b", 100);
  Use("a"), Use("b"), Use("a");
  EXPECT_EQ(loader_.Count("load a"), 1);
  EXPECT_EQ(loader_.Count("upload a"), 2);
  EXPECT_EQ(Model("b").state, ModelState::kHost);
}

TEST_F(ResidencyTest, PinnedModelIsNeverEvicted) {
  Make(300);
  Add("p", 100), Add("a", 100), Add("b", 100), Add("c", 100);
  ASSERT_TRUE(manager_->Pin("p", Soon()).ok());
  for (int i = 0; i < 5; ++i) Use("a"), Use("b"), Use("c");
  EXPECT_EQ(loader_.Count("release_device p"), 0);
  EXPECT_TRUE(Model("p").pinned);
  EXPECT_EQ(Model("p").state, ModelState::kDevice);
  ASSERT_TRUE(manager_->Unpin("p").ok());
  Use("a"), Use("b"), Use("c");
  EXPECT_EQ(loader_.Count("release_device p"), 1);
}

TEST_F(ResidencyTest, LeasedModelIsNeverEvicted) {
  Make(200);
  Add("a", 100), Add("b", 100), Add("c", 100);
  auto held = manager_->Acquire(kJob, "a", 0, Soon());  // oldest, but leased
  ASSERT_TRUE(held.ok());
  Use("b"), Use("c");
  EXPECT_EQ(loader_.Count("release_device a"), 0);
  EXPECT_EQ(loader_.Count("release_device b"), 1);
  EXPECT_EQ(Model("a").state, ModelState::kInUse);
}

TEST_F(ResidencyTest, ChargeIsReleasedOnlyAfterLastLease) {
  Make(1000);
  Add("a", 100);
  auto l1 = manager_->Acquire(kJob, "a", 50 * kMiB, Soon());
  auto l2 = manager_->Acquire({"job-2", 1001}, "a", 30 * kMiB, Soon());
  ASSERT_TRUE(l1.ok() && l2.ok());
  EXPECT_EQ(manager_->Snapshot().device.reserved_bytes, 80 * kMiB);
  EXPECT_EQ(Model("a").leases, 2u);
  l1->Release();
  l1->Release();  // one-shot: the second call does nothing
  EXPECT_EQ(manager_->Snapshot().device.reserved_bytes, 30 * kMiB);
  EXPECT_EQ(Model("a").state, ModelState::kInUse);
  Lease moved = *std::move(l2);
  EXPECT_EQ(Model("a").leases, 1u);
  moved = Lease();
  EXPECT_EQ(manager_->Snapshot().device.reserved_bytes, 0u);
  EXPECT_EQ(Model("a").state, ModelState::kDevice);
  EXPECT_EQ(manager_->Snapshot().device.used_bytes, 100 * kMiB);
}

TEST_F(ResidencyTest, RequestThatCanNeverFitIsResourceExhaustedAtOnce) {
  Make(4096);
  Add("generator", 1843), Add("p", 2048);
  ASSERT_TRUE(manager_->Pin("p", Soon()).ok());
  const absl::Time start = absl::Now();
  auto lease = manager_->Acquire(kJob, "generator", 300 * kMiB, absl::InfiniteFuture());
  EXPECT_LT(absl::Now() - start, absl::Milliseconds(20));
  ASSERT_EQ(lease.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(lease.status().message(),
            "model 'generator' needs 2.1 GiB (model 1.8 GiB + working set 300.0 MiB), 2.0 GiB "
            "pinned, budget 4.0 GiB: it cannot fit even after every eviction");
  EXPECT_EQ(manager_->Snapshot().totals.refusals, 1u);
  EXPECT_EQ(loader_.Count("load generator"), 0);
}

TEST_F(ResidencyTest, RequestThatFitsOnceLeasesEndWaitsThenDeadlineExceeded) {
  Make(4096);
  Add("generator", 1843), Add("enhancer", 3072);
  auto held = manager_->Acquire(kJob, "enhancer", 0, Soon());
  ASSERT_TRUE(held.ok());
  const absl::Time start = absl::Now();
  auto lease = manager_->Acquire(kJob, "generator", 0, start + absl::Milliseconds(100));
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(100));
  ASSERT_EQ(lease.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(lease.status().message(),
            "model 'generator' needs 1.8 GiB, 0 B evictable, 3.0 GiB held by running stages, "
            "budget 4.0 GiB: waited for memory until the deadline");
  EXPECT_EQ(manager_->Snapshot().totals.waits, 1u);
}

TEST_F(ResidencyTest, WaitingAcquireProceedsWhenTheBlockingLeaseEnds) {
  Make(200);
  Add("a", 150), Add("b", 150);
  auto held = manager_->Acquire(kJob, "a", 0, Soon());
  ASSERT_TRUE(held.ok());
  std::thread releaser([&] {
    absl::SleepFor(absl::Milliseconds(30));
    held->Release();
  });
  auto lease = manager_->Acquire(kJob, "b", 0, absl::Now() + absl::Seconds(10));
  releaser.join();
  ASSERT_TRUE(lease.ok()) << lease.status();
  EXPECT_EQ(loader_.log().back(), "upload b");
  EXPECT_EQ(Model("b").counters.waits, 1u);
}

TEST_F(ResidencyTest, CancelledWaitEndsCancelledWithNothingReservedOrRefused) {
  Make(4096);
  Add("generator", 1843), Add("enhancer", 3072);
  auto held = manager_->Acquire(kJob, "enhancer", 0, Soon());
  ASSERT_TRUE(held.ok());
  std::atomic<bool> cancel{false};
  std::atomic<int> polls{0};
  std::thread canceller([&] {
    absl::SleepFor(absl::Milliseconds(30));
    cancel = true;
  });
  // A deadline far away: only the cancellation can end this wait within the test's time limit.
  auto lease = manager_->Acquire(kJob, "generator", 0, absl::Now() + absl::Hours(1), [&] {
    ++polls;
    return cancel.load();
  });
  canceller.join();
  ASSERT_EQ(lease.status().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(lease.status().message(), "job cancelled while waiting for device memory for model 'generator'");
  EXPECT_GE(polls.load(), 1);
  const ResidencySnapshot s = manager_->Snapshot();
  EXPECT_EQ(s.device.reserved_bytes, 0u);
  EXPECT_EQ(s.totals.refusals, 0u) << "a cancel is not a refusal";
  EXPECT_EQ(s.totals.waits, 1u);
  EXPECT_EQ(Model("generator").state, ModelState::kAbsent);
  held->Release();
  EXPECT_TRUE(manager_->Acquire(kJob, "generator", 0, Soon()).ok()) << "the manager is unharmed";
}

TEST_F(ResidencyTest, PinBeyondBudgetIsFailedPrecondition) {
  Make(1024);
  Add("a", 600), Add("b", 600);
  ASSERT_TRUE(manager_->Pin("a", Soon()).ok());
  absl::Status s = manager_->Pin("b", Soon());
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(), "cannot pin model 'b' (600.0 MiB): 600.0 MiB already pinned, budget 1.0 GiB");
  EXPECT_EQ(Model("b").state, ModelState::kAbsent);
}

TEST_F(ResidencyTest, UnloadRefusesPinnedOrLeasedModelAndDropsOthersToStorage) {
  Make(1000);
  Add("a", 100), Add("b", 100);
  ASSERT_TRUE(manager_->Pin("a", Soon()).ok());
  EXPECT_EQ(manager_->Unload("a").code(), absl::StatusCode::kFailedPrecondition);
  Use("b");
  ASSERT_TRUE(manager_->Unload("b").ok());
  EXPECT_EQ(Model("b").state, ModelState::kAbsent);
  EXPECT_EQ(loader_.Count("release_host b"), 1);
  EXPECT_EQ(manager_->Unload("zzz").code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(manager_->Acquire(kJob, "zzz", 0, Soon()).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(ResidencyTest, MeasuredBytesReplaceTheCatalogueEstimate) {
  Make(1000);
  Add("a", 100);
  loader_.SetBytes("a", 130 * kMiB);  // the real model is larger than the manifest said
  Use("a");
  EXPECT_EQ(Model("a").bytes, 130 * kMiB);
  EXPECT_TRUE(Model("a").measured);
  EXPECT_EQ(manager_->Snapshot().device.used_bytes, 130 * kMiB);
  EXPECT_EQ(manager_->Snapshot().totals.bytes_uploaded, 130 * kMiB);
}

TEST_F(ResidencyTest, MeasurementAboveEstimateEvictsOthersToStayInBudget) {
  Make(250);
  Add("a", 100), Add("b", 100);
  Use("a");
  loader_.SetBytes("b", 200 * kMiB);
  Use("b");
  EXPECT_EQ(Model("a").state, ModelState::kHost);
  EXPECT_LE(manager_->Snapshot().device.used_bytes, 250 * kMiB);
  EXPECT_TRUE(manager_->CheckInvariant().ok());
}

TEST_F(ResidencyTest, WorkingSetEstimateIsRaisedToMeasuredPeak) {
  Make(1000);
  EXPECT_EQ(manager_->WorkingSetEstimate("gen", "512x512", 64 * kMiB), 64 * kMiB);
  manager_->RecordWorkingSetPeak("gen", "512x512", 90 * kMiB);
  manager_->RecordWorkingSetPeak("gen", "512x512", 70 * kMiB);  // never lowered
  EXPECT_EQ(manager_->WorkingSetEstimate("gen", "512x512", 64 * kMiB), 90 * kMiB);
  EXPECT_EQ(manager_->WorkingSetEstimate("gen", "1024x1024", 64 * kMiB), 64 * kMiB);
}

TEST_F(ResidencyTest, ShrinkingBudgetEvictsDownAndReportsOverBudgetUntilLeasesEnd) {
  Make(400);
  Add("a", 100), Add("b", 100), Add("c", 100);
  Use("a"), Use("b");
  auto held = manager_->Acquire(kJob, "c", 50 * kMiB, Soon());
  ASSERT_TRUE(held.ok());
  manager_->SetDeviceBudget(120 * kMiB);  // another process took memory
  ResidencySnapshot s = manager_->Snapshot();
  EXPECT_EQ(s.device.used_bytes, 100 * kMiB);  // only the leased model is left
  EXPECT_TRUE(s.device.over_budget);
  EXPECT_EQ(manager_->Acquire(kJob, "c", 0, absl::Now()).status().code(),
            absl::StatusCode::kDeadlineExceeded);  // admits nothing new
  held->Release();
  s = manager_->Snapshot();
  EXPECT_FALSE(s.device.over_budget);
  EXPECT_EQ(s.device.used_bytes, 100 * kMiB);
  manager_->SetDeviceBudget(50 * kMiB);
  EXPECT_EQ(manager_->Snapshot().device.used_bytes, 0u);
}

TEST_F(ResidencyTest, OneShotModelIsReleasedAfterUseUnderPressure) {
  Make(200);
  Add("detect", 20, /*one_shot=*/true), Add("gen", 170);
  Use("detect");
  EXPECT_EQ(Model("detect").state, ModelState::kDevice);  // no pressure: kept
  auto gen = manager_->Acquire(kJob, "gen", 0, Soon());
  ASSERT_TRUE(gen.ok());
  Use("detect");  // 190 of 200 MiB in use: above 90%, released right after
  EXPECT_EQ(Model("detect").state, ModelState::kHost);
}

TEST_F(ResidencyTest, OneShotModelIsReleasedAtExactlyThePressureFraction) {
  Make(200, "lru", 0, nullptr, /*one_shot_pressure=*/0.85);
  Add("detect", 20, /*one_shot=*/true), Add("gen", 149);
  auto gen = manager_->Acquire(kJob, "gen", 0, Soon());
  ASSERT_TRUE(gen.ok());
  Use("detect");  // 169 of 200 MiB = 84.5%: kept
  EXPECT_EQ(Model("detect").state, ModelState::kDevice);
  auto more = manager_->Acquire(kJob, "gen", 1 * kMiB, Soon());  // 170 of 200 = 85% with it
  ASSERT_TRUE(more.ok());
  Use("detect");
  EXPECT_EQ(Model("detect").state, ModelState::kHost);
}

TEST_F(ResidencyTest, OneShotModelIsReleasedWhenLessThanTheMinimumIsFree) {
  // 4096 MiB budget (an eighth is 512 MiB: the minimum applies whole), 0.95 fraction.
  Make(4096, "lru", 0, nullptr, 0.95, /*one_shot_min_free_mib=*/512);
  Add("detect", 20, /*one_shot=*/true), Add("gen", 3556);
  Use("detect");  // 20 MiB in use: kept
  EXPECT_EQ(Model("detect").state, ModelState::kDevice);
  auto gen = manager_->Acquire(kJob, "gen", 0, Soon());
  ASSERT_TRUE(gen.ok());
  Use("detect");  // 3576 MiB in use (87%, below 95%), 520 MiB free: kept
  EXPECT_EQ(Model("detect").state, ModelState::kDevice);
  auto ws = manager_->Acquire(kJob, "gen", 9 * kMiB, Soon());  // 511 MiB free with detect's lease
  ASSERT_TRUE(ws.ok());
  Use("detect");
  EXPECT_EQ(Model("detect").state, ModelState::kHost);
}

// The one-shot minimum free is capped at an eighth of the budget (32 MiB here): fusiond's 512
// MiB on a 256 MiB budget would always be "pressure", uploading detect and landmarks again for
// every frame of a video.
TEST_F(ResidencyTest, TheMinimumFreeScalesWithASmallBudget) {
  Make(256, "lru", 0, nullptr, 0.85, /*one_shot_min_free_mib=*/512);
  Add("detect", 20, /*one_shot=*/true), Add("gen", 100);
  auto gen = manager_->Acquire(kJob, "gen", 0, Soon());
  ASSERT_TRUE(gen.ok());
  Use("detect");  // 120 of 256 MiB in use, 136 MiB free (less than 512, more than 32): kept
  EXPECT_EQ(Model("detect").state, ModelState::kDevice);
  EXPECT_EQ(Model("detect").counters.uploads, 1u);
  Use("detect");
  EXPECT_EQ(Model("detect").counters.uploads, 1u);  // no second upload
  auto ws = manager_->Acquire(kJob, "gen", 105 * kMiB, Soon());  // 31 MiB free: under 32
  ASSERT_TRUE(ws.ok());
  Use("detect");
  EXPECT_EQ(Model("detect").state, ModelState::kHost);
}

TEST_F(ResidencyTest, HostBudgetDropsLeastRecentHostCopyToStorage) {
  Make(100, "lru", /*host_mib=*/250);
  Add("a", 100), Add("b", 100), Add("c", 100);
  Use("a"), Use("b"), Use("c");  // a and b were evicted to host; host holds a, b, c = 300
  EXPECT_EQ(Model("a").state, ModelState::kAbsent);
  EXPECT_EQ(loader_.Count("release_host a"), 1);
  EXPECT_LE(manager_->Snapshot().host.used_bytes, 250 * kMiB);
  Use("a");
  EXPECT_EQ(loader_.Count("load a"), 2);
}

// Host tier bytes (snapshot) after checking it against the models' host copies and the
// manager's own invariant.
uint64_t HostUsed(const ResidencyManager& manager) {
  const ResidencySnapshot s = manager.Snapshot();
  uint64_t copies = 0;
  for (const ModelSnapshot& m : s.models) copies += m.host_bytes;
  EXPECT_EQ(copies, s.host.used_bytes);
  EXPECT_TRUE(manager.CheckInvariant().ok()) << manager.CheckInvariant();
  return s.host.used_bytes;
}

TEST_F(ResidencyTest, HostBudgetDropsHostCopiesOfDeviceResidentModelsAndKeepsTheirDeviceCopies) {
  Make(1000, "lru", /*host_mib=*/250);
  Add("a", 100), Add("b", 100), Add("c", 100);
  Use("a"), Use("b");
  EXPECT_EQ(HostUsed(*manager_), 200 * kMiB);
  Use("c");  // 300 MiB of host copies: a's (least recent) goes, although a is on the device
  EXPECT_EQ(HostUsed(*manager_), 200 * kMiB);
  EXPECT_EQ(Model("a").state, ModelState::kDevice);
  EXPECT_EQ(Model("a").host_bytes, 0u);
  EXPECT_EQ(Model("b").host_bytes, 100 * kMiB);
  EXPECT_EQ(Model("c").host_bytes, 100 * kMiB);
  EXPECT_EQ(manager_->Snapshot().device.used_bytes, 300 * kMiB);
  EXPECT_EQ(loader_.Count("release_device "), 0);
  EXPECT_EQ(loader_.log(), (std::vector<std::string>{"load a", "upload a", "load b", "upload b",
                                                     "load c", "release_host a", "upload c"}));
  Use("a");  // still on the device: a hit, nothing re-read
  EXPECT_EQ(loader_.Count("load a"), 1);
  EXPECT_FALSE(manager_->Snapshot().host.over_budget);
}

TEST_F(ResidencyTest, HostCopiesAreDroppedLeastRecentlyUsedFirst) {
  Make(1000, "lru", /*host_mib=*/200);
  Add("a", 100), Add("b", 100), Add("c", 100), Add("d", 100);
  Use("a"), Use("b"), Use("a");  // b is now the least recently used
  Use("c");
  Use("d");
  std::vector<std::string> drops;
  for (const std::string& entry : loader_.log()) {
    if (absl::StartsWith(entry, "release_host ")) drops.push_back(entry);
  }
  EXPECT_EQ(drops, (std::vector<std::string>{"release_host b", "release_host a"}));
  EXPECT_EQ(HostUsed(*manager_), 200 * kMiB);
  EXPECT_EQ(Model("c").host_bytes + Model("d").host_bytes, 200 * kMiB);
}

TEST_F(ResidencyTest, UploadAfterTheHostCopyWasDroppedReloadsFromStorage) {
  Make(200, "lru", /*host_mib=*/100);
  Add("a", 100), Add("b", 100), Add("c", 100);
  Use("a");
  EXPECT_EQ(HostUsed(*manager_), 100 * kMiB);
  Use("b");  // b's load drops a's host copy; a stays on the device
  EXPECT_EQ(HostUsed(*manager_), 100 * kMiB);
  EXPECT_EQ(Model("a").state, ModelState::kDevice);
  Use("c");  // evicts a, which has no host copy left: straight to storage
  EXPECT_EQ(HostUsed(*manager_), 100 * kMiB);
  EXPECT_EQ(Model("a").state, ModelState::kAbsent);
  EXPECT_EQ(Model("b").state, ModelState::kDevice);
  EXPECT_EQ(Model("b").host_bytes, 0u);
  ASSERT_TRUE(manager_->Load("a", Soon()).ok());  // re-read from storage, uploaded
  EXPECT_EQ(loader_.Count("load a"), 2);
  EXPECT_EQ(Model("a").state, ModelState::kDevice);
  EXPECT_EQ(Model("a").host_bytes, 100 * kMiB);
  EXPECT_EQ(HostUsed(*manager_), 100 * kMiB);
  EXPECT_EQ(loader_.Count("release_host "), 3);  // a, b, c: each when the next one loaded
  ASSERT_TRUE(manager_->Unload("c").ok());  // device only: no host copy to release
  EXPECT_EQ(Model("c").state, ModelState::kAbsent);
  EXPECT_EQ(loader_.Count("release_host "), 3);
  EXPECT_EQ(manager_->Snapshot().device.used_bytes, 100 * kMiB);
  EXPECT_FALSE(manager_->Snapshot().host.over_budget);
}

TEST_F(ResidencyTest, ModelLargerThanTheHostBudgetIsUploadedThenLosesItsHostCopyAlone) {
  Make(1000, "lru", /*host_mib=*/50);
  Add("a", 30), Add("big", 80);
  Use("a");
  TierUsage during;
  loader_.during_upload = [&](const std::string& model) {
    if (model == "big") during = manager_->Snapshot().host;
  };
  Use("big");
  EXPECT_EQ(during.used_bytes, 110 * kMiB);  // the upload needs the host copy
  EXPECT_TRUE(during.over_budget);
  EXPECT_EQ(HostUsed(*manager_), 30 * kMiB);  // a's copy is not sacrificed for one that can't stay
  EXPECT_EQ(Model("a").host_bytes, 30 * kMiB);
  EXPECT_EQ(Model("big").state, ModelState::kDevice);
  EXPECT_EQ(Model("big").host_bytes, 0u);
  EXPECT_EQ(loader_.Count("release_host "), 1);
  EXPECT_EQ(loader_.Count("release_host big"), 1);
  EXPECT_FALSE(manager_->Snapshot().host.over_budget);
}

TEST_F(ResidencyTest, ShrinkingTheHostBudgetDropsHostCopiesOfResidentModels) {
  Make(1000, "lru");
  Add("a", 100), Add("b", 100), Add("c", 100);
  Use("a"), Use("b"), Use("c");
  EXPECT_EQ(HostUsed(*manager_), 300 * kMiB);
  manager_->SetHostBudget(150 * kMiB);
  EXPECT_EQ(HostUsed(*manager_), 100 * kMiB);
  EXPECT_EQ(Model("c").host_bytes, 100 * kMiB);
  EXPECT_EQ(manager_->Snapshot().device.used_bytes, 300 * kMiB);
  EXPECT_EQ(loader_.Count("release_device "), 0);
  EXPECT_FALSE(manager_->Snapshot().host.over_budget);
}

TEST_F(ResidencyTest, UploadRunsWithoutTheManagerLockAndReservesItsBytes) {
  Make(1000);
  Add("a", 100);
  ModelState seen = ModelState::kAbsent;
  uint64_t reserved = 0;
  // A lock held across Upload would deadlock this callback (the test would time out).
  loader_.during_upload = [&](const std::string&) {
    ResidencySnapshot s = manager_->Snapshot();
    seen = s.models[0].state;
    reserved = s.device.reserved_bytes;
  };
  Use("a", 10);
  EXPECT_EQ(seen, ModelState::kUploading);
  EXPECT_EQ(reserved, 110 * kMiB);  // model + working set held while in transit
}

TEST_F(ResidencyTest, LoaderFailurePassesThroughAndReturnsTheReservation) {
  Make(1000);
  Add("a", 100);
  loader_.FailUpload("a");
  auto lease = manager_->Acquire(kJob, "a", 10 * kMiB, Soon());
  EXPECT_EQ(lease.status().code(), absl::StatusCode::kInternal);
  ResidencySnapshot s = manager_->Snapshot();
  EXPECT_EQ(s.device.reserved_bytes, 0u);
  EXPECT_EQ(s.device.used_bytes, 0u);
  EXPECT_EQ(Model("a").state, ModelState::kHost);
}

TEST_F(ResidencyTest, CountersArePerModelAndTotal) {
  Make(200);
  Add("a", 100), Add("b", 150);
  Use("a"), Use("a"), Use("b"), Use("a");
  EXPECT_EQ(Model("a").counters.uploads, 2u);
  EXPECT_EQ(Model("a").counters.hits, 1u);
  EXPECT_EQ(Model("a").counters.misses, 2u);
  EXPECT_EQ(Model("a").counters.evictions, 1u);
  EXPECT_EQ(Model("a").counters.loads, 1u);
  EXPECT_EQ(Model("b").counters.evictions, 1u);
  ResidencyCounters t = manager_->Snapshot().totals;
  EXPECT_EQ(t.uploads, 3u);
  EXPECT_EQ(t.bytes_uploaded, 350 * kMiB);
  EXPECT_EQ(t.evictions, 2u);
  EXPECT_EQ(t.loads, 2u);
}

TEST_F(ResidencyTest, PeakTracksResidentPlusReserved) {
  Make(1000);
  Add("a", 100);
  { auto l = manager_->Acquire(kJob, "a", 300 * kMiB, Soon()); ASSERT_TRUE(l.ok()); }
  ResidencySnapshot s = manager_->Snapshot();
  EXPECT_EQ(s.device.peak_bytes, 400 * kMiB);
  EXPECT_EQ(s.device.used_bytes + s.device.reserved_bytes, 100 * kMiB);
}

TEST(ModelStateTest, ToStringNamesEveryState) {
  EXPECT_STREQ(ToString(ModelState::kAbsent), "ABSENT");
  EXPECT_STREQ(ToString(ModelState::kUploading), "UPLOADING");
  EXPECT_STREQ(ToString(ModelState::kInUse), "IN_USE");
  EXPECT_STREQ(ToString(ModelState::kEvicting), "EVICTING");
  EXPECT_STREQ(ToString(TierOf(ModelState::kHost)), "host");
  EXPECT_STREQ(ToString(TierOf(ModelState::kInUse)), "device");
}

// The working set a model's stage last asked for is what the planner's forecast expects its
// next stage to reserve: a granted one, and a refused one too (that stage is expected refused).
TEST_F(ResidencyTest, SnapshotKeepsTheWorkingSetEachModelsLastAcquireAskedFor) {
  Make(100);
  Add("a", 10);
  Add("b", 20);
  EXPECT_EQ(Model("a").last_working_bytes, 0u);  // never asked
  Use("a", 30);
  EXPECT_EQ(Model("a").last_working_bytes, 30 * kMiB);
  EXPECT_EQ(Model("b").last_working_bytes, 0u);
  Use("a", 5);  // a tile of it
  EXPECT_EQ(Model("a").last_working_bytes, 5 * kMiB);
  auto refused = manager_->Acquire(kJob, "b", 90 * kMiB, Soon());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(Model("b").last_working_bytes, 90 * kMiB);
}

}  // namespace
}  // namespace fusion
