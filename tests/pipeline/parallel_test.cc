// ParallelFor (pipeline/parallel.h): every index once, failures by lowest index, exceptions
// rethrown in the caller, helper threads at one intra-op thread and charged to the caller's scope.
#include "pipeline/parallel.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "device/cpu_device_memory.h"
#include "pipeline_env.h"
#include "pipeline/pipeline_runner.h"

namespace fusion {
namespace {

// The process-wide intra-op setting of a test, restored after (other tests share the binary).
class IntraOpThreads {
 public:
  explicit IntraOpThreads(int n) : own_(at::get_num_threads()) { at::set_num_threads(n); }
  ~IntraOpThreads() { at::set_num_threads(own_); }

 private:
  const int own_;
};

TEST(ParallelFor, RunsEveryIndexOnceOnTwoThreadsAtOneIntraOpThreadEach) {
  IntraOpThreads two(2);  // what the items must not inherit
  std::vector<std::atomic<int>> seen(50);
  std::mutex mu;
  std::set<std::thread::id> threads;
  std::atomic<int> intra_op_max{0};
  absl::Status st = ParallelFor(seen.size(), 2, [&](size_t i) {
    ++seen[i];
    intra_op_max = std::max(intra_op_max.load(), at::get_num_threads());
    {
      std::lock_guard<std::mutex> l(mu);
      threads.insert(std::this_thread::get_id());
    }
    // Hold the item until the other thread has taken one (up to 5 s: a loaded machine may start
    // the helper late); a ParallelFor that runs everything on one thread fails below.
    for (int waited = 0; waited < 5000; ++waited) {
      {
        std::lock_guard<std::mutex> l(mu);
        if (threads.size() >= 2) break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return absl::OkStatus();
  });
  ASSERT_TRUE(st.ok()) << st;
  for (const auto& s : seen) EXPECT_EQ(s.load(), 1);
  EXPECT_EQ(threads.size(), 2u);
  EXPECT_EQ(intra_op_max.load(), 1);
}

TEST(ParallelFor, ReturnsTheLowestFailingIndexAndRestoresTheCallersThreads) {
  IntraOpThreads two(2);
  const int before = at::get_num_threads();
  ASSERT_EQ(before, 2);
  absl::Status st = ParallelFor(20, 2, [&](size_t i) {
    if (i == 3 || i == 4) return absl::InternalError(absl::StrCat("item ", i));
    return absl::OkStatus();
  });
  EXPECT_EQ(st.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(st.message(), "item 3");
  EXPECT_EQ(at::get_num_threads(), before);
  EXPECT_EQ(ParallelFor(0, 2, [](size_t) { return absl::InternalError("never"); }), absl::OkStatus());
}

TEST(ParallelFor, RethrowsAHelpersExceptionInTheCaller) {
  EXPECT_THROW((void)ParallelFor(8, 2, [](size_t i) -> absl::Status {
                 if (i == 5) throw std::runtime_error("oom");
                 return absl::OkStatus();
               }),
               std::runtime_error);
}

TEST(ParallelFor, HelperAllocationsAreChargedToTheCallersScope) {
  auto& alloc = CpuDeviceAllocator::Install(kBudget);  // the shared environment's budget
  constexpr ScopeId kScope = 4242;
  alloc.ResetPeak(kScope);
  std::mutex mu;
  std::set<std::thread::id> threads;
  {
    DeviceScope scope(kScope);
    absl::Status st = ParallelFor(2, 2, [&](size_t) {
      const at::Tensor t = at::ones({1 << 20});  // 4 MiB each, held until both exist
      {
        std::lock_guard<std::mutex> l(mu);
        threads.insert(std::this_thread::get_id());
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      return absl::OkStatus();
    });
    ASSERT_TRUE(st.ok()) << st;
  }
  EXPECT_EQ(threads.size(), 2u);
  EXPECT_GE(alloc.Usage(kScope).peak_bytes, 2u * (4u << 20));
  EXPECT_EQ(alloc.Usage(kScope).current_bytes, 0u);
  alloc.Forget(kScope);
}

// The same job through a runner of two job threads (passes and faces at once) and the
// environment's one-thread runner: the same image bytes and boxes; the threaded detect and
// generate stages are admitted for two items.
TEST(JobThreads, TwoThreadsGiveTheSameResultAsOne) {
  PipelineRunner::Options options;
  options.job_threads = 2;
  PipelineRunner two(E().store.get(), E().residency.get(), E().meter.get(), nullptr, options);
  v1::JobOptions o;
  o.set_ratio(1);
  o.set_min_face_px(120);  // the group photo's faces are 180-240 px: a few passes
  const std::string target = ReadFile(FUSION_TESTDATA_DIR "/faces/sample1.jpg");
  auto one = Swap(o, target);
  ASSERT_TRUE(one.ok()) << one.status();
  Recorder ctx;
  auto threaded = two.Swap(Owner{"job-threads", 0}, Astronaut(), target, o, ctx);
  ASSERT_TRUE(threaded.ok()) << threaded.status();
  EXPECT_EQ(threaded->report.faces_swapped(), 3u);
  ASSERT_EQ(threaded->report.faces_size(), one->report.faces_size());
  for (int i = 0; i < one->report.faces_size(); ++i) {
    for (int k = 0; k < 4; ++k) EXPECT_EQ(threaded->report.faces(i).box(k), one->report.faces(i).box(k));
  }
  EXPECT_TRUE(threaded->image == one->image) << "the threaded job computes the same image";
  ExpectAtRest();
}

}  // namespace
}  // namespace fusion
