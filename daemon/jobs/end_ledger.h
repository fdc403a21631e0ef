// EndLedger: where a job's end goes when the journal's database cannot take it (disk full).
//
// A file of kSlots fixed slots, written in full (zeros) when it is opened, so that recording an
// end later overwrites blocks the file already has and needs no free space. Each slot holds one
// end: "<id>\t<state>\t<code>\t<finished_ms>\t<message>\n" (the message cut to fit), or zeros.
// Add() writes a slot and fdatasyncs it before returning, so an end it accepted survives a crash:
// the Journal applies the entries at its next write and at open, before recovery requeues
// anything (a job whose end is here never runs again).
// Errors: INTERNAL with strerror's text when the file cannot be made or written;
// RESOURCE_EXHAUSTED when every slot is taken.
// Thread-safety: none; the Journal calls it under its mutex.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "jobs/job.h"

namespace fusion::jobs {

class EndLedger {
 public:
  static constexpr int kSlots = 128;
  static constexpr int kSlotBytes = 512;

  struct Entry {
    std::string id;
    JobState state = JobState::FAILED;
    int32_t error_code = 0;
    int64_t finished_unix_ms = 0;
    std::string error_message;
  };

  // Opens `path` (creating it 0600, kSlots * kSlotBytes bytes of zeros) and reads its entries.
  static absl::StatusOr<std::unique_ptr<EndLedger>> Open(const std::string& path);
  ~EndLedger();
  EndLedger(const EndLedger&) = delete;
  EndLedger& operator=(const EndLedger&) = delete;

  // The entries found at Open() and added since, not yet cleared.
  const std::vector<Entry>& entries() const { return entries_; }
  absl::Status Add(const Entry& entry);
  // Zeros the slot of `id` (no-op when it has none).
  absl::Status Clear(const std::string& id);

 private:
  EndLedger(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  absl::Status WriteSlot(int slot, const std::string& bytes);

  const std::string path_;
  const int fd_;
  std::vector<Entry> entries_;
  std::vector<int> slots_;  // slots_[i] is entries_[i]'s slot
};

}  // namespace fusion::jobs
