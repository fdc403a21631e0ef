// LogThrottle: at most one log line per key per interval, with a count of what was held back,
// so that a client retrying a refused call in a loop cannot flood the journal.
// Invariant: for each key, Admit() returns true at most once per `interval`; the calls it refused
// in between are reported (and reset) by the next call it admits.
// Thread-safety: all methods may be called concurrently (one mutex).
#pragma once

#include <cstdint>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/time/time.h"
#include "common/mutex.h"

namespace fusion {

class LogThrottle {
 public:
  // At most `max_keys` keys are remembered (the oldest entries are dropped beyond it), so
  // distinct keys cannot grow the table without bound.
  explicit LogThrottle(absl::Duration interval, size_t max_keys = 1024)
      : interval_(interval), max_keys_(max_keys) {}

  // True when a line for `key` may be logged at `now`; `*suppressed` receives how many calls
  // for `key` were refused since the last admitted one.
  bool Admit(uint64_t key, absl::Time now, uint64_t* suppressed);
  // The suffix for an admitted line: "" or " (N earlier refusals of this uid not logged)".
  static std::string HeldBackNote(uint64_t suppressed);

 private:
  struct Entry {
    absl::Time last;
    uint64_t suppressed = 0;
  };
  const absl::Duration interval_;
  const size_t max_keys_;
  Mutex mu_;
  absl::flat_hash_map<uint64_t, Entry> entries_ ABSL_GUARDED_BY(mu_);
};

}  // namespace fusion
