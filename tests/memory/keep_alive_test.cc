// The residency manager's keep-alive (docs/MEMORY.md#keep-alive) with a fake loader and a fake
// clock: a model unused past its keep-alive is evicted to HOST (its host copy stays), pinned and
// leased models never expire, 0 and forever, the catalogue's per-model override, queued work
// holding a due model, the device-empty hook called once, and the manager's own thread (real
// clock, keep-alive 0: it must wake on the lease's end, not on a poll).
#include <memory>
#include <string>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "fake_loader.h"
#include "gtest/gtest.h"
#include "memory/residency_manager.h"

namespace fusion {
namespace {

constexpr uint64_t kMiB = 1ull << 20;
const Owner kJob{"job-1", 1000};

// Answers NextUse from a set the test changes.
class FakeFuture final : public FutureReferences {
 public:
  uint64_t NextUse(const std::string& model) const override {
    return model == wanted ? 0 : kNoFutureUse;
  }
  std::string wanted;
};

class KeepAliveTest : public ::testing::Test {
 protected:
  void Make(absl::Duration keep_alive, const FutureReferences* future = nullptr) {
    ResidencyManager::Options o;
    o.device_budget_bytes = 100 * kMiB;
    o.policy = "lru";
    o.loader = &loader_;
    o.future = future;
    o.check_invariant = true;
    o.keep_alive = keep_alive;
    o.clock = [this] { return now_; };
    o.on_device_empty = [this] { ++device_empty_calls_; };
    auto m = ResidencyManager::Create(o);
    ASSERT_TRUE(m.ok()) << m.status();
    manager_ = *std::move(m);
  }
  void Add(const std::string& name, uint64_t mib,
           std::optional<absl::Duration> keep_alive = std::nullopt) {
    loader_.SetBytes(name, mib * kMiB);
    ModelSpec spec{name, mib * kMiB};
    spec.keep_alive = keep_alive;
    ASSERT_TRUE(manager_->RegisterModel(spec).ok());
  }
  void Use(const std::string& name) {
    auto lease = manager_->Acquire(kJob, name, 0, absl::Now() + absl::Seconds(5));
    ASSERT_TRUE(lease.ok()) << lease.status();
  }
  ModelSnapshot Model(const std::string& name) const {
    for (const ModelSnapshot& m : manager_->Snapshot().models) {
      if (m.name == name) return m;
    }
    ADD_FAILURE() << "no model " << name;
    return {};
  }

