// The table of fusiond's configuration keys: one ConfigKey per DaemonConfig setting. Everything
// that knows about keys is made from it (config.cc): the TOML reader (ApplyToml), the
// command-line flags and their --help lines (ParseDaemonCommandLine), DaemonConfigKeys,
// ChangedKeys, LiveReloadKeys and the Markdown reference (ConfigReferenceMarkdown, committed as
// docs/CONFIG.md).
//
// Adding a key: a DaemonConfig member (its initializer is the default), one entry in
// config_table.cc, its commented-out line in packaging/fusiond.toml and docs/CONFIG.md made
// again (`fusiond --config-reference > docs/CONFIG.md`); config_test fails until all agree.
//
// Invariants (config_test checks them): keys are unique and lower_snake_case; each entry's
// member alternative matches its type (kBytes and kInteger: an unsigned member, kDuration:
// int64_t seconds, kNumber: double); ranges hold the default.
// Thread-safety: the table is built once, on first use, and never changes.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "absl/strings/string_view.h"
#include "config/config.h"

namespace fusion::config_table {

enum class KeyType {
  kString,    // TOML string; flag TEXT
  kStrings,   // TOML array of strings; flag TEXT, repeatable
  kUids,      // TOML array of integers in [0, 4294967294]; no flag
  kBytes,     // TOML ParseSize() string ("512MiB", "1.5GB") or integer bytes; flag TEXT
  kInteger,   // TOML integer in `range`; flag UINT in `range` (0 is "not given", never accepted)
  kNumber,    // TOML number in `range`; flag FLOAT (0 is "not given")
  kDuration,  // TOML absl duration string ("24h", "90m", "0"), >= 0, kept as whole seconds;
              // "forever" (kDurationForever) where `forever`; flag TEXT
};

enum class Unit { kNone, kBytes, kMs, kPx, kFrames, kFraction };

using Member =
    std::variant<std::string DaemonConfig::*, std::vector<std::string> DaemonConfig::*,
                 std::vector<uid_t> DaemonConfig::*, uint32_t DaemonConfig::*,
                 uint64_t DaemonConfig::*, int64_t DaemonConfig::*, double DaemonConfig::*>;

// Bounds of a kInteger or kNumber key; integers' bounds are whole and below 2^53.
struct Range {
  double lo = 0;
  double hi = 0;
  bool lo_open = false;  // (lo, ...] rather than [lo, ...]
  bool hi_open = false;
};

struct ConfigKey {
  absl::string_view key;  // the TOML key; the flag is "--" + key with '-' for '_' unless `flag_name`
  KeyType type = KeyType::kString;
  Member member;
  absl::string_view doc;           // one line: --help and docs/CONFIG.md
  Unit unit = Unit::kNone;
  Range range;                    // kInteger and kNumber only
  absl::string_view values;        // other types: what is accepted, in words (ValidateConfig checks)
  absl::string_view zero_means;    // what 0, "" or [] means, when it means something special
  bool has_flag = false;
  absl::string_view flag_name;     // overrides the derived spelling (without "--")
  bool reloadable = false;        // a SIGHUP reload applies it to the running daemon
  bool forever = false;           // kDuration: "forever" is accepted (kDurationForever)

  // Builders for the table's entries, in its style: Integer(...).Flag().Zero("never").
  ConfigKey Flag(absl::string_view name = {}) const;
  ConfigKey Zero(absl::string_view means) const;
  ConfigKey Values(absl::string_view words) const;
  ConfigKey Reloadable() const;
  ConfigKey Forever() const;
  // "--device-memory-limit" for "device_memory_limit"; "" when the key has no flag.
  std::string FlagSpelling() const;
};

// Every key, in the order of packaging/fusiond.toml (that of DaemonConfigKeys and ChangedKeys).
const std::vector<ConfigKey>& Keys();

}  // namespace fusion::config_table
