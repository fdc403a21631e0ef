#include "fd_protocol.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

namespace fusion::fdproto {

int SendLine(int sock, const std::string& line, int fd_to_send) {
  iovec iov{const_cast<char*>(line.data()), line.size()};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  if (fd_to_send >= 0) {
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &fd_to_send, sizeof(int));
  }
  for (;;) {
    const ssize_t n = sendmsg(sock, &msg, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    return static_cast<size_t>(n) == line.size() ? 0 : EPROTO;
  }
}

namespace {

// Keeps the first fd of the line in `received_fd` and closes every other one.
void TakeFds(msghdr& msg, int& received_fd) {
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < n; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
      if (received_fd < 0) {
        received_fd = fd;
      } else {
        close(fd);
      }
    }
  }
}

}  // namespace

int RecvLine(int sock, std::string& line, int& received_fd, int timeout_ms) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  received_fd = -1;
  line.clear();
  // The fd rides on the first byte; read byte-wise after that until '\n' (lines are short).
  char buf[kMaxLine];
  size_t used = 0;
  int err = EPROTO;
  while (used < sizeof buf) {
    if (timeout_ms > 0) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      pollfd p{sock, POLLIN, 0};
      const int ready = left.count() > 0 ? poll(&p, 1, static_cast<int>(left.count())) : 0;
      if (ready < 0 && errno == EINTR) continue;
      if (ready <= 0) {
        err = ready == 0 ? ETIMEDOUT : errno;
        break;
      }
    }
    iovec iov{buf + used, 1};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    // Room for a few fds, so that extra ones arrive here and get closed (never leak).
    alignas(cmsghdr) char control[CMSG_SPACE(8 * sizeof(int))] = {};
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    const ssize_t n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      err = errno;
      break;
    }
    TakeFds(msg, received_fd);
    if (n == 0) break;  // peer closed before the end of the line
    if (buf[used] == '\n') {
      line.assign(buf, used);
      return 0;
    }
    ++used;
  }
  if (received_fd >= 0) close(received_fd);
  received_fd = -1;
  return err;
}

void DiscardPending(int sock) {
  for (int i = 0; i < 8; ++i) {
    char buf[kMaxLine];
    iovec iov{buf, sizeof buf};
    alignas(cmsghdr) char control[CMSG_SPACE(8 * sizeof(int))] = {};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    if (recvmsg(sock, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC) <= 0) return;
    int fd = -1;
    TakeFds(msg, fd);
    if (fd >= 0) close(fd);
  }
}

int RequiredSeals() { return F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE; }

int CreateSealedMemfd(const char* data, size_t size, const char* name) {
  const int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return -errno;
  size_t off = 0;
  while (off < size) {
    const ssize_t n = write(fd, data + off, size - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : EIO;
      close(fd);
      return -err;
    }
    off += static_cast<size_t>(n);
  }
  if (fcntl(fd, F_ADD_SEALS, RequiredSeals() | F_SEAL_SEAL) != 0) {
    const int err = errno;
    close(fd);
    return -err;
  }
  return fd;
}

}  // namespace fusion::fdproto
