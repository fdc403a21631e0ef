// Handing freed heap back to the system (heap_release.h).
#include "common/heap_release.h"

#include <malloc.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>

#include "spdlog/spdlog.h"

// jemalloc's control interface when fusiond runs on jemalloc (linked, as fusiond is, or
// preloaded); null under glibc's malloc.
extern "C" int mallctl(const char* name, void* oldp, size_t* oldlenp, void* newp, size_t newlen)
    __attribute__((weak));

namespace fusion {

int64_t ResidentBytes() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  long long size = 0, resident = 0;
  const int n = std::fscanf(f, "%lld %lld", &size, &resident);
  std::fclose(f);
  return n == 2 ? resident * static_cast<int64_t>(sysconf(_SC_PAGESIZE)) : 0;
}

HeapRelease ReleaseFreeHeap() {
  HeapRelease r;
  r.rss_before_bytes = ResidentBytes();
  const auto start = std::chrono::steady_clock::now();
  if (mallctl != nullptr) {
    // Every arena's dirty and muzzy pages, now ("arena.<MALLCTL_ARENAS_ALL>.purge").
    mallctl("arena.4096.purge", nullptr, nullptr, nullptr, 0);
  } else {
#ifdef __GLIBC__
    malloc_trim(0);
#endif
  }
  r.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  r.rss_after_bytes = ResidentBytes();
  spdlog::debug("heap release ({}): RSS {} -> {} MiB in {:.1f} ms", mallctl != nullptr ? "jemalloc purge" : "malloc_trim", r.rss_before_bytes >> 20, r.rss_after_bytes >> 20,
                r.ms);
  return r;
}

}  // namespace fusion
