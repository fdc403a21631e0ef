// ResidencyManager's host tier working sets (AcquireHost): the host tier is budgeted like the
// device tier (docs/ARCHITECTURE.md#invariants, 1). Apart from residency_manager.cc only to keep
// files small; the same class, lock and invariant.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/size.h"
#include "memory/residency_manager.h"

namespace fusion {
namespace {
std::string B(uint64_t bytes) { return FormatBytes(bytes); }
}  // namespace

absl::Status ResidencyManager::HostCannotFitError(const std::string& what, uint64_t bytes) const {
  return absl::ResourceExhaustedError(absl::StrCat(
      "host tier: ", what, " needs ", B(bytes), " (", bytes, " bytes), host budget ", B(host_budget_),
      ": it cannot fit even with every host copy dropped"));
}

absl::Status ResidencyManager::CheckHostCanFit(const std::string& what, uint64_t bytes) const {
  MutexLock lock(&mu_);
  if (host_budget_ == 0 || bytes <= host_budget_) return absl::OkStatus();
  return HostCannotFitError(what, bytes);
}

absl::StatusOr<Lease> ResidencyManager::AcquireHost(const Owner& owner, const std::string& what,
                                                    uint64_t bytes, absl::Time deadline,
                                                    const std::function<bool()>& cancelled) {
  MutexLock lock(&mu_);
  bool counted_wait = false;
  while (host_budget_ != 0) {
    if (bytes > host_budget_) {
      ++totals_.refusals;
      return HostCannotFitError(what, bytes);
    }
    const uint64_t load = host_used_ + host_reserved_;
    const uint64_t free = load >= host_budget_ ? 0 : host_budget_ - load;
    if (bytes <= free) break;
    if (bytes <= free + HostDroppableBytes()) {
      // Weights in RAM are a cache: drop copies (LRU first) as if the budget were smaller.
      const uint64_t budget = host_budget_;
      host_budget_ = budget - bytes;
      EnforceHostBudget();
      host_budget_ = budget;
      Changed();
      continue;
    }
    if (!counted_wait) {
      counted_wait = true;
      ++totals_.waits;
    }
    const absl::Time wake = cancelled ? std::min(deadline, absl::Now() + kCancelPoll) : deadline;
    const bool timed_out = changed_.WaitWithDeadline(&mu_, wake) && wake == deadline;
    if (cancelled && cancelled()) {
      return absl::CancelledError(absl::StrCat("job cancelled while waiting for host memory for ", what));
    }
    if (timed_out) {
      ++totals_.refusals;
      return absl::DeadlineExceededError(absl::StrCat(
          "host tier: ", what, " needs ", B(bytes), ", ", B(host_reserved_),
          " held by other host working sets, ", B(host_used_), " of weights, host budget ",
          B(host_budget_), ": waited for memory until the deadline"));
    }
  }
  const uint64_t id = next_lease_++;
  host_leases_[id] = LeaseSnapshot{owner, what, bytes};
  host_reserved_ += bytes;
  Changed();
  return Lease(this, id, what, bytes, Tier::kHost);
}

}  // namespace fusion
