// Byte sizes as users write them: "512MiB", "6GiB", "1.5GB", "1048576". Used by fusiond, fusionctl and the SDK's sources.
//
// Binary units (KiB, MiB, GiB, TiB) are powers of 1024; decimal units (KB, MB, GB, TB) powers
// of 1000; "B" or no unit means bytes. Units are case-insensitive, a space before the unit is
// allowed, fractions are allowed with a unit (rounded down to whole bytes), never without.
// Thread-safe (pure functions).
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace fusion {

// Parses `text` into bytes. INVALID_ARGUMENT with the text quoted on an empty, negative,
// malformed or overflowing size, or on an unknown unit.
absl::StatusOr<uint64_t> ParseSize(absl::string_view text);

// Formats bytes for humans with a binary unit: 268435456 -> "256.0 MiB", 512 -> "512 B".
std::string FormatBytes(uint64_t bytes);

}  // namespace fusion
