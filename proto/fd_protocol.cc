#include "fd_protocol.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
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

int RecvLine(int sock, std::string& line, int& received_fd) {
  received_fd = -1;
  line.clear();
  // The fd rides on the first byte; read byte-wise after that until '\n' (lines are short).
  char buf[kMaxLine];
  size_t used = 0;
  while (used < sizeof buf) {
    iovec iov{buf + used, 1};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    const ssize_t n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    if (n == 0) return EPROTO;  // peer closed before the end of the line
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
        int fd;
        std::memcpy(&fd, CMSG_DATA(c), sizeof fd);
        if (received_fd >= 0) close(received_fd);  // only one fd per line is meaningful
        received_fd = fd;
      }
    }
    if (buf[used] == '\n') {
      line.assign(buf, used);
      return 0;
    }
    ++used;
  }
  if (received_fd >= 0) close(received_fd);
  received_fd = -1;
  return EPROTO;
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
