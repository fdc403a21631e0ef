// The budget-enforcing c10 CPU allocator: scopes, per-scope peaks, real OOMs, and an OOM
// that surfaces from the TorchScript interpreter as std::runtime_error.
#include "device/cpu_device_memory.h"

#include <thread>

#include <torch/script.h>

#include "device/device_meter.h"
#include "gtest/gtest.h"

namespace fusion {
namespace {

constexpr uint64_t kMiB = 1ull << 20;

at::Tensor Bytes(uint64_t n) { return at::empty({static_cast<int64_t>(n)}, at::kByte); }

TEST(CpuDeviceMemoryTest, OnlyAllocationsInsideAScopeAreCountedAndFreesAreCredited) {
  CpuDeviceAllocator& a = CpuDeviceAllocator::Install(64 * kMiB);
  const uint64_t before = a.in_use();
  at::Tensor host = Bytes(8 * kMiB);  // host tier: not counted
  EXPECT_EQ(a.in_use(), before);
  {
    DeviceScope scope(101);
    at::Tensor t = Bytes(3 * kMiB);
    EXPECT_EQ(a.in_use(), before + 3 * kMiB);
    EXPECT_EQ(a.Usage(101).current_bytes, 3 * kMiB);
    DeviceScope inner(102);  // nested scope, restored on exit
    at::Tensor u = Bytes(kMiB);
    EXPECT_EQ(a.Usage(102).current_bytes, kMiB);
  }
  EXPECT_EQ(DeviceScope::Current(), kNoScope);
  EXPECT_EQ(a.in_use(), before);
  EXPECT_EQ(a.Usage(101).current_bytes, 0u);
  EXPECT_EQ(a.Usage(101).peak_bytes, 3 * kMiB);
}

TEST(CpuDeviceMemoryTest, PeakInUseCoversAllScopesUntilReset) {
  CpuDeviceAllocator& a = CpuDeviceAllocator::Install(64 * kMiB);
  a.ResetPeakInUse();
  const uint64_t before = a.in_use();
  EXPECT_EQ(a.peak_in_use(), before);
  {
    DeviceScope s1(201);
    at::Tensor t = Bytes(2 * kMiB);
    DeviceScope s2(202);
    at::Tensor u = Bytes(5 * kMiB);
  }
  EXPECT_EQ(a.peak_in_use(), before + 7 * kMiB);  // both scopes at once
  EXPECT_EQ(a.in_use(), before);
  a.ResetPeakInUse();
  EXPECT_EQ(a.peak_in_use(), before);
}

TEST(CpuDeviceMemoryTest, TwoConcurrentStagesAreMeasuredApart) {
  CpuDeviceAllocator& a = CpuDeviceAllocator::Install(256 * kMiB);
  auto stage = [](ScopeId scope, uint64_t step) {
    DeviceScope s(scope);
    for (int i = 0; i < 50; ++i) {
      at::Tensor x = Bytes(step), y = Bytes(2 * step);  // peak 3 * step per iteration
    }
  };
  std::thread t1(stage, 201, kMiB), t2(stage, 202, 5 * kMiB);
  t1.join(), t2.join();
  EXPECT_EQ(a.Usage(201).peak_bytes, 3 * kMiB);
  EXPECT_EQ(a.Usage(202).peak_bytes, 15 * kMiB);
  EXPECT_EQ(a.Usage(201).current_bytes + a.Usage(202).current_bytes, 0u);
}

TEST(CpuDeviceMemoryTest, TensorFreedOutsideItsScopeIsCreditedToThatScope) {
  CpuDeviceAllocator& a = CpuDeviceAllocator::Install(64 * kMiB);
  at::Tensor model_copy;
  {
    DeviceScope s(301);
    model_copy = Bytes(4 * kMiB);  // a model's device copy outlives the upload call
  }
  EXPECT_EQ(a.Usage(301).current_bytes, 4 * kMiB);
  std::thread([&] { model_copy = at::Tensor(); }).join();  // eviction on another thread
  EXPECT_EQ(a.Usage(301).current_bytes, 0u);
  a.Forget(301);
  EXPECT_EQ(a.Usage(301).peak_bytes, 0u);
}

TEST(CpuDeviceMemoryTest, AllocationPastTheBudgetIsARealOutOfMemoryError) {
  CpuDeviceAllocator& a = CpuDeviceAllocator::Install(16 * kMiB);
  const uint64_t ooms = a.oom_count();
  DeviceScope s(401);
  at::Tensor held = Bytes(10 * kMiB);
  try {
    at::Tensor big = at::cat({held, held});  // the op's output does not fit
    FAIL() << "no OOM";
  } catch (const c10::OutOfMemoryError& e) {
    EXPECT_NE(std::string(e.what()).find("scope 401 requested 20971520 bytes, 10485760 bytes in "
                                         "use, budget 16777216 bytes"),
              std::string::npos)
        << e.what();
    EXPECT_TRUE(IsDeviceOom(e));
  }
  EXPECT_EQ(a.oom_count(), ooms + 1);
  EXPECT_EQ(a.Usage(401).current_bytes, 10 * kMiB);  // the refused bytes were never charged
}

TEST(CpuDeviceMemoryTest, OomInsideTorchScriptIsRecognisedFromTheAllocatorFlag) {
  CpuDeviceAllocator::Install(16 * kMiB);
  torch::jit::Module m("Stage");
  m.define("def forward(self, n: int):\n    return torch.zeros([n]) + 1\n");
  DeviceScope s(501);
  try {
    m.forward({static_cast<int64_t>(8 * kMiB)});  // 32 MiB of float
    FAIL() << "no OOM";
  } catch (const c10::OutOfMemoryError&) {
    FAIL() << "expected the interpreter to rethrow it as a plain runtime_error";
  } catch (const std::exception& e) {
    EXPECT_TRUE(IsDeviceOom(e)) << e.what();
  }
  EXPECT_EQ(m.forward({int64_t{1024}}).toTensor().numel(), 1024);  // under budget: runs
  EXPECT_FALSE(IsDeviceOom(std::runtime_error("unrelated")));  // the flag was consumed
}

TEST(CpuDeviceMemoryTest, MeterMeasuresOneStagesPeakAfterReset) {
  std::unique_ptr<DeviceMeter> meter = MakeCpuDeviceMeter(64 * kMiB);
  DeviceScope s(601);
  at::Tensor resident = Bytes(2 * kMiB);
  { at::Tensor first = Bytes(8 * kMiB); }
  meter->ResetPeak(601);
  { at::Tensor second = Bytes(3 * kMiB); }
  EXPECT_EQ(meter->Usage(601).peak_bytes, 5 * kMiB);  // 2 resident + 3, not the earlier 10
  EXPECT_GE(meter->AllocatedBytes(), 2 * kMiB);
}

// A stage's scope limited to its admission runs out of its own bytes, whatever the device
// budget has free: the refusal is a real OOM counted as the scope's own (limit_refusals).
TEST(CpuDeviceMemoryTest, ALimitedScopeIsRefusedPastItsOwnLimitWithRoomInTheBudget) {
  CpuDeviceAllocator& a = CpuDeviceAllocator::Install(64 * kMiB);
  const uint64_t before = a.in_use();
  a.LimitScope(501, 4 * kMiB, ScopeKind::kDevice);
  DeviceScope scope(501);
  at::Tensor fits = Bytes(3 * kMiB);
  try {
    at::Tensor over = Bytes(2 * kMiB);  // 5 MiB > 4 MiB, with ~60 MiB of the budget free
    FAIL() << "allocated past the scope's limit";
  } catch (const c10::OutOfMemoryError& e) {
    EXPECT_NE(std::string(e.what()).find("device scope limit exceeded: scope 501 requested 2097152 bytes, "
                                         "3145728 of its 4194304 admitted bytes in use"),
              std::string::npos) << e.what();
  }
  EXPECT_EQ(a.Usage(501).limit_refusals, 1u);
  EXPECT_EQ(a.Usage(501).shared_refusals, 0u);
  EXPECT_EQ(a.in_use(), before + 3 * kMiB);
}

// A host scope (the CPU fallback) is limited and measured like a stage but is not the device
// tier: its bytes are outside in_use() and the device budget.
TEST(CpuDeviceMemoryTest, AHostScopeIsLimitedButOutsideTheDeviceTier) {
  CpuDeviceAllocator& a = CpuDeviceAllocator::Install(2 * kMiB);
  const uint64_t dev_before = a.in_use(), host_before = a.host_in_use();
  a.LimitScope(601, 8 * kMiB, ScopeKind::kHost);
  {
    DeviceScope scope(601);
    at::Tensor t = Bytes(6 * kMiB);  // beyond the 2 MiB device budget: not its business
    EXPECT_EQ(a.in_use(), dev_before);
    EXPECT_EQ(a.host_in_use(), host_before + 6 * kMiB);
    EXPECT_EQ(a.Usage(601).peak_bytes, 6 * kMiB);
    EXPECT_THROW(Bytes(3 * kMiB), c10::OutOfMemoryError);  // 9 MiB > its 8 MiB
  }
  EXPECT_EQ(a.host_in_use(), host_before);
  a.Forget(601);
  CpuDeviceAllocator::Install(64 * kMiB);
}

}  // namespace
}  // namespace fusion
