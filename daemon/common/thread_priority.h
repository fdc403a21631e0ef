// SetThisThreadsNice: the calling thread's CPU priority lowered to nice `nice` (0..19).
// Linux keeps a nice value per thread, and a thread created later inherits its creator's: an
// OpenMP team made by this thread's first parallel region, FFmpeg's and x264's workers. An
// unprivileged thread can only lower its priority; the daemon never raises one.
// Errors: returns errno (0: done); a seccomp'd or RLIMIT_NICE-limited service keeps the priority
// it had, and the caller only logs it.
// Thread-safety: affects the calling thread only.
#pragma once

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

namespace fusion {

inline int SetThisThreadsNice(int nice) {
  const auto tid = static_cast<id_t>(syscall(SYS_gettid));
  return setpriority(PRIO_PROCESS, tid, nice) == 0 ? 0 : errno;
}

}  // namespace fusion
