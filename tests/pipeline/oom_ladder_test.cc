// The OOM ladder, step by step, with a fake loader, a fake device meter and scripted stage
// bodies (no LibTorch): every outcome leaves no lease and no reservation behind.
#include "pipeline/oom_ladder.h"

#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <thread>

#include "fake_loader.h"
#include "loader/device_oom.h"

namespace fusion {
namespace {

constexpr uint64_t MiB = 1ull << 20;

// A device meter whose scopes the scripted body charges by hand.
class FakeMeter final : public DeviceMeter {
 public:
  void ResetPeak(ScopeId s) override { usage_[s].peak_bytes = usage_[s].current_bytes; }
  ScopeUsage Usage(ScopeId s) const override {
    auto it = usage_.find(s);
    return it == usage_.end() ? ScopeUsage{} : it->second;
  }
  void Forget(ScopeId s) override { usage_.erase(s); }
  void LimitScope(ScopeId s, uint64_t bytes, ScopeKind kind) override {
    usage_[s].limit_bytes = bytes;
    usage_[s].kind = kind;
    if (kind == ScopeKind::kHost) host_limits.push_back(bytes);
  }
  void ReleaseCache() override { ++cache_releases; }
  uint64_t AllocatedBytes() const override { return 0; }
  uint64_t ReservedBytes() const override { return 0; }
  void Charge(ScopeId s, uint64_t bytes) {
    usage_[s].peak_bytes = std::max(usage_[s].peak_bytes, usage_[s].current_bytes + bytes);
  }
  // A refusal by the shared device budget while the scope was within its own limit.
  void RefuseShared(ScopeId s) { ++usage_[s].shared_refusals; }
  // A refusal at the scope's own limit (its admission).
  void RefuseLimit(ScopeId s) { ++usage_[s].limit_refusals; }
  int cache_releases = 0;
  std::vector<uint64_t> host_limits;  // LimitScope of each host scope, in order

 private:
  std::map<ScopeId, ScopeUsage> usage_;
};

// Needs `need` bytes untiled (scaled by tile area over 512x512 when tiled); fails with a device
// OOM when more than `device_free` would be needed. Records what ran.
class ScriptedBody final : public StageBody {
 public:
  ScriptedBody(FakeMeter* meter, uint64_t need, uint64_t device_free)
      : meter_(meter), need_(need), device_free_(device_free) {}
  absl::Status RunDevice(int tile_px, ScopeId scope) override {
    const uint64_t bytes = tile_px == 0 ? need_ : need_ * tile_px * tile_px / (512 * 512);
    tiles.push_back(tile_px);
    if (bytes > device_free_) return DeviceOomError("device OOM (scripted)");
    meter_->Charge(scope, bytes);
    return error;
  }
  absl::Status RunCpu(int tile_px, ScopeId scope) override {
    ++cpu_runs;
    cpu_tiles.push_back(tile_px);
    if (!cpu_error.ok()) return cpu_error;
    const uint64_t bytes = tile_px == 0 ? need_ : need_ * tile_px * tile_px / (512 * 512);
    // As the allocator does in a host scope: past the admitted limit is a real OOM.
    const uint64_t limit = meter_->Usage(scope).limit_bytes;
    if (limit != 0 && bytes > limit) return DeviceOomError("host scope limit (scripted)");
    meter_->Charge(scope, bytes);
    return absl::OkStatus();
  }
  std::vector<int> cpu_tiles;
  std::vector<int> tiles;
  int cpu_runs = 0;
  absl::Status error;      // returned by a successful device run when set
  absl::Status cpu_error;  // returned by the CPU run when set

