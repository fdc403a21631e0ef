#include "memfd_transfer.h"

#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "fd_protocol.h"

namespace fusion::internal {
namespace {

absl::StatusOr<int> ConnectCompanion(const std::string& socket_path) {
  const std::string path = fdproto::CompanionPath(socket_path);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof addr.sun_path) {
    return absl::InvalidArgumentError(absl::StrCat("socket path too long: ", path));
  }
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError(absl::StrCat("socket: ", std::strerror(errno)));
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    const std::string err = std::strerror(errno);
    close(fd);
    return absl::UnavailableError(absl::StrCat("cannot reach fusiond at unix://", path, ": ", err));
  }
  timeval tv{10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  return fd;
}

// "OK a b" -> {"a", "b"}; "ERR code msg" -> that status.
absl::StatusOr<std::vector<std::string>> ParseReply(const std::string& line) {
  std::vector<std::string> parts = absl::StrSplit(line, absl::MaxSplits(' ', 2));
  if (!parts.empty() && parts[0] == "OK") return std::vector<std::string>(parts.begin() + 1, parts.end());
  int code = 0;
  if (parts.size() >= 2 && parts[0] == "ERR" && absl::SimpleAtoi(parts[1], &code)) {
    return absl::Status(static_cast<absl::StatusCode>(code), parts.size() > 2 ? parts[2] : "");
  }
  return absl::InternalError(absl::StrCat("fd socket: malformed reply '", line, "'"));
}

// Sends `request` (with `fd_to_send`) and returns the reply line; the reply's fd, if any, goes
// to `*received_fd` (else it is closed). A daemon that refuses a connection replies "ERR ..." and
// closes without reading, so our send may fail (EPIPE) although its reply is already here to
// read: that reply wins over the send error.
absl::StatusOr<std::string> Exchange(int sock, const std::string& request, int fd_to_send,
                                     int* received_fd = nullptr) {
  const int send_rc = fdproto::SendLine(sock, request, fd_to_send);
  std::string line;
  int fd = -1;
  const int recv_rc = fdproto::RecvLine(sock, line, fd);
  if (received_fd != nullptr) {
    *received_fd = fd;
  } else if (fd >= 0) {
    close(fd);
  }
  if (recv_rc == 0 && (send_rc == 0 || absl::StartsWith(line, "ERR "))) return line;
  if (send_rc != 0) return absl::UnavailableError(absl::StrCat("fd socket: send: ", std::strerror(send_rc)));
  return absl::UnavailableError(absl::StrCat("fd socket: receive: ", std::strerror(recv_rc)));
}

}  // namespace

absl::StatusOr<std::string> PutMemfd(const std::string& socket_path, absl::string_view bytes) {
  const int memfd = fdproto::CreateSealedMemfd(bytes.data(), bytes.size(), "fusion-sdk-image");
  if (memfd < 0) {
    return absl::ResourceExhaustedError(absl::StrCat("memfd of ", bytes.size(), " bytes: ",
                                                     std::strerror(-memfd)));
  }
  absl::Cleanup close_memfd = [memfd] { close(memfd); };
  auto sock = ConnectCompanion(socket_path);
  if (!sock.ok()) return sock.status();
  absl::Cleanup close_sock = [fd = *sock] { close(fd); };
  auto line = Exchange(*sock, "PUT\n", memfd);
  if (!line.ok()) return line.status();
  auto parts = ParseReply(*line);
  if (!parts.ok()) return parts.status();
  if (parts->empty()) return absl::InternalError("fd socket: reply without a token");
  return (*parts)[0];
}

absl::StatusOr<std::string> GetMemfd(const std::string& socket_path, const std::string& token) {
  auto sock = ConnectCompanion(socket_path);
  if (!sock.ok()) return sock.status();
  absl::Cleanup close_sock = [fd = *sock] { close(fd); };
  int fd = -1;
  auto line = Exchange(*sock, absl::StrCat("GET ", token, "\n"), -1, &fd);
  if (!line.ok()) return line.status();
  absl::Cleanup close_fd = [fd] { if (fd >= 0) close(fd); };
  auto parts = ParseReply(*line);
  if (!parts.ok()) return parts.status();
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0) return absl::InternalError("fd socket: reply without an fd");
  const auto size = static_cast<size_t>(st.st_size);
  void* data = mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
  if (data == MAP_FAILED) return absl::InternalError(absl::StrCat("mmap: ", std::strerror(errno)));
  std::string bytes(static_cast<const char*>(data), size);
  munmap(data, size);
  return bytes;
}

}  // namespace fusion::internal
