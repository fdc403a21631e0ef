#include "jobs/end_ledger.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/status_macros.h"

namespace fusion::jobs {
namespace {

constexpr int64_t kFileBytes = int64_t{EndLedger::kSlots} * EndLedger::kSlotBytes;

absl::Status Errno(const std::string& what) { return absl::InternalError(absl::StrCat(what, ": ", std::strerror(errno))); }

bool Parse(absl::string_view slot, EndLedger::Entry& out) {
  const size_t end = slot.find('\n');
  if (end == absl::string_view::npos) return false;
  std::vector<absl::string_view> f = absl::StrSplit(slot.substr(0, end), absl::MaxSplits('\t', 4));
  int state = 0;
  if (f.size() != 5 || f[0].empty() || !absl::SimpleAtoi(f[1], &state) || !absl::SimpleAtoi(f[2], &out.error_code) ||
      !absl::SimpleAtoi(f[3], &out.finished_unix_ms)) {
    return false;
  }
  out.id = std::string(f[0]);
  out.state = static_cast<JobState>(state);
  out.error_message = std::string(f[4]);
  return IsFinal(out.state);
}

}  // namespace

absl::StatusOr<std::unique_ptr<EndLedger>> EndLedger::Open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return Errno(absl::StrCat("journal: cannot open ", path));
  std::unique_ptr<EndLedger> ledger(new EndLedger(path, fd));
  ::fchmod(fd, 0600);
  std::string bytes(kFileBytes, '\0');
  const ssize_t n = ::pread(fd, bytes.data(), bytes.size(), 0);
  if (n < 0) return Errno(absl::StrCat("journal: reading ", path));
  if (n < kFileBytes) {
    // New (or cut short): fill it with real zeros now, while there is room.
    const std::string zeros(kFileBytes - n, '\0');
    if (::pwrite(fd, zeros.data(), zeros.size(), n) != static_cast<ssize_t>(zeros.size()) || ::fsync(fd) != 0) {
      return Errno(absl::StrCat("journal: preparing ", path));
    }
  }
  for (int slot = 0; slot < kSlots; ++slot) {
    Entry e;
    if (Parse(absl::string_view(bytes).substr(static_cast<size_t>(slot) * kSlotBytes, kSlotBytes), e)) {
      ledger->entries_.push_back(std::move(e));
      ledger->slots_.push_back(slot);
    }
  }
  return ledger;
}

EndLedger::~EndLedger() { ::close(fd_); }

absl::Status EndLedger::WriteSlot(int slot, const std::string& bytes) {
  std::string padded = bytes;
  padded.resize(kSlotBytes, '\0');
  if (::pwrite(fd_, padded.data(), padded.size(), static_cast<off_t>(slot) * kSlotBytes) != kSlotBytes ||
      ::fdatasync(fd_) != 0) {
    return Errno(absl::StrCat("journal: writing ", path_));
  }
  return absl::OkStatus();
}

absl::Status EndLedger::Add(const Entry& entry) {
  int slot = 0;
  while (slot < kSlots && std::find(slots_.begin(), slots_.end(), slot) != slots_.end()) ++slot;
  if (slot == kSlots) {
    return absl::ResourceExhaustedError(absl::StrCat("journal: ", path_, " holds ", kSlots, " unrecorded job ends"));
  }
  std::string line = absl::StrCat(entry.id, "\t", static_cast<int>(entry.state), "\t", entry.error_code, "\t",
                                  entry.finished_unix_ms, "\t");
  if (line.size() >= kSlotBytes) {
    return absl::InvalidArgumentError(absl::StrCat("journal: job id '", entry.id, "' is too long"));
  }
  std::string message = entry.error_message.substr(0, kSlotBytes - 1 - line.size());  // what fits
  std::replace(message.begin(), message.end(), '\n', ' ');
  absl::StrAppend(&line, message, "\n");
  RETURN_IF_ERROR(WriteSlot(slot, line));
  entries_.push_back(entry);
  entries_.back().error_message = std::move(message);
  slots_.push_back(slot);
  return absl::OkStatus();
}

absl::Status EndLedger::Clear(const std::string& id) {
  for (size_t i = 0; i < entries_.size(); ++i) {
    if (entries_[i].id != id) continue;
    RETURN_IF_ERROR(WriteSlot(slots_[i], ""));
    entries_.erase(entries_.begin() + static_cast<std::ptrdiff_t>(i));
    slots_.erase(slots_.begin() + static_cast<std::ptrdiff_t>(i));
    return absl::OkStatus();
  }
  return absl::OkStatus();
}

}  // namespace fusion::jobs