 private:
  FakeMeter* meter_;
  uint64_t need_, device_free_;
};

class OomLadderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    loader_.SetBytes("detector", 10 * MiB);
    loader_.SetBytes("enhancer", 20 * MiB);
    loader_.SetBytes("other", 30 * MiB);
    residency_ = *ResidencyManager::Create(
        {.device_budget_bytes = 100 * MiB, .policy = "lru", .loader = &loader_});
    for (const char* m : {"detector", "enhancer", "other"}) {
      ASSERT_TRUE(residency_->RegisterModel({m, loader_bytes(m)}).ok());
    }
  }
  uint64_t loader_bytes(const std::string& m) {
    return m == "detector" ? 10 * MiB : m == "enhancer" ? 20 * MiB : 30 * MiB;
  }
  StageSpec Spec(const std::string& name, const std::string& model, bool tileable,
                 uint64_t working) {
    return {name, model, tileable, working, "512x512", 512 * 512, 256, 64};
  }
  void ExpectClean() {
    ResidencySnapshot s = residency_->Snapshot();
    EXPECT_TRUE(s.leases.empty());
    EXPECT_EQ(s.device.reserved_bytes, 0u);
    EXPECT_TRUE(residency_->CheckInvariant().ok());
  }
  ModelState StateOf(const std::string& m) {
    for (const auto& s : residency_->Snapshot().models) {
      if (s.name == m) return s.state;
    }
    return ModelState::kAbsent;
  }

  testing::FakeLoader loader_;
  FakeMeter meter_;
  FaultInjector faults_;
  std::unique_ptr<ResidencyManager> residency_;
  Owner owner_{"j-1", 1000};
};

TEST_F(OomLadderTest, NormalRunIsOneDeviceAttemptAndTeachesTheEstimate) {
  OomLadder ladder(residency_.get(), &meter_, &faults_, {});
  ScriptedBody body(&meter_, 12 * MiB, 60 * MiB);
  auto out = ladder.Run(owner_, Spec("detect", "detector", false, 4 * MiB), body);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->mode, StageMode::kDevice);
  EXPECT_EQ(out->attempts, 1u);
  EXPECT_EQ(out->peak_bytes, 12 * MiB);
  EXPECT_TRUE(out->degradations.empty());
  EXPECT_EQ(residency_->WorkingSetEstimate("detector", "512x512", 0), 12 * MiB);
  ExpectClean();
}

TEST_F(OomLadderTest, FirstDeviceFailureIsRecoveredByEvictAndRetry) {
  ASSERT_TRUE(residency_->Load("other", absl::InfiniteFuture()).ok());
  faults_.Set("enhance", FaultMode::kFailFirstDevice);
  OomLadder ladder(residency_.get(), &meter_, &faults_, {});
  ScriptedBody body(&meter_, 8 * MiB, 60 * MiB);
  auto out = ladder.Run(owner_, Spec("enhance", "enhancer", true, 4 * MiB), body);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->mode, StageMode::kDevice);
  EXPECT_EQ(out->attempts, 2u);
  EXPECT_EQ(out->recovered_by, "evict_retry");
  EXPECT_EQ(StateOf("other"), ModelState::kHost);  // everything evictable was evicted
  EXPECT_EQ(meter_.cache_releases, 1);
  // The failed attempt raised the estimate: at least twice what it was admitted with.
  EXPECT_GE(residency_->WorkingSetEstimate("enhancer", "512x512", 0), 8 * MiB);
  ExpectClean();
}

TEST_F(OomLadderTest, UntiledFailureOfATileableStageRunsInTiles) {
  faults_.Set("enhance", FaultMode::kFailUntiled);
  OomLadder ladder(residency_.get(), &meter_, &faults_, {});
  ScriptedBody body(&meter_, 8 * MiB, 60 * MiB);
  auto out = ladder.Run(owner_, Spec("enhance", "enhancer", true, 4 * MiB), body);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->mode, StageMode::kTiled);
  EXPECT_EQ(out->tile_px, 256);
  EXPECT_EQ(out->attempts, 3u);  // untiled, untiled retry, 256px tiles
  EXPECT_EQ(out->recovered_by, "tiled");
  EXPECT_EQ(body.tiles, (std::vector<int>{256}));  // the untiled ones were injected
  ExpectClean();
}

