// ParallelFor and the per-thread intra-op setting (parallel.h).
#include "pipeline/parallel.h"

#include <ATen/Parallel.h>
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "device/cpu_device_memory.h"
#include "models/common/exception_text.h"
#include "loader/device_oom.h"
#include "base/status_macros.h"

namespace fusion {

void SetThreadIntraOpThreads(int n) {
  // LibTorch initialises a thread's OpenMP team size lazily, at its first parallel op, from the
  // process-wide at::set_num_threads value. at::get_num_threads() runs that initialisation in
  // LibTorch's own copy (the inline lazy_init_num_threads of a header would run this binary's
  // copy, and LibTorch's would undo this later: measured), then this thread's ICV alone is set
  // (omp_set_num_threads is per thread outside a parallel region).
  at::get_num_threads();
  omp_set_num_threads(std::max(1, n));
}

namespace {

// This thread at one intra-op thread while it lives; its own count restored after.
class OneIntraOpThread {
 public:
  OneIntraOpThread() : own_(at::get_num_threads()) { SetThreadIntraOpThreads(1); }
  ~OneIntraOpThread() { omp_set_num_threads(own_); }
  OneIntraOpThread(const OneIntraOpThread&) = delete;
  OneIntraOpThread& operator=(const OneIntraOpThread&) = delete;

 private:
  const int own_;
};

}  // namespace

absl::Status ParallelFor(size_t count, int threads, const std::function<absl::Status(size_t)>& body) {
  const int workers = WorkersFor(count, threads);
  OneIntraOpThread one;
  if (workers <= 1) {
    for (size_t i = 0; i < count; ++i) {
      RETURN_IF_ERROR(body(i));
    }
    return absl::OkStatus();
  }
  std::vector<absl::Status> status(count);
  std::vector<std::exception_ptr> thrown(count);
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  const ScopeId scope = DeviceScope::Current();
  // A refused allocation is flagged on the thread that made it (IsDeviceOom, cpu_device_memory.h),
  // which the stage body cannot see from the calling thread: an item that failed after a refusal
  // on its thread becomes DeviceOomError() here, so the OOM ladder still tells an OOM apart.
  auto work = [&] {
    for (size_t i; !failed.load() && (i = next.fetch_add(1)) < count;) {
      try {
        status[i] = body(i);
        if (!status[i].ok()) {
          failed = true;
          if (!IsDeviceOom(status[i]) && !absl::IsCancelled(status[i]) && IsDeviceOom(std::runtime_error(""))) {
            status[i] = DeviceOomError(std::string(status[i].message()));
          }
        }
      } catch (const std::exception& e) {
        if (IsDeviceOom(e)) status[i] = DeviceOomError(ExceptionText(e));
        else thrown[i] = std::current_exception();
        failed = true;
      } catch (...) {
        thrown[i] = std::current_exception();
        failed = true;
      }
    }
  };
  std::vector<std::thread> helpers;
  for (int w = 1; w < workers; ++w) {
    helpers.emplace_back([&] {
      DeviceScope in_scope(scope);
      SetThreadIntraOpThreads(1);
      work();
    });
  }
  work();
  for (std::thread& t : helpers) t.join();
  for (size_t i = 0; i < count; ++i) {
    if (!status[i].ok()) return status[i];
    if (thrown[i]) std::rethrow_exception(thrown[i]);
  }
  return absl::OkStatus();
}

}  // namespace fusion
