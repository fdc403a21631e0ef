// A job's threads: how many CPU threads one job's stages use, and how.
//
// LibTorch's intra-op parallelism (its OpenMP team, which oneDNN uses too) splits every op of a
// small network across threads that meet at a barrier after each op; on the 2 shared cores of
// the CPU device that costs more than it gains (one descheduled team thread stalls every op:
// docs/PERFORMANCE.md measured the classical generator at 2.7 s with 2 threads against 56 ms
// with 1 under load). A job's work is instead split where it is independent: detection passes,
// and faces in the per-face stages, each on one thread with one intra-op thread. Results do not
// depend on the number of threads (items are computed alone and assembled in index order).
// Memory: a helper thread's c10 allocations are charged to the caller's device scope
// (cpu_device_memory.h: scopes are per thread), so a stage running k items at once must be
// admitted for k items' working set (the callers pass input pixels times the workers used).
// Thread-safety: free functions; ParallelFor's body must be safe to call concurrently for
// different indices.
#pragma once

#include <algorithm>
#include <cstddef>
#include <functional>

#include "absl/status/status.h"

namespace fusion {

// Sets the calling thread's intra-op threads (n >= 1) for LibTorch ops and oneDNN, leaving
// other threads' unchanged.
void SetThreadIntraOpThreads(int n);

// The workers a stage over `items` independent items uses with a job budget of `threads`.
inline int WorkersFor(size_t items, int threads) {
  return static_cast<int>(std::max<size_t>(1, std::min<size_t>(items, threads < 1 ? 1 : threads)));
}

// Runs body(i) for every i in [0, count) on WorkersFor(count, threads) threads: the calling
// thread and helpers, each taking the next index in order, with one intra-op thread and the
// caller's device scope. After a non-OK status or an exception no further index starts; the
// failure of the lowest failing index is returned (a status) or rethrown in the calling thread
// (an exception), else OK. An item that ran out of device memory (an allocator refusal on its
// thread, or a c10 OOM) is DeviceOomError() (device_oom.h), whichever thread ran it, so the OOM
// ladder sees it as one. threads <= 1 or count <= 1: every
// index in order on the calling thread, at one intra-op thread (its own count restored after).
absl::Status ParallelFor(size_t count, int threads, const std::function<absl::Status(size_t)>& body);

}  // namespace fusion