TEST_F(OomLadderTest, TilesHalveUntilOneFits) {
  OomLadder ladder(residency_.get(), &meter_, &faults_, {});
  // Needs 80 MiB untiled; 256 tiles need 20 MiB, 128 tiles 5 MiB; only 6 MiB free on device.
  ScriptedBody body(&meter_, 80 * MiB, 6 * MiB);
  auto out = ladder.Run(owner_, Spec("enhance", "enhancer", true, 4 * MiB), body);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->mode, StageMode::kTiled);
  EXPECT_EQ(out->tile_px, 128);
  EXPECT_EQ(body.tiles, (std::vector<int>{0, 0, 256, 128}));
  ASSERT_EQ(out->degradations.size(), 1u);
  EXPECT_EQ(out->degradations[0].rfind("enhance: ran in 128-px tiles: untiled it ran out of device memory (", 0), 0u)
      << out->degradations[0];
  ExpectClean();
}

TEST_F(OomLadderTest, EveryDeviceAttemptFailingFallsBackToTheCpu) {
  faults_.Set("generate", FaultMode::kFailDevice);
  OomLadder ladder(residency_.get(), &meter_, &faults_, {});
  ScriptedBody body(&meter_, 8 * MiB, 60 * MiB);
  auto out = ladder.Run(owner_, Spec("generate", "other", true, 4 * MiB), body);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->mode, StageMode::kCpuFallback);
  EXPECT_EQ(out->recovered_by, "cpu_fallback");
  EXPECT_EQ(body.cpu_runs, 1);
  EXPECT_EQ(out->attempts, 6u);  // untiled x2, tiles 256/128/64, CPU
  ASSERT_FALSE(out->degradations.empty());
  EXPECT_NE(out->degradations.back().find("ran on the CPU"), std::string::npos);
  ExpectClean();
}

TEST_F(OomLadderTest, NonTileableStageSkipsTiles) {
  faults_.Set("landmarks", FaultMode::kFailUntiled);
  OomLadder ladder(residency_.get(), &meter_, &faults_, {});
  ScriptedBody body(&meter_, 1 * MiB, 60 * MiB);
  auto out = ladder.Run(owner_, Spec("landmarks", "detector", false, 1 * MiB), body);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->mode, StageMode::kCpuFallback);
  EXPECT_TRUE(body.tiles.empty());
  ExpectClean();
}

TEST_F(OomLadderTest, EverythingFailingIsResourceExhaustedNamingStageModelAndBytes) {
  faults_.Set("enhance", FaultMode::kFailAll);
  OomLadder ladder(residency_.get(), &meter_, &faults_, {});
  ScriptedBody body(&meter_, 8 * MiB, 60 * MiB);
  auto out = ladder.Run(owner_, Spec("enhance", "enhancer", true, 4 * MiB), body);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(out.status().message().find("stage 'enhance' (model 'enhancer') does not fit"),
            std::string::npos) << out.status();
  EXPECT_NE(out.status().message().find("device budget 100.0 MiB"), std::string::npos);
  ExpectClean();
}

TEST_F(OomLadderTest, AdmissionThatCanNeverFitGoesStraightToTiles) {
  OomLadder ladder(residency_.get(), &meter_, &faults_, {});
  ScriptedBody body(&meter_, 8 * MiB, 60 * MiB);
  // 200 MiB of working set can never fit a 100 MiB budget; 256px tiles (2.25*256^2 of 512^2
  // pixels) need 225 MiB * ... = 112.5 MiB: refused too; 128px tiles fit.
  auto out = ladder.Run(owner_, Spec("enhance", "enhancer", true, 200 * MiB), body);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->mode, StageMode::kTiled);
  EXPECT_EQ(out->tile_px, 128);
  EXPECT_EQ(body.tiles, (std::vector<int>{128}));  // no untiled attempt, no retry
  EXPECT_EQ(out->attempts, 1u);
  // One line saying what happened and why, 20 MiB of model + 200 MiB, worded as the degradation
  // of a job that succeeds, not as a failure.
  EXPECT_EQ(out->degradations, (std::vector<std::string>{
                                   "enhance: ran in 128-px tiles: the model and its working set need 220.0 MiB of "
                                   "the 100.0 MiB device budget"}));
  ExpectClean();
}

