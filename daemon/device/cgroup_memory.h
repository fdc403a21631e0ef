// The memory cap of fusiond's own cgroup (systemd's MemoryMax=, a container's limit, a
// `systemd-run -p MemoryMax=` scope), so the host tier's default budget and the CPU device's
// free bytes follow the memory fusiond may really use, not the machine's MemTotal: without it a
// capped fusiond would plan with the host's figures and be killed by the kernel's OOM killer.
//
// Sources (kernel docs, admin-guide/cgroup-v2.rst and cgroup-v1/memory.rst):
//   /proc/self/cgroup: "0::/path" (v2, unified) and "N:memory:/path" (v1 memory controller).
//   v2: <root>/<path>/memory.max ("max" = none), memory.current, memory.stat "inactive_file".
//   v1: <root>/memory/<path>/memory.limit_in_bytes (>= 2^62 = none: the kernel's PAGE_COUNTER_MAX
//       rounded to pages), memory.usage_in_bytes, memory.stat "total_inactive_file".
// The tightest limit from the process's cgroup up to the root counts (a parent's cap binds its
// children). A path that does not exist under <root> (a cgroup namespace hides the prefix) is
// walked up until one does. Usage counts page cache; inactive file pages are what the kernel
// reclaims first, so they count as available (as MemAvailable does).
// Thread-safe (pure functions; the reads are plain file reads).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"
#include "device/host_memory.h"

namespace fusion {

struct CgroupMemoryLimit {
  uint64_t limit_bytes = 0;        // the tightest memory.max / memory.limit_in_bytes on the path
  uint64_t usage_bytes = 0;        // memory.current / memory.usage_in_bytes of that cgroup
  uint64_t reclaimable_bytes = 0;  // its inactive file pages
  std::string where;               // e.g. "cgroup v1 memory:/system.slice/fusiond.service"
};

// The memory cgroup paths named in /proc/self/cgroup text: the v2 path ("0::") and the v1
// memory controller's; empty when absent.
struct ProcCgroupPaths {
  std::string v2, v1_memory;
};
ProcCgroupPaths ParseProcCgroup(absl::string_view text);

// The tightest cap that applies to a process with these paths under `root` (normally
// /sys/fs/cgroup); nullopt when none does (no limit anywhere, or no memory controller).
std::optional<CgroupMemoryLimit> ReadCgroupMemoryLimit(const ProcCgroupPaths& paths,
                                                       const std::string& root = "/sys/fs/cgroup");

// `info` with MemTotal capped at the limit and MemAvailable at what the cgroup has left:
// limit - (usage - reclaimable), never more than the host's own figure.
HostMemoryInfo CapByCgroup(HostMemoryInfo info, const CgroupMemoryLimit& cgroup);

// /proc/meminfo capped by this process's cgroup (ReadHostMemory, then CapByCgroup when a limit
// applies): what fusiond plans its host tier and the CPU device with. UNAVAILABLE like
// ReadHostMemory. `cgroup` (optional) receives the limit that applied.
absl::StatusOr<HostMemoryInfo> ReadProcessHostMemory(std::optional<CgroupMemoryLimit>* cgroup = nullptr);

}  // namespace fusion
