#include "base/size.h"

#include <cmath>
#include <limits>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace fusion {
namespace {

struct Unit {
  const char* name;  // lower case
  long double factor;
};

constexpr Unit kUnits[] = {
    {"", 1},          {"b", 1},
    {"kib", 1024.0L}, {"mib", 1024.0L * 1024}, {"gib", 1024.0L * 1024 * 1024},
    {"tib", 1024.0L * 1024 * 1024 * 1024},
    {"kb", 1e3L},     {"mb", 1e6L},            {"gb", 1e9L},
    {"tb", 1e12L},
};

absl::Status Bad(absl::string_view text, absl::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat("invalid size '", text, "': ", why,
                   " (examples: 512MiB, 6GiB, 1.5GB, 1048576)"));
}

}  // namespace

absl::StatusOr<uint64_t> ParseSize(absl::string_view text) {
  absl::string_view s = absl::StripAsciiWhitespace(text);
  if (s.empty()) return Bad(text, "empty");
  size_t i = 0;
  while (i < s.size() && (absl::ascii_isdigit(s[i]) || s[i] == '.')) ++i;
  absl::string_view number = s.substr(0, i);
  std::string unit = absl::AsciiStrToLower(absl::StripAsciiWhitespace(s.substr(i)));
  if (number.empty()) return Bad(text, "no number");
  const Unit* found = nullptr;
  for (const Unit& u : kUnits) {
    if (unit == u.name) found = &u;
  }
  if (found == nullptr) return Bad(text, absl::StrCat("unknown unit '", unit, "'"));
  const bool has_fraction = number.find('.') != absl::string_view::npos;
  if (has_fraction && found->factor == 1) return Bad(text, "a fraction of a byte");
  double value = 0;
  if (!absl::SimpleAtod(number, &value) || !std::isfinite(value)) {
    return Bad(text, "malformed number");
  }
  if (!has_fraction) {  // exact integer path: no rounding through floating point
    uint64_t whole = 0;
    if (!absl::SimpleAtoi(number, &whole)) return Bad(text, "too large");
    const auto factor = static_cast<uint64_t>(found->factor);
    if (whole > std::numeric_limits<uint64_t>::max() / factor) return Bad(text, "too large");
    return whole * factor;
  }
  const long double bytes = static_cast<long double>(value) * found->factor;
  if (bytes >= 18446744073709551615.0L) return Bad(text, "too large");
  return static_cast<uint64_t>(std::floor(bytes));
}

std::string FormatBytes(uint64_t bytes) {
  static constexpr const char* kNames[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  if (bytes < 1024) return absl::StrCat(bytes, " B");
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024.0 && u < 5) {
    v /= 1024.0;
    ++u;
  }
  return absl::StrFormat("%.1f %s", v, kNames[u]);
}

}  // namespace fusion
