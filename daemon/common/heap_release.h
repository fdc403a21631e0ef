// Hands the heap that jobs freed back to the system, so the daemon's RSS returns to its level
// before a large job (glibc's malloc alone keeps much of a large job's freed heap resident).
//
// fusiond runs on jemalloc (linked into the binary, configured by main.cc's malloc_conf:
// background purging thread, dirty pages returned after 1 s, muzzy at once; MALLOC_CONF in the
// environment overrides it). After a job, with no other job running, ReleaseFreeHeap() purges
// every arena at once rather than waiting for the decay. Under glibc's malloc (a build without
// jemalloc, or a test binary) it calls malloc_trim(0) instead: glibc keeps freed chunks below
// its (adaptive, up to 32 MiB) mmap threshold in its arenas, and only malloc_trim returns
// their whole pages.
// Why jemalloc with these options: of the allocators and settings measured after an 80 MP job
// it returns the most to the system without slowing the job, and lowers the peak
// (docs/HOSTILE-INPUTS.md#memory-after-a-large-job).
// Cost: jemalloc's purge ~1 ms; malloc_trim walks every arena's free lists holding its lock,
// so both run only when no job is running (JobManager::Options::on_idle).
// Thread-safety: may be called from any thread, concurrently.
#pragma once

#include <cstdint>

namespace fusion {

struct HeapRelease {
  int64_t rss_before_bytes = 0;  // VmRSS before, bytes
  int64_t rss_after_bytes = 0;   // VmRSS after, bytes
  double ms = 0;                 // time the release took
};

// jemalloc: purge every arena; glibc: malloc_trim(0). Logs RSS before/after at debug level.
HeapRelease ReleaseFreeHeap();

// This process's resident set, bytes (/proc/self/statm); 0 if unreadable.
int64_t ResidentBytes();

}  // namespace fusion