TEST_F(OomLadderTest, OtherErrorsEndTheLadderAtOnce) {
  OomLadder ladder(residency_.get(), &meter_, &faults_, {});
  ScriptedBody body(&meter_, 1 * MiB, 60 * MiB);
  body.error = absl::InvalidArgumentError("target image: undecodable");
  auto out = ladder.Run(owner_, Spec("detect", "detector", true, 1 * MiB), body);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(body.tiles.size(), 1u);
  EXPECT_EQ(body.cpu_runs, 0);
  ExpectClean();
}

// A job cancelled inside a tile (its body's checkpoint) or inside the CPU fallback: CANCELLED
// comes back unchanged at once — no smaller tile, no CPU run, nothing learnt, no lease left.
TEST_F(OomLadderTest, CancellationInATileEndsTheLadderAtOnce) {
  OomLadder ladder(residency_.get(), &meter_, &faults_, {});
  ScriptedBody body(&meter_, 80 * MiB, 60 * MiB);  // untiled OOM; a 256-px tile needs 20 MiB
  body.error = absl::CancelledError("job cancelled during stage 'enhance' (face 1 of 2, tile 2 of 4)");
  auto out = ladder.Run(owner_, Spec("enhance", "enhancer", true, 4 * MiB), body);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(out.status().message(), "job cancelled during stage 'enhance' (face 1 of 2, tile 2 of 4)");
  EXPECT_EQ(body.tiles, (std::vector<int>{0, 0, 256}));  // untiled, evict + retry, first tile
  EXPECT_EQ(body.cpu_runs, 0);
  ExpectClean();
}

TEST_F(OomLadderTest, CancellationInTheCpuFallbackIsNotResourceExhausted) {
  OomLadder ladder(residency_.get(), &meter_, &faults_, {});
  ScriptedBody body(&meter_, 100 * MiB, 0);  // every device attempt runs out
  body.cpu_error = absl::CancelledError("job cancelled during stage 'generate' (face 2 of 3)");
  auto out = ladder.Run(owner_, Spec("generate", "other", false, 100 * MiB), body);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(out.status().message(), "job cancelled during stage 'generate' (face 2 of 3)");
  EXPECT_EQ(body.cpu_runs, 1);
  ExpectClean();
}