  absl::Time now_ = absl::FromUnixSeconds(1'000'000);
  int device_empty_calls_ = 0;
  testing::FakeLoader loader_;
  std::unique_ptr<ResidencyManager> manager_;
};

TEST_F(KeepAliveTest, UnusedModelLeavesTheDeviceForTheHostTierAfterItsKeepAlive) {
  Make(absl::Minutes(5));
  Add("a", 10);
  Use("a");
  EXPECT_EQ(manager_->NextExpiry(), now_ + absl::Minutes(5));
  EXPECT_EQ(Model("a").keep_alive, absl::Minutes(5));

  now_ += absl::Minutes(5) - absl::Seconds(1);
  EXPECT_EQ(manager_->ExpireIdle(), 0);
  EXPECT_EQ(Model("a").state, ModelState::kDevice);
  EXPECT_EQ(Model("a").expires_in, absl::Seconds(1));

  now_ += absl::Seconds(1);
  EXPECT_EQ(manager_->ExpireIdle(), 1);
  const ModelSnapshot a = Model("a");
  EXPECT_EQ(a.state, ModelState::kHost);
  EXPECT_EQ(a.host_bytes, 10 * kMiB) << "the host copy stays, a cache under the host budget";
  EXPECT_FALSE(a.expires_in.has_value());
  EXPECT_EQ(a.counters.evictions, 1u);
  EXPECT_EQ(a.counters.expirations, 1u);
  const ResidencySnapshot s = manager_->Snapshot();
  EXPECT_EQ(s.device.used_bytes, 0u);
  EXPECT_EQ(s.totals.expirations, 1u);
  EXPECT_EQ(loader_.Count("release_device a"), 1);
  EXPECT_EQ(loader_.Count("release_host a"), 0);
  EXPECT_EQ(manager_->NextExpiry(), absl::InfiniteFuture());

  // The next use pays one upload from the host copy, no load from storage.
  Use("a");
  EXPECT_EQ(Model("a").counters.uploads, 2u);
  EXPECT_EQ(Model("a").counters.loads, 1u);
  EXPECT_EQ(manager_->Snapshot().totals.bytes_uploaded, 20 * kMiB);
}

TEST_F(KeepAliveTest, PinnedModelNeverExpires) {
  Make(absl::Seconds(10));
  Add("p", 10);
  Add("a", 10);
  ASSERT_TRUE(manager_->Pin("p", absl::Now() + absl::Seconds(5)).ok());
  Use("a");
  now_ += absl::Hours(24);
  EXPECT_EQ(manager_->ExpireIdle(), 1);
  EXPECT_EQ(Model("a").state, ModelState::kHost);
  EXPECT_EQ(Model("p").state, ModelState::kDevice);
  EXPECT_FALSE(Model("p").keep_alive.has_value());
  EXPECT_FALSE(Model("p").expires_in.has_value());
  EXPECT_EQ(device_empty_calls_, 0) << "the pinned model is still on the device";

  // Unpinned, its countdown starts at the unpin, not at its last use a day ago.
  ASSERT_TRUE(manager_->Unpin("p").ok());
  EXPECT_EQ(Model("p").expires_in, absl::Seconds(10));
  EXPECT_EQ(manager_->ExpireIdle(), 0);
  now_ += absl::Seconds(10);
  EXPECT_EQ(manager_->ExpireIdle(), 1);
  EXPECT_EQ(Model("p").state, ModelState::kHost);
  EXPECT_EQ(device_empty_calls_, 1);
}

TEST_F(KeepAliveTest, LeasedModelNeverExpiresAndCountsFromItsRelease) {
  Make(absl::Seconds(30));
  Add("a", 10);
  auto lease = manager_->Acquire(kJob, "a", 5 * kMiB, absl::Now() + absl::Seconds(5));
  ASSERT_TRUE(lease.ok()) << lease.status();
  now_ += absl::Hours(1);
  EXPECT_EQ(manager_->ExpireIdle(), 0);
  EXPECT_EQ(Model("a").state, ModelState::kInUse);
  EXPECT_FALSE(Model("a").expires_in.has_value());
  EXPECT_EQ(manager_->NextExpiry(), absl::InfiniteFuture());

  lease->Release();
  EXPECT_EQ(manager_->NextExpiry(), now_ + absl::Seconds(30));
  now_ += absl::Seconds(29);
  EXPECT_EQ(manager_->ExpireIdle(), 0);
  now_ += absl::Seconds(1);
  EXPECT_EQ(manager_->ExpireIdle(), 1);
  EXPECT_EQ(Model("a").state, ModelState::kHost);
}

TEST_F(KeepAliveTest, ZeroReleasesAsSoonAsNoWorkNeedsTheModel) {
  Make(absl::ZeroDuration());
  Add("a", 10);
  {
    auto lease = manager_->Acquire(kJob, "a", 0, absl::Now() + absl::Seconds(5));
    ASSERT_TRUE(lease.ok());
    EXPECT_EQ(manager_->ExpireIdle(), 0) << "leased";
  }
  EXPECT_EQ(Model("a").expires_in, absl::ZeroDuration());
  EXPECT_EQ(manager_->ExpireIdle(), 1) << "no time passed: due at once";
  EXPECT_EQ(Model("a").state, ModelState::kHost);
  EXPECT_EQ(device_empty_calls_, 1);
}

TEST_F(KeepAliveTest, ForeverKeepsTheModelOnTheDevice) {
  Make(absl::InfiniteDuration());
  Add("a", 10);
  Use("a");
  now_ += absl::Hours(24 * 365);
  EXPECT_EQ(manager_->ExpireIdle(), 0);
  EXPECT_EQ(Model("a").state, ModelState::kDevice);
  EXPECT_FALSE(Model("a").keep_alive.has_value());
  EXPECT_FALSE(Model("a").expires_in.has_value());
  EXPECT_EQ(manager_->NextExpiry(), absl::InfiniteFuture());
  EXPECT_EQ(device_empty_calls_, 0);
}

TEST_F(KeepAliveTest, CatalogueOverrideBeatsTheDaemonsKeepAlive) {
  Make(absl::Minutes(5));
  Add("short", 10, absl::Seconds(30));
  Add("forever", 10, absl::InfiniteDuration());
  Add("default", 10);
  Use("short");
  Use("forever");
  Use("default");
  EXPECT_EQ(Model("short").keep_alive, absl::Seconds(30));
  EXPECT_FALSE(Model("forever").keep_alive.has_value());
  EXPECT_EQ(manager_->NextExpiry(), now_ + absl::Seconds(30));

  now_ += absl::Seconds(30);
  EXPECT_EQ(manager_->ExpireIdle(), 1);
  EXPECT_EQ(Model("short").state, ModelState::kHost);
  EXPECT_EQ(Model("default").state, ModelState::kDevice);
  EXPECT_EQ(Model("default").expires_in, absl::Minutes(4) + absl::Seconds(30));

  now_ += absl::Minutes(5);
  EXPECT_EQ(manager_->ExpireIdle(), 1);
  EXPECT_EQ(Model("default").state, ModelState::kHost);
  EXPECT_EQ(Model("forever").state, ModelState::kDevice);
  EXPECT_EQ(device_empty_calls_, 0);
}

TEST_F(KeepAliveTest, DeviceEmptyHookRunsOnceWhenTheLastModelLeaves) {
  Make(absl::Seconds(10));
  Add("a", 10);
  Add("b", 20, absl::Seconds(20));
  Use("a");
  Use("b");
  now_ += absl::Seconds(10);
  EXPECT_EQ(manager_->ExpireIdle(), 1);
  EXPECT_EQ(device_empty_calls_, 0) << "b is still resident";
  now_ += absl::Seconds(10);
  EXPECT_EQ(manager_->ExpireIdle(), 1);
  EXPECT_EQ(device_empty_calls_, 1);
  EXPECT_EQ(manager_->Snapshot().device.used_bytes, 0u);
  now_ += absl::Hours(1);
  EXPECT_EQ(manager_->ExpireIdle(), 0);
  EXPECT_EQ(device_empty_calls_, 1) << "once per emptying";
  const std::vector<std::string> log = loader_.log();
  EXPECT_EQ(log.back(), "release_device b");
}

TEST_F(KeepAliveTest, ModelThatQueuedWorkStillNamesStaysUntilItDoesNot) {
  FakeFuture future;
  Make(absl::Seconds(10), &future);
  Add("a", 10);
  Use("a");
  future.wanted = "a";
  now_ += absl::Minutes(1);
  EXPECT_EQ(manager_->ExpireIdle(), 0);
  EXPECT_EQ(Model("a").state, ModelState::kDevice);
  future.wanted.clear();
  EXPECT_EQ(manager_->ExpireIdle(), 1);
  EXPECT_EQ(Model("a").state, ModelState::kHost);
}

// SetKeepAlive (a SIGHUP reload) measures running countdowns against the new value; the
// catalogue's per-model values stay.
TEST_F(KeepAliveTest, SetKeepAliveAppliesToRunningCountdowns) {
  Make(absl::Minutes(5));
  Add("a", 10);
  Add("own", 10, absl::Minutes(1));
  Use("a");
  Use("own");
  now_ += absl::Seconds(20);
  manager_->SetKeepAlive(absl::Seconds(10));
  EXPECT_EQ(Model("a").keep_alive, absl::Seconds(10));
  EXPECT_EQ(Model("own").keep_alive, absl::Minutes(1));
  EXPECT_EQ(manager_->ExpireIdle(), 1) << "due at once: unused for 20 s";
  EXPECT_EQ(Model("a").state, ModelState::kHost);
  EXPECT_EQ(Model("own").state, ModelState::kDevice);
  manager_->SetKeepAlive(absl::InfiniteDuration());
  Use("a");
  now_ += absl::Hours(1);
  EXPECT_EQ(manager_->ExpireIdle(), 1) << "only the model with its own keep-alive";
  EXPECT_EQ(Model("a").state, ModelState::kDevice);
  EXPECT_FALSE(Model("a").keep_alive.has_value());
}

// The manager's thread on the real clock: keep-alive 0 evicts right after the lease ends, woken
// by the lease's end (its wait would otherwise be infinite: nothing else is counting down).
TEST(KeepAliveThreadTest, EvictsOnceTheLeaseEndsWithoutPolling) {
  testing::FakeLoader loader;
  loader.SetBytes("a", 10 * kMiB);
  absl::Notification empty;
  ResidencyManager::Options o;
  o.device_budget_bytes = 100 * kMiB;
  o.loader = &loader;
  o.check_invariant = true;
  o.keep_alive = absl::ZeroDuration();
  o.keep_alive_thread = true;
  o.on_device_empty = [&empty] { empty.Notify(); };
  auto manager = ResidencyManager::Create(o);
  ASSERT_TRUE(manager.ok());
  ASSERT_TRUE((*manager)->RegisterModel({"a", 10 * kMiB}).ok());
  {
    auto lease = (*manager)->Acquire(kJob, "a", 0, absl::Now() + absl::Seconds(5));
    ASSERT_TRUE(lease.ok());
    EXPECT_FALSE(empty.HasBeenNotified());
  }
  ASSERT_TRUE(empty.WaitForNotificationWithTimeout(absl::Seconds(10)));
  const ResidencySnapshot s = (*manager)->Snapshot();
  EXPECT_EQ(s.device.used_bytes, 0u);
  EXPECT_EQ(s.totals.expirations, 1u);
  EXPECT_EQ(loader.Count("release_device a"), 1);
}

// A model uploaded by Load (fusionctl load) has no lease to end: the load itself must wake the
// thread, whose wait was infinite.
TEST(KeepAliveThreadTest, EvictsALoadedModelWithoutALease) {
  testing::FakeLoader loader;
  loader.SetBytes("a", 10 * kMiB);
  absl::Notification empty;
  ResidencyManager::Options o;
  o.device_budget_bytes = 100 * kMiB;
  o.loader = &loader;
  o.check_invariant = true;
  o.keep_alive = absl::ZeroDuration();
  o.keep_alive_thread = true;
  o.on_device_empty = [&empty] { empty.Notify(); };
  auto manager = ResidencyManager::Create(o);
  ASSERT_TRUE(manager.ok());
  ASSERT_TRUE((*manager)->RegisterModel({"a", 10 * kMiB}).ok());
  ASSERT_TRUE((*manager)->Load("a", absl::Now() + absl::Seconds(5)).ok());
  ASSERT_TRUE(empty.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_EQ((*manager)->Snapshot().totals.expirations, 1u);
}

// SetKeepAlive wakes the thread: from forever (an infinite wait) to 0, the idle model leaves.
TEST(KeepAliveThreadTest, SetKeepAliveWakesTheThread) {
  testing::FakeLoader loader;
  loader.SetBytes("a", 10 * kMiB);
  absl::Notification empty;
  ResidencyManager::Options o;
  o.device_budget_bytes = 100 * kMiB;
  o.loader = &loader;
  o.check_invariant = true;
  o.keep_alive_thread = true;  // keep_alive: forever
  o.on_device_empty = [&empty] { empty.Notify(); };
  auto manager = ResidencyManager::Create(o);
  ASSERT_TRUE(manager.ok());
  ASSERT_TRUE((*manager)->RegisterModel({"a", 10 * kMiB}).ok());
  ASSERT_TRUE((*manager)->Load("a", absl::Now() + absl::Seconds(5)).ok());
  (*manager)->SetKeepAlive(absl::ZeroDuration());
  ASSERT_TRUE(empty.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_EQ((*manager)->Snapshot().device.used_bytes, 0u);
}

}  // namespace
}  // namespace fusion
