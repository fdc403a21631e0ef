#include "device/host_memory.h"

#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace fusion {

absl::StatusOr<HostMemoryInfo> ParseMeminfo(absl::string_view text) {
  HostMemoryInfo info;
  bool have_total = false, have_available = false;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    std::pair<absl::string_view, absl::string_view> kv = absl::StrSplit(line, absl::MaxSplits(':', 1));
    absl::string_view value = absl::StripAsciiWhitespace(kv.second);
    if (!absl::ConsumeSuffix(&value, "kB")) continue;
    uint64_t kib = 0;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(value), &kib)) {
      return absl::InvalidArgumentError(absl::StrCat("meminfo: malformed line '", line, "'"));
    }
    if (kv.first == "MemTotal") { info.total_bytes = kib * 1024; have_total = true; }
    if (kv.first == "MemAvailable") { info.available_bytes = kib * 1024; have_available = true; }
  }
  if (!have_total || !have_available) {
    return absl::InvalidArgumentError("meminfo: MemTotal or MemAvailable missing");
  }
  return info;
}

absl::StatusOr<HostMemoryInfo> ReadHostMemory(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::UnavailableError(absl::StrCat("cannot read ", path));
  std::stringstream text;
  text << in.rdbuf();
  return ParseMeminfo(text.str());
}

}  // namespace fusion
