#include "http2_flood.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "absl/time/clock.h"

namespace fusion::testing {
namespace {

constexpr char kPreface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

// A frame header (RFC 9113 §4.1): 24-bit length, type, flags, 31-bit stream id.
void AppendFrameHeader(std::string& out, uint32_t length, uint8_t type, uint8_t flags) {
  out.push_back(static_cast<char>((length >> 16) & 0xff));
  out.push_back(static_cast<char>((length >> 8) & 0xff));
  out.push_back(static_cast<char>(length & 0xff));
  out.push_back(static_cast<char>(type));
  out.push_back(static_cast<char>(flags));
  out.append(4, '\0');  // stream 0
}

// Writes all of `data` unless the deadline passes or the peer goes away; false when it did.
bool WriteAll(int fd, const char* data, size_t size, absl::Time deadline, FloodResult& result) {
  while (size > 0) {
    const ssize_t n = send(fd, data, size, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      data += n;
      size -= static_cast<size_t>(n);
      result.bytes_written += static_cast<uint64_t>(n);
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
      const absl::Duration left = deadline - absl::Now();
      if (left <= absl::ZeroDuration()) return false;
      pollfd p{fd, POLLOUT, 0};
      poll(&p, 1, static_cast<int>(std::min<int64_t>(absl::ToInt64Milliseconds(left) + 1, 50)));
      continue;
    }
    result.peer_closed = true;
    return false;
  }
  return true;
}

}  // namespace

FloodResult PingFlood(const std::string& path, absl::Duration duration, uint64_t max_pings,
                      absl::Duration hold) {
  FloodResult result;
  const absl::Time deadline = absl::Now() + duration;
  sockaddr_un addr{};
  if (path.size() >= sizeof addr.sun_path) return result;
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return result;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    return result;
  }
  result.connected = true;
  std::string hello(kPreface, sizeof kPreface - 1);
  AppendFrameHeader(hello, 0, /*SETTINGS*/ 0x4, 0);
  bool going = WriteAll(fd, hello.data(), hello.size(), deadline, result);
  // 64 PINGs per write: 17 bytes each, opaque data = a counter.
  std::string batch;
  while (going && result.pings_sent < max_pings && absl::Now() < deadline) {
    batch.clear();
    for (int i = 0; i < 64; ++i) {
      AppendFrameHeader(batch, 8, /*PING*/ 0x6, 0);
      const uint64_t n = result.pings_sent + i;
      for (int b = 7; b >= 0; --b) batch.push_back(static_cast<char>((n >> (8 * b)) & 0xff));
    }
    going = WriteAll(fd, batch.data(), batch.size(), deadline, result);
    if (going) result.pings_sent += 64;
  }
  if (!result.peer_closed && hold > absl::ZeroDuration()) {
    // Hold the connection unread; notice the server closing it.
    const absl::Time end = absl::Now() + hold;
    for (absl::Duration left = hold; left > absl::ZeroDuration(); left = end - absl::Now()) {
      pollfd p{fd, POLLRDHUP, 0};
      if (poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(left) + 1)) > 0 &&
          (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0) {
        result.peer_closed = true;
        break;
      }
    }
  }
  close(fd);
  return result;
}

}  // namespace fusion::testing
