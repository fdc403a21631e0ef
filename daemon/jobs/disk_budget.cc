#include "jobs/disk_budget.h"

#include <sys/statvfs.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "base/size.h"
#include "base/status_macros.h"

namespace fusion::jobs {

DiskBudget::Probe DiskBudget::StatvfsProbe(const std::string& dir) {
  return [dir]() -> absl::StatusOr<Space> {
    struct statvfs vfs;
    if (::statvfs(dir.c_str(), &vfs) != 0) {
      return absl::UnavailableError(absl::StrCat("state directory ", dir, ": statvfs: ", std::strerror(errno)));
    }
    return Space{static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize, static_cast<uint64_t>(vfs.f_blocks) * vfs.f_frsize};
  };
}

absl::StatusOr<uint64_t> DiskBudget::Reserve(uint64_t bytes) {
  ASSIGN_OR_RETURN(auto space, probe_());
  const uint64_t reserve = ReserveFor(space.size_bytes);
  MutexLock lock(&mu_);
  const uint64_t unusable = reserve + held_total_;
  const uint64_t room = space.free_bytes > unusable ? space.free_bytes - unusable : 0;
  if (bytes > room) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "state directory ", dir_, " is too full for this job: it needs ", FormatBytes(bytes), " (", bytes,
        " bytes: source + target + result bound); ", FormatBytes(space.free_bytes), " free, less a reserve of ",
        FormatBytes(reserve), " and ", FormatBytes(held_total_), " held by jobs not yet ended"));
  }
  const uint64_t ticket = next_ticket_++;
  held_[ticket] = bytes;
  held_total_ += bytes;
  return ticket;
}

void DiskBudget::Release(uint64_t ticket) {
  MutexLock lock(&mu_);
  auto it = held_.find(ticket);
  if (it == held_.end()) return;
  held_total_ -= it->second;
  held_.erase(it);
}

uint64_t DiskBudget::held_bytes() {
  MutexLock lock(&mu_);
  return held_total_;
}

}  // namespace fusion::jobs
