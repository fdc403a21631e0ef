#include "device/device.h"

#include <gtest/gtest.h>

#include "absl/time/clock.h"
#include "device/cuda_probe.h"
#include "device/cgroup_memory.h"
#include "device/host_memory.h"

namespace fusion {
namespace {

TEST(Meminfo, ParsesTotalAndAvailableInKibibytes) {
  auto info = ParseMeminfo(
      "MemTotal:       24576000 kB\nMemFree:          100 kB\nMemAvailable:   20480000 kB\n"
      "HugePages_Total:       0\n");
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->total_bytes, 24576000ull * 1024);
  EXPECT_EQ(info->available_bytes, 20480000ull * 1024);
}

TEST(Meminfo, MissingFieldIsInvalidArgument) {
  EXPECT_EQ(ParseMeminfo("MemTotal: 5 kB\n").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseMeminfo("MemTotal: x kB\nMemAvailable: 1 kB\n").status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(Meminfo, RealProcMeminfoIsConsistent) {
  auto info = ReadHostMemory();
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_GT(info->total_bytes, 0u);
  EXPECT_LE(info->available_bytes, info->total_bytes);
  EXPECT_EQ(ReadHostMemory("/nonexistent/meminfo").status().code(), absl::StatusCode::kUnavailable);
}

TEST(EffectiveBudget, IsMinOfLimitAndReachableMinusReserve) {
  constexpr uint64_t GiB = 1ull << 30;
  EXPECT_EQ(EffectiveBudget(4 * GiB, 10 * GiB, 0, GiB), 4 * GiB);        // limit binds
  EXPECT_EQ(EffectiveBudget(8 * GiB, 3 * GiB, 2 * GiB, GiB), 4 * GiB);   // free + own - reserve
  EXPECT_EQ(EffectiveBudget(0, 3 * GiB, 0, GiB), 2 * GiB);               // no limit
  EXPECT_EQ(EffectiveBudget(8 * GiB, GiB / 2, 0, GiB), 0u);              // never underflows
}

TEST(Device, CpuReportsHostRam) {
  auto dev = OpenDevice("cpu");
  ASSERT_TRUE(dev.ok()) << dev.status();
  EXPECT_EQ((*dev)->Kind(), "cpu");
  auto mem = (*dev)->QueryMemory();
  ASSERT_TRUE(mem.ok()) << mem.status();
  auto host = ReadProcessHostMemory();  // MemTotal, capped by a cgroup memory limit if one applies
  ASSERT_TRUE(host.ok()) << host.status();
  EXPECT_EQ(mem->capacity_bytes, host->total_bytes);
  EXPECT_GT(mem->available_bytes, 0u);
}

TEST(Device, MalformedSpecIsInvalidArgument) {
  for (const char* spec : {"gpu", "cuda", "cuda:x", "cuda:-1", "", "cuda: 1", "cuda:+1"}) {
    EXPECT_EQ(OpenDevice(spec).status().code(), absl::StatusCode::kInvalidArgument) << spec;
  }
}

// The probe must answer quickly and consistently whether or not a GPU and driver exist.
TEST(CudaProbe, AnswersAndAgreesWithOpenDevice) {
  const absl::Time start = absl::Now();
  CudaProbe probe = ProbeCuda();
  EXPECT_LT(absl::Now() - start, absl::Seconds(20));  // generous: a real driver init is slow
  if (probe.device_count == 0) {
    EXPECT_FALSE(probe.runtime_error.empty());
    EXPECT_TRUE(probe.devices.empty());
    auto dev = OpenDevice("cuda:0");
    ASSERT_FALSE(dev.ok());
    EXPECT_EQ(dev.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_NE(dev.status().message().find("cuda:0"), std::string::npos);
  } else {
    ASSERT_EQ(probe.devices.size(), static_cast<size_t>(probe.device_count));
    EXPECT_GT(probe.devices[0].total_bytes, 0u);
    EXPECT_LE(probe.devices[0].free_bytes, probe.devices[0].total_bytes);
    auto dev = OpenDevice("cuda:0");
    ASSERT_TRUE(dev.ok()) << dev.status();
    EXPECT_EQ((*dev)->Kind(), "cuda:0");
    EXPECT_EQ(OpenDevice("cuda:" + std::to_string(probe.device_count)).status().code(),
              absl::StatusCode::kFailedPrecondition);
  }
  if (!probe.nvml_loaded) {
    EXPECT_FALSE(probe.nvml_error.empty());
  }
#ifdef FUSION_HAVE_CUDART
  EXPECT_TRUE(probe.built_with_cudart);
  EXPECT_GT(probe.runtime_version, 0);
#endif
}

}  // namespace
}  // namespace fusion
