#include "rpc/memfd_registry.h"

#include <fcntl.h>
#include <linux/memfd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "fd_protocol.h"
#include "base/size.h"
#include "base/status_macros.h"

namespace fusion {
namespace {

std::string NewToken() {
  static Mutex* mu = new Mutex();  // never destroyed, as `gen`
  static absl::BitGen* gen = new absl::BitGen();
  MutexLock lock(mu);
  return absl::StrFormat("%016x%016x", absl::Uniform<uint64_t>(*gen),
                         absl::Uniform<uint64_t>(*gen));
}

}  // namespace

MappedMemfd::~MappedMemfd() {
  if (data_ != nullptr && size_ > 0) munmap(data_, size_);
  close(fd_);
}

absl::StatusOr<std::shared_ptr<MappedMemfd>> MappedMemfd::Map(int fd, uint64_t max_bytes) {
  const int seals = fcntl(fd, F_GET_SEALS);
  if (seals < 0) {
    close(fd);
    return absl::InvalidArgumentError("memfd: the fd is not a memfd (no seals can be read)");
  }
  if ((seals & fdproto::RequiredSeals()) != fdproto::RequiredSeals()) {
    close(fd);
    return absl::InvalidArgumentError(
        "memfd: not sealed against write, grow and shrink (F_SEAL_WRITE|F_SEAL_GROW|F_SEAL_SHRINK)");
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || st.st_size <= 0) {
    close(fd);
    return absl::InvalidArgumentError("memfd: empty");
  }
  const auto size = static_cast<uint64_t>(st.st_size);
  if (size > max_bytes) {
    close(fd);
    return absl::ResourceExhaustedError(absl::StrCat("memfd: ", size, " bytes exceed the limit of ",
                                                     max_bytes, " bytes (", FormatBytes(max_bytes), ")"));
  }
  void* data = mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
  if (data == MAP_FAILED) {
    const std::string err = std::strerror(errno);
    close(fd);
    return absl::InternalError(absl::StrCat("memfd: mmap of ", size, " bytes: ", err));
  }
  return std::shared_ptr<MappedMemfd>(new MappedMemfd(fd, data, size));
}

absl::StatusOr<std::shared_ptr<MappedMemfd>> MappedMemfd::Create(absl::string_view bytes,
                                                                const char* name) {
  if (bytes.empty()) return absl::InvalidArgumentError("memfd: empty");
  const int fd = fdproto::CreateSealedMemfd(bytes.data(), bytes.size(), name);
  if (fd < 0) {
    return absl::ResourceExhaustedError(
        absl::StrCat("memfd: creating ", bytes.size(), " bytes: ", std::strerror(-fd)));
  }
  return Map(fd, bytes.size());
}

absl::StatusOr<std::string> MemfdRegistry::Add(int fd, uid_t uid) {
  ASSIGN_OR_RETURN(auto memfd, MappedMemfd::Map(fd, options_.max_bytes_per_fd));
  return Insert(std::move(memfd), uid, false);
}

absl::StatusOr<std::string> MemfdRegistry::Publish(absl::string_view bytes, uid_t uid) {
  ASSIGN_OR_RETURN(auto memfd, MappedMemfd::Create(bytes, "fusiond-result"));
  return Insert(std::move(memfd), uid, true);
}

absl::StatusOr<std::string> MemfdRegistry::PublishFile(const std::string& path, uid_t uid) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  struct stat st {};
  if (fd < 0 || ::fstat(fd, &st) != 0 || st.st_size <= 0) {
    const int err = errno;
    if (fd >= 0) ::close(fd);
    return absl::InternalError(absl::StrCat("result file ", path, ": cannot be read (", std::strerror(err), ")"));
  }
  const size_t size = static_cast<size_t>(st.st_size);
  void* data = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (data == MAP_FAILED) {
    return absl::InternalError(absl::StrCat("result file ", path, ": cannot be mapped (", std::strerror(errno), ")"));
  }
  auto token = Publish(absl::string_view(static_cast<const char*>(data), size), uid);
  ::munmap(data, size);
  return token;
}

absl::StatusOr<std::string> MemfdRegistry::Insert(std::shared_ptr<MappedMemfd> memfd, uid_t uid, bool published) {
  const uint64_t size = memfd->bytes().size();
  const absl::Time now = absl::Now();
  MutexLock lock(&mu_);
  ExpireLocked(now);
  if (total_bytes_ + size > options_.max_total_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "memfd: ", size, " more bytes would exceed the ", options_.max_total_bytes,
        "-byte limit of registered memfds (", total_bytes_, " bytes registered)"));
  }
  UidShare& share = per_uid_[uid];
  if (share.bytes + size > options_.max_bytes_per_uid ||
      share.entries + 1 > options_.max_entries_per_uid) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "memfd: uid ", uid, " already has ", share.entries, " memfds of ", share.bytes,
        " bytes registered (limits ", options_.max_entries_per_uid, " memfds, ",
        options_.max_bytes_per_uid, " bytes)"));
  }
  std::string token = NewToken();
  total_bytes_ += size;
  share.bytes += size;
  ++share.entries;
  entries_[token] = Entry{std::move(memfd), uid, now + options_.ttl, published};
  return token;
}

absl::StatusOr<std::shared_ptr<MappedMemfd>> MemfdRegistry::Lookup(const std::string& token, uid_t uid,
                                                                   bool drop_published) {
  MutexLock lock(&mu_);
  ExpireLocked(absl::Now());
  auto it = entries_.find(token);
  if (it == entries_.end() || it->second.uid != uid) {
    return absl::NotFoundError(absl::StrCat("memfd token '", token, "' not found"));
  }
  std::shared_ptr<MappedMemfd> memfd = it->second.memfd;
  if (drop_published && it->second.published) EraseLocked(it);
  return memfd;
}

absl::StatusOr<std::shared_ptr<MappedMemfd>> MemfdRegistry::Get(const std::string& token, uid_t uid) {
  return Lookup(token, uid, false);
}

absl::StatusOr<std::shared_ptr<MappedMemfd>> MemfdRegistry::Fetch(const std::string& token, uid_t uid) {
  return Lookup(token, uid, true);
}

void MemfdRegistry::Remove(const std::string& token) {
  MutexLock lock(&mu_);
  auto it = entries_.find(token);
  if (it != entries_.end()) EraseLocked(it);
}

void MemfdRegistry::EraseLocked(absl::flat_hash_map<std::string, Entry>::iterator it) {
  const uint64_t size = it->second.memfd->bytes().size();
  total_bytes_ -= size;
  auto share = per_uid_.find(it->second.uid);
  if (share != per_uid_.end()) {
    share->second.bytes -= size;
    if (--share->second.entries == 0) per_uid_.erase(share);
  }
  entries_.erase(it);
}

uint64_t MemfdRegistry::total_bytes() const {
  MutexLock lock(&mu_);
  return total_bytes_;
}

void MemfdRegistry::ExpireLocked(absl::Time now) {
  for (auto it = entries_.begin(); it != entries_.end();) {
    if (it->second.expires <= now) {
      EraseLocked(it++);
    } else {
      ++it;
    }
  }
}

}  // namespace fusion
