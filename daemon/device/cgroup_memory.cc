#include "device/cgroup_memory.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace fusion {
namespace {

// v1 reports "no limit" as PAGE_COUNTER_MAX pages in bytes (9223372036854771712 with 4-KiB
// pages); anything this large is no limit.
constexpr uint64_t kNoLimit = 1ull << 62;

std::optional<std::string> ReadText(const std::filesystem::path& p) {
  std::ifstream in(p);
  if (!in) return std::nullopt;
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::optional<uint64_t> ReadNumber(const std::filesystem::path& p) {
  std::optional<std::string> t = ReadText(p);
  if (!t) return std::nullopt;
  uint64_t v = 0;
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(*t), &v)) return std::nullopt;  // "max" too
  return v;
}

uint64_t StatValue(const std::filesystem::path& p, absl::string_view key) {
  std::optional<std::string> t = ReadText(p);
  if (!t) return 0;
  for (absl::string_view line : absl::StrSplit(*t, '\n')) {
    std::pair<absl::string_view, absl::string_view> kv = absl::StrSplit(line, absl::MaxSplits(' ', 1));
    uint64_t v = 0;
    if (kv.first == key && absl::SimpleAtoi(kv.second, &v)) return v;
  }
  return 0;
}

struct Layout {
  std::filesystem::path base;  // the hierarchy's mount
  std::string cgroup_path;     // the process's path in it
  const char* limit_file;
  const char* usage_file;
  const char* inactive_key;
  const char* name;
};

std::optional<CgroupMemoryLimit> Tightest(const Layout& l) {
  if (l.cgroup_path.empty() || !std::filesystem::exists(l.base)) return std::nullopt;
  // From the process's cgroup (or the deepest part of its path that exists here) up to the root.
  std::filesystem::path rel = std::filesystem::path(l.cgroup_path).relative_path();
  while (!rel.empty() && !std::filesystem::exists(l.base / rel)) rel = rel.parent_path();
  std::optional<CgroupMemoryLimit> best;
  for (std::filesystem::path p = rel;; p = p.parent_path()) {
    const std::filesystem::path dir = l.base / p;
    std::optional<uint64_t> limit = ReadNumber(dir / l.limit_file);
    if (limit && *limit < kNoLimit && (!best || *limit < best->limit_bytes)) {
      best = CgroupMemoryLimit{*limit, ReadNumber(dir / l.usage_file).value_or(0),
                               StatValue(dir / "memory.stat", l.inactive_key),
                               absl::StrCat(l.name, "/", p.string())};
    }
    if (p.empty()) break;
  }
  return best;
}

}  // namespace

ProcCgroupPaths ParseProcCgroup(absl::string_view text) {
  ProcCgroupPaths out;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    std::vector<absl::string_view> f = absl::StrSplit(line, absl::MaxSplits(':', 2));
    if (f.size() != 3) continue;
    if (f[0] == "0" && f[1].empty()) out.v2 = std::string(f[2]);
    for (absl::string_view c : absl::StrSplit(f[1], ',')) {
      if (c == "memory") out.v1_memory = std::string(f[2]);
    }
  }
  return out;
}

std::optional<CgroupMemoryLimit> ReadCgroupMemoryLimit(const ProcCgroupPaths& paths, const std::string& root) {
  const std::filesystem::path r(root);
  std::optional<CgroupMemoryLimit> v1 =
      Tightest({r / "memory", paths.v1_memory, "memory.limit_in_bytes", "memory.usage_in_bytes",
                "total_inactive_file", "cgroup v1 memory:"});
  // v2 only where the unified hierarchy has the memory controller (a hybrid system's
  // /sys/fs/cgroup/unified has none: no memory.max files there).
  const std::filesystem::path unified = std::filesystem::exists(r / "cgroup.controllers") ? r : r / "unified";
  std::optional<CgroupMemoryLimit> v2 =
      Tightest({unified, paths.v2, "memory.max", "memory.current", "inactive_file", "cgroup v2 "});
  if (v1 && v2) return v1->limit_bytes <= v2->limit_bytes ? v1 : v2;
  return v1 ? v1 : v2;
}

HostMemoryInfo CapByCgroup(HostMemoryInfo info, const CgroupMemoryLimit& cgroup) {
  const uint64_t used = cgroup.usage_bytes - std::min(cgroup.usage_bytes, cgroup.reclaimable_bytes);
  const uint64_t left = cgroup.limit_bytes - std::min(cgroup.limit_bytes, used);
  info.total_bytes = std::min(info.total_bytes, cgroup.limit_bytes);
  info.available_bytes = std::min(info.available_bytes, left);
  return info;
}

absl::StatusOr<HostMemoryInfo> ReadProcessHostMemory(std::optional<CgroupMemoryLimit>* cgroup) {
  absl::StatusOr<HostMemoryInfo> host = ReadHostMemory();
  if (!host.ok()) return host;
  std::optional<CgroupMemoryLimit> limit;
  if (std::optional<std::string> self = ReadText("/proc/self/cgroup")) {
    limit = ReadCgroupMemoryLimit(ParseProcCgroup(*self));
  }
  if (cgroup) *cgroup = limit;
  return limit ? CapByCgroup(*host, *limit) : *host;
}

}  // namespace fusion