TEST_F(OomLadderTest, CancellationWhileWaitingForMemoryEndsTheLadderAtOnce) {
  OomLadder ladder(residency_.get(), &meter_, &faults_, {});  // admission timeout 60 s
  // Another job's stage holds 70 MiB of working set: "other" (30 MiB + 10 MiB) must wait.
  auto held = residency_->Acquire(Owner{"other-job", 1}, "enhancer", 70 * MiB, absl::Now() + absl::Seconds(5));
  ASSERT_TRUE(held.ok()) << held.status();
  ScriptedBody body(&meter_, 1 * MiB, 100 * MiB);
  StageSpec spec = Spec("generate", "other", false, 10 * MiB);
  std::atomic<bool> cancel{false};
  spec.cancelled = [&] { return cancel.load(); };
  std::thread canceller([&] {
    absl::SleepFor(absl::Milliseconds(30));
    cancel = true;
  });
  auto out = ladder.Run(owner_, spec, body);
  canceller.join();
  EXPECT_EQ(out.status().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(out.status().message(), "job cancelled while waiting for device memory for model 'other'");
  EXPECT_TRUE(body.tiles.empty()) << "no device attempt ran";
  EXPECT_EQ(body.cpu_runs, 0) << "a cancelled job does not fall back to the CPU";
  held->Release();
  ExpectClean();
}

// Step 4 on the host tier: nothing is admitted on the device; the whole frame (200 MiB
// estimate + the 20 MiB model) and 256-px tiles (112.5 + 20 MiB) can never fit a 60 MiB host
// budget and are refused at admission; 128-px tiles are admitted (28.125 + 20 MiB) but need 64
// MiB for real, so the host scope's limit refuses them; 64-px tiles (7.03 + 20 MiB admitted,
// 16 MiB used) run.
TEST_F(OomLadderTest, CpuFallbackIsAdmittedOnTheHostTierAndTiledWhenTheWholeFrameDoesNotFit) {
  residency_->SetDeviceBudget(25 * MiB);  // not even a 64-px tile (7.03 + 20 MiB) is admitted
  residency_->SetHostBudget(60 * MiB);
  OomLadder ladder(residency_.get(), &meter_, &faults_, {});
  ScriptedBody body(&meter_, 1024 * MiB, /*device_free=*/0);
  auto out = ladder.Run(owner_, Spec("upscale", "enhancer", true, 200 * MiB), body);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->mode, StageMode::kCpuFallback);
  EXPECT_EQ(out->tile_px, 64);
  EXPECT_EQ(body.cpu_tiles, (std::vector<int>{128, 64})) << "whole and 256 px never admitted";
  EXPECT_EQ(meter_.host_limits, (std::vector<uint64_t>{29'491'200 + 20 * MiB, 7'372'800 + 20 * MiB}));
  EXPECT_EQ(out->peak_bytes, 16 * MiB);
  ASSERT_FALSE(out->degradations.empty());
  EXPECT_NE(out->degradations.back().find("ran on the CPU (device memory exhausted; 64px tiles on the host tier)"),
            std::string::npos) << out->degradations.back();
  const ResidencySnapshot s = residency_->Snapshot();
  EXPECT_TRUE(s.host_leases.empty());
  EXPECT_EQ(s.host.reserved_bytes, 0u);
  EXPECT_LE(s.host.peak_bytes, 60 * MiB) << "host used + reserved stayed within the budget";
  EXPECT_GE(s.host.peak_bytes, 7'372'800 + 20 * MiB);
  ExpectClean();
}

// Step 5 with a host budget smaller than the model: nothing is admitted anywhere; the error
// names the stage, the model, both tiers and the bytes of the smallest attempt.
TEST_F(OomLadderTest, NothingFittingAnyTierIsResourceExhaustedNamingStageTierAndBytes) {
  residency_->SetDeviceBudget(25 * MiB);
  residency_->SetHostBudget(10 * MiB);
  OomLadder ladder(residency_.get(), &meter_, &faults_, {});
  ScriptedBody body(&meter_, 1024 * MiB, /*device_free=*/0);
  auto out = ladder.Run(owner_, Spec("upscale", "enhancer", true, 200 * MiB), body);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kResourceExhausted);
  const std::string msg(out.status().message());
  EXPECT_NE(msg.find("stage 'upscale' (model 'enhancer') does not fit: working set 200.0 MiB"), std::string::npos) << msg;
  EXPECT_NE(msg.find("device budget 25.0 MiB"), std::string::npos) << msg;
  EXPECT_NE(msg.find("host tier: stage 'upscale' CPU fallback in 64px tiles (model 'enhancer') needs 27.0 MiB "
                     "(28344320 bytes), host budget 10.0 MiB"),
            std::string::npos) << msg;
  EXPECT_EQ(body.cpu_runs, 0) << "no CPU attempt ran beyond its admission";
  ExpectClean();
}

// A body that runs out of device memory (refused by the shared budget, within its own limit)
// while another job's stage holds a lease: what the allocator does when neighbours fill the
// device.
class ContendedBody final : public StageBody {
 public:
  ContendedBody(FakeMeter* meter, ResidencyManager* r, std::string me) : meter_(meter), r_(r), me_(std::move(me)) {}
  absl::Status RunDevice(int tile_px, ScopeId scope) override {
    tiles.push_back(tile_px);
    for (const LeaseSnapshot& l : r_->Snapshot().leases) {
      if (l.owner.job_id != me_) {
        meter_->RefuseShared(scope);
        return DeviceOomError("device budget exceeded (scripted neighbour)");
      }
    }
    meter_->Charge(scope, 8 * MiB);
    return absl::OkStatus();
  }
  absl::Status RunCpu(int, ScopeId) override {
    ++cpu_runs;
    return absl::OkStatus();
  }
  std::vector<int> tiles;
  int cpu_runs = 0;

