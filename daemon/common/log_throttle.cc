#include "common/log_throttle.h"

#include "absl/strings/str_cat.h"

namespace fusion {

bool LogThrottle::Admit(uint64_t key, absl::Time now, uint64_t* suppressed) {
  MutexLock lock(&mu_);
  auto it = entries_.find(key);
  if (it != entries_.end() && now - it->second.last < interval_) {
    ++it->second.suppressed;
    return false;
  }
  if (it == entries_.end()) {
    if (entries_.size() >= max_keys_) {  // drop the stalest entry
      auto oldest = entries_.begin();
      for (auto e = entries_.begin(); e != entries_.end(); ++e) {
        if (e->second.last < oldest->second.last) oldest = e;
      }
      entries_.erase(oldest);
    }
    it = entries_.emplace(key, Entry{}).first;
  }
  *suppressed = it->second.suppressed;
  it->second = Entry{now, 0};
  return true;
}

std::string LogThrottle::HeldBackNote(uint64_t suppressed) {
  return suppressed == 0 ? std::string() : absl::StrCat(" (", suppressed, " earlier refusals of this uid not logged)");
}

}  // namespace fusion
