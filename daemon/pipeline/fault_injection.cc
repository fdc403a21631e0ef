#include "pipeline/fault_injection.h"

#include <cstdlib>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace fusion {

absl::StatusOr<FaultInjector> FaultInjector::Parse(const std::string& spec) {
  FaultInjector f;
  for (absl::string_view entry : absl::StrSplit(spec, ',', absl::SkipEmpty())) {
    std::pair<std::string, std::string> kv = absl::StrSplit(entry, absl::MaxSplits('=', 1));
    FaultMode mode;
    if (kv.second == "fail_first_device") mode = FaultMode::kFailFirstDevice;
    else if (kv.second == "fail_untiled") mode = FaultMode::kFailUntiled;
    else if (kv.second == "fail_device") mode = FaultMode::kFailDevice;
    else if (kv.second == "fail_all") mode = FaultMode::kFailAll;
    else if (kv.second == "hang") mode = FaultMode::kHang;
    else if (kv.second == "none") mode = FaultMode::kNone;
    else {
      return absl::InvalidArgumentError(absl::StrCat(
          "fault spec '", entry,
          "': expected stage=fail_first_device|fail_untiled|fail_device|fail_all|none"));
    }
    if (kv.first.empty()) return absl::InvalidArgumentError(absl::StrCat("fault spec '", entry, "': no stage"));
    f.Set(kv.first, mode);
  }
  return f;
}

absl::StatusOr<FaultInjector> FaultInjector::FromEnvironment() {
#ifdef FUSION_FAULT_INJECTION
  if (const char* spec = std::getenv("FUSIOND_FAULTS"); spec != nullptr) return Parse(spec);
#endif
  return FaultInjector();
}

FaultInjector::FaultInjector(const FaultInjector& other) { *this = other; }

FaultInjector& FaultInjector::operator=(const FaultInjector& other) {
  if (this == &other) return *this;
  absl::flat_hash_map<std::string, FaultMode> modes;
  {
    MutexLock lock(&other.mu_);
    modes = other.modes_;
  }
  MutexLock lock(&mu_);
  modes_ = std::move(modes);
  device_attempts_.clear();
  return *this;
}

void FaultInjector::Set(const std::string& stage, FaultMode mode) {
  MutexLock lock(&mu_);
  modes_[stage] = mode;
  device_attempts_[stage] = 0;
}

bool FaultInjector::FailDevice(const std::string& stage, int tile_px) {
  MutexLock lock(&mu_);
  auto it = modes_.find(stage);
  if (it == modes_.end()) return false;
  const int attempt = device_attempts_[stage]++;
  switch (it->second) {
    case FaultMode::kNone:
    case FaultMode::kHang: return false;
    case FaultMode::kFailFirstDevice: return attempt == 0;
    case FaultMode::kFailUntiled: return tile_px == 0;
    case FaultMode::kFailDevice:
    case FaultMode::kFailAll: return true;
  }
  return false;
}

bool FaultInjector::FailCpu(const std::string& stage) const {
  MutexLock lock(&mu_);
  auto it = modes_.find(stage);
  return it != modes_.end() && it->second == FaultMode::kFailAll;
}

bool FaultInjector::Hangs(const std::string& stage) const {
  MutexLock lock(&mu_);
  auto it = modes_.find(stage);
  return it != modes_.end() && it->second == FaultMode::kHang;
}

}  // namespace fusion