 private:
  FakeMeter* meter_;
  ResidencyManager* r_;
  std::string me_;
};

// Contention (docs/ARCHITECTURE.md#invariants, 4): the stage fits alone; a neighbour's lease,
// released after 200 ms, makes its first attempt run out. It waits and runs again at the same
// size: the same mode, tile and degradations as alone (not evict-retry, tiles, then the CPU).
TEST_F(OomLadderTest, ContentionWaitsForTheNeighbourRatherThanDegrading) {
  OomLadder ladder(residency_.get(), &meter_, &faults_, {});
  const StageSpec spec = Spec("enhance", "enhancer", true, 10 * MiB);
  ContendedBody alone_body(&meter_, residency_.get(), owner_.job_id);
  auto alone = ladder.Run(owner_, spec, alone_body);
  ASSERT_TRUE(alone.ok()) << alone.status();

  auto held = residency_->Acquire(Owner{"neighbour", 2}, "other", 10 * MiB, absl::Now() + absl::Seconds(5));
  ASSERT_TRUE(held.ok()) << held.status();
  std::thread releaser([&] {
    absl::SleepFor(absl::Milliseconds(200));
    held->Release();
  });
  ContendedBody body(&meter_, residency_.get(), owner_.job_id);
  const absl::Time start = absl::Now();
  auto out = ladder.Run(owner_, spec, body);
  const absl::Duration took = absl::Now() - start;
  releaser.join();
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->mode, alone->mode);
  EXPECT_EQ(out->mode, StageMode::kDevice);
  EXPECT_EQ(out->tile_px, alone->tile_px);
  EXPECT_EQ(out->degradations, alone->degradations);
  EXPECT_GT(out->contention_retries, 0u);
  EXPECT_EQ(alone->contention_retries, 0u);
  EXPECT_EQ(body.cpu_runs, 0);
  for (int t : body.tiles) EXPECT_EQ(t, 0) << "never tiled";
  EXPECT_GE(took, absl::Milliseconds(200));
  ExpectClean();
}

// Contention that outlasts the admission timeout does degrade, and says why.
TEST_F(OomLadderTest, ContentionUntilTheDeadlineDegradesNamingContention) {
  OomLadder ladder(residency_.get(), &meter_, &faults_, {.admission_timeout = absl::Milliseconds(200)});
  auto held = residency_->Acquire(Owner{"neighbour", 2}, "other", 10 * MiB, absl::Now() + absl::Seconds(5));
  ASSERT_TRUE(held.ok()) << held.status();
  ContendedBody body(&meter_, residency_.get(), owner_.job_id);
  auto out = ladder.Run(owner_, Spec("enhance", "enhancer", false, 10 * MiB), body);
  held->Release();
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->mode, StageMode::kCpuFallback);
  ASSERT_FALSE(out->degradations.empty());
  EXPECT_NE(out->degradations.front().find("contention: other jobs held the device until the admission deadline"),
            std::string::npos) << out->degradations.front();
  ExpectClean();
}

// A body whose tiles need `need` bytes whatever their size (as detection's stem windows: the
// rest of the network runs whole), refused at its scope's limit as the allocator does.
class FixedNeedBody final : public StageBody {
 public:
  FixedNeedBody(FakeMeter* meter, uint64_t need) : meter_(meter), need_(need) {}
  absl::Status RunDevice(int tile_px, ScopeId scope) override {
    tiles.push_back(tile_px);
    if (need_ > meter_->Usage(scope).limit_bytes) {
      meter_->RefuseLimit(scope);
      return DeviceOomError("device scope limit exceeded (scripted)");
    }
    meter_->Charge(scope, need_);
    return absl::OkStatus();
  }
  absl::Status RunCpu(int, ScopeId) override { return absl::InternalError("no CPU run expected"); }
  std::vector<int> tiles;

