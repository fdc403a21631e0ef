// DiskBudget: a job is admitted only when the state directory has room for it.
//
// A job's bytes on disk are bounded at submit: JobBytes() = source + target + result bound, the
// files the job's images are (the Journal's inputs/ and results/; no copy in SQLite's WAL). The
// result bound is the runner's (JobRunner::CheckImages; a video's counts its chunk parts and
// the joined file). Reserve() admits a job when its bytes fit in the file system's free
// space less a reserve, Reserve(size) = min(64 MiB, 5% of the file system), so a small state
// directory still works, less what the jobs admitted before it and not yet ended hold. Their
// bytes are held until Release() (the job ended).
// Errors: RESOURCE_EXHAUSTED naming the state directory and the bytes (the job's, the free
// space, the reserve, the bytes held); UNAVAILABLE when the free space cannot be read.
// Thread-safety: all methods may be called concurrently.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "common/mutex.h"

namespace fusion::jobs {

class DiskBudget {
 public:
  struct Space {
    uint64_t free_bytes = 0;  // available to fusiond (statvfs f_bavail)
    uint64_t size_bytes = 0;  // the file system's size (f_blocks)
  };
  using Probe = std::function<absl::StatusOr<Space>()>;

  // `probe` reads the file system of `dir` (StatvfsProbe(dir) in fusiond; tests inject one).
  DiskBudget(std::string dir, Probe probe) : dir_(std::move(dir)), probe_(std::move(probe)) {}
  static Probe StatvfsProbe(const std::string& dir);

  static constexpr uint64_t kMaxReserve = 64ull << 20;
  static uint64_t ReserveFor(uint64_t fs_bytes) { return std::min(kMaxReserve, fs_bytes / 20); }
  static uint64_t JobBytes(uint64_t source, uint64_t target, uint64_t result_bound) {
    return source + target + result_bound;
  }

  // Holds `bytes` for a job; returns the ticket Release() takes.
  absl::StatusOr<uint64_t> Reserve(uint64_t bytes);
  void Release(uint64_t ticket);
  uint64_t held_bytes();

 private:
  const std::string dir_;
  const Probe probe_;
  Mutex mu_;
  absl::flat_hash_map<uint64_t, uint64_t> held_ ABSL_GUARDED_BY(mu_);  // ticket -> bytes
  uint64_t held_total_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t next_ticket_ ABSL_GUARDED_BY(mu_) = 1;
};

}  // namespace fusion::jobs
