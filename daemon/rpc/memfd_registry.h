// MemfdRegistry: sealed memfds exchanged with clients, by token (zero-copy image transport).
//
// A client's memfd is accepted only if it is sealed against writes, growth and shrinking
// (F_SEAL_WRITE|F_SEAL_GROW|F_SEAL_SHRINK), so its bytes cannot change under the daemon; it is
// mapped read-only once and read in place. Daemon-made memfds (results) are sealed the same
// way before a client gets them. Each token belongs to one uid: another uid's lookup is
// NOT_FOUND (its existence is never revealed). Tokens expire after `ttl`; a daemon-made one
// (a result) is one-shot: Fetch drops it once a client has it, so delivered results do not
// hold memory (64 fetched 27-MB results held 1.7 GB of memfds for 10 minutes, then refused the
// uid's 65th result and every large image).
// Bounds: INVALID_ARGUMENT for an unsealed fd, a non-memfd or an empty one;
// RESOURCE_EXHAUSTED past `max_bytes_per_fd`, `max_total_bytes`, or a uid's own share
// (`max_bytes_per_uid`, `max_entries_per_uid`), so one client cannot exhaust it for others
// (message has the numbers).
// Thread-safety: all methods may be called concurrently (one mutex; no I/O under it).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/mutex.h"
#include "absl/time/time.h"

namespace fusion {

// A read-only mapping of a sealed memfd; unmapped and closed when the last holder drops it.
class MappedMemfd {
 public:
  ~MappedMemfd();
  MappedMemfd(const MappedMemfd&) = delete;
  MappedMemfd& operator=(const MappedMemfd&) = delete;
  absl::string_view bytes() const { return {static_cast<const char*>(data_), size_}; }
  int fd() const { return fd_; }

  // Takes ownership of `fd`; checks the seals and maps it.
  static absl::StatusOr<std::shared_ptr<MappedMemfd>> Map(int fd, uint64_t max_bytes);
  // Makes a sealed memfd holding a copy of `bytes` (named for /proc/PID/fd readers).
  static absl::StatusOr<std::shared_ptr<MappedMemfd>> Create(absl::string_view bytes,
                                                            const char* name);

 private:
  MappedMemfd(int fd, void* data, size_t size) : fd_(fd), data_(data), size_(size) {}
  int fd_;
  void* data_;
  size_t size_;
};

class MemfdRegistry {
 public:
  struct Options {
    uint64_t max_bytes_per_fd = 1ull << 30;  // 1 GiB
    uint64_t max_total_bytes = 4ull << 30;   // all registered memfds together
    uint64_t max_bytes_per_uid = 2ull << 30; // one uid's registered memfds together
    size_t max_entries_per_uid = 64;         // one uid's tokens
    absl::Duration ttl = absl::Minutes(10);  // unused tokens are dropped after this
  };
  explicit MemfdRegistry(Options options) : options_(options) {}

  // Registers a client's memfd (ownership of `fd` is taken, also on error). Returns the token.
  absl::StatusOr<std::string> Add(int fd, uid_t uid);
  // Registers daemon-made bytes for `uid` as a sealed memfd. Returns the token.
  absl::StatusOr<std::string> Publish(absl::string_view bytes, uid_t uid);
  // Registers a copy of the daemon's file `path` (a video result) for `uid` as a sealed memfd:
  // the file is mapped and copied into the memfd page by page, never into the heap.
  // INTERNAL naming the file when it cannot be read; limits as Publish.
  absl::StatusOr<std::string> PublishFile(const std::string& path, uid_t uid);
  // The memfd of `token` if `uid` owns it; NOT_FOUND otherwise (also when expired).
  absl::StatusOr<std::shared_ptr<MappedMemfd>> Get(const std::string& token, uid_t uid);
  // As Get, for handing the memfd to its client (the fd socket's GET): a published token is
  // dropped with it (the mapping lives on while the caller holds it); a client's own stays.
  absl::StatusOr<std::shared_ptr<MappedMemfd>> Fetch(const std::string& token, uid_t uid);
  // Drops a token (its mapping lives on while holders keep it).
  void Remove(const std::string& token);
  // Total bytes registered now.
  uint64_t total_bytes() const;

 private:
  struct Entry {
    std::shared_ptr<MappedMemfd> memfd;
    uid_t uid;
    absl::Time expires;
    bool published = false;  // daemon-made: dropped by Fetch
  };
  absl::StatusOr<std::string> Insert(std::shared_ptr<MappedMemfd> memfd, uid_t uid, bool published);
  absl::StatusOr<std::shared_ptr<MappedMemfd>> Lookup(const std::string& token, uid_t uid, bool drop_published);
  void ExpireLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Options options_;
  mutable Mutex mu_;
  absl::flat_hash_map<std::string, Entry> entries_ ABSL_GUARDED_BY(mu_);
  struct UidShare {
    uint64_t bytes = 0;
    size_t entries = 0;
  };
  absl::flat_hash_map<uid_t, UidShare> per_uid_ ABSL_GUARDED_BY(mu_);
  void EraseLocked(absl::flat_hash_map<std::string, Entry>::iterator it)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  uint64_t total_bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace fusion