 private:
  FakeMeter* meter_;
  uint64_t need_;
};

// 128-px tiles are admitted with 28.125 MiB (200 MiB scaled by area) but need 30 MiB: refused
// at their own admission, they are retried once with the raised estimate (56.25 MiB) instead of
// halving; the next job of that shape is admitted with the raised tile estimate at once.
TEST_F(OomLadderTest, ATileThatOutgrowsItsEstimateIsRetriedOnceWithTheRaisedOneBeforeHalving) {
  OomLadder ladder(residency_.get(), &meter_, &faults_, {});
  FixedNeedBody body(&meter_, 30 * MiB);
  auto out = ladder.Run(owner_, Spec("detect", "enhancer", true, 200 * MiB), body);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->mode, StageMode::kTiled);
  EXPECT_EQ(out->tile_px, 128);
  EXPECT_EQ(body.tiles, (std::vector<int>{128, 128}));
  // The refusal raised it to twice the admission (the profile keeps maxima).
  EXPECT_EQ(residency_->WorkingSetEstimate("enhancer", "512x512@tile128", 0), 2 * 29'491'200u);
  FixedNeedBody next(&meter_, 30 * MiB);
  auto again = ladder.Run(owner_, Spec("detect", "enhancer", true, 200 * MiB), next);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->tile_px, 128);
  EXPECT_EQ(next.tiles, (std::vector<int>{128})) << "admitted with the learnt tile peak";
  ExpectClean();
}

// A stage that must wait for another job's memory says what it waits for (the job's stage
// text), and clears it once admitted.
TEST_F(OomLadderTest, AStageWaitingForAnotherJobsMemorySaysWhatItWaitsFor) {
  OomLadder ladder(residency_.get(), &meter_, &faults_, {});
  auto held = residency_->Acquire(Owner{"neighbour", 2}, "enhancer", 70 * MiB, absl::Now() + absl::Seconds(5));
  ASSERT_TRUE(held.ok()) << held.status();
  std::thread releaser([&] {
    absl::SleepFor(absl::Milliseconds(100));
    held->Release();
  });
  ScriptedBody body(&meter_, 1 * MiB, 100 * MiB);
  StageSpec spec = Spec("generate", "other", false, 10 * MiB);
  std::vector<std::string> notes;
  spec.waiting = [&](const std::string& note) { notes.push_back(note); };
  auto out = ladder.Run(owner_, spec, body);
  releaser.join();
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->mode, StageMode::kDevice);
  EXPECT_EQ(notes, (std::vector<std::string>{
                       "waiting for device memory: model 'other' needs 40.0 MiB, 10.0 MiB free, "
                       "70.0 MiB held by running stages",
                       ""}));
  ExpectClean();
}

TEST(FaultInjector, ParsesSpecsAndRejectsBadOnes) {
  auto f = FaultInjector::Parse("detect=fail_first_device,enhance=fail_untiled");
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_TRUE(f->FailDevice("detect", 0));
  EXPECT_FALSE(f->FailDevice("detect", 0));
  EXPECT_TRUE(f->FailDevice("enhance", 0));
  EXPECT_FALSE(f->FailDevice("enhance", 128));
  EXPECT_FALSE(f->FailDevice("blend", 0));
  EXPECT_FALSE(f->FailCpu("enhance"));
  auto bad = FaultInjector::Parse("detect=explode");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("'detect=explode'"), std::string::npos);
  EXPECT_FALSE(FaultInjector::Parse("=fail_all").ok());
}

TEST(DeviceOom, IsDistinctFromOtherResourceExhausted) {
  EXPECT_TRUE(IsDeviceOom(DeviceOomError("x")));
  EXPECT_FALSE(IsDeviceOom(absl::ResourceExhaustedError("x")));
  EXPECT_EQ(DeviceOomError("x").code(), absl::StatusCode::kResourceExhausted);
}

}  // namespace
}  // namespace fusion
