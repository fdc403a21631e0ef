// Fuzz target: the fd socket's line protocol, daemon side (rpc/fd_exchange.h ServeFdRequest over
// proto/fd_protocol.h RecvLine/SendLine). Each input is what a client writes on a fresh
// connection; a socketpair carries it to the daemon's code, with an fd attached as the first
// byte's flags say:
//   bit 0: a memfd sealed as the protocol requires (a valid PUT);  bit 1: an unsealed memfd;
//   bit 2: a pipe (not a memfd);  bit 3: a second fd (always dropped);
//   bit 4: the string "%T" in the line is replaced by a token the caller's uid owns (GET).
// Checked: exactly one reply line, "OK ..." or "ERR <code> ...", an fd with an OK to GET and
// none otherwise, and no fd of the process left open afterwards. docs/FUZZING.md.
#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_replace.h"
#include "absl/time/clock.h"
#include "fd_protocol.h"
#include "fuzz_check.h"
#include "rpc/fd_exchange.h"
#include "rpc/memfd_registry.h"

namespace {

constexpr uid_t kUid = 1000;

int OpenFds() {
  int n = 0;
  DIR* d = opendir("/proc/self/fd");
  FUZZ_CHECK(d != nullptr);
  while (readdir(d) != nullptr) ++n;
  closedir(d);
  return n;
}

int UnsealedMemfd() {
  const int fd = memfd_create("fuzz-unsealed", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  FUZZ_CHECK(fd >= 0);
  FUZZ_CHECK(write(fd, "abc", 3) == 3);
  return fd;
}

// Sends `line` with up to two fds in one SCM_RIGHTS message.
void Send(int sock, const std::string& line, int fd1, int fd2) {
  if (fd2 < 0) {
    FUZZ_CHECK(fusion::fdproto::SendLine(sock, line, fd1) == 0 || line.empty());
    return;
  }
  iovec iov{const_cast<char*>(line.data()), line.size()};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(2 * sizeof(int))] = {};
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(2 * sizeof(int));
  const int fds[2] = {fd1, fd2};
  std::memcpy(CMSG_DATA(c), fds, sizeof fds);
  FUZZ_CHECK(sendmsg(sock, &msg, MSG_NOSIGNAL) == static_cast<ssize_t>(line.size()));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1 || size > 4096) return 0;  // a socketpair buffers this much without a reader
  const uint8_t flags = data[0];
  std::string line(reinterpret_cast<const char*>(data + 1), size - 1);
  const int fds_before = OpenFds();
  {
    fusion::MemfdRegistry registry(fusion::MemfdRegistry::Options{});
    if (flags & 16) {
      auto token = registry.Publish("published bytes", kUid);
      FUZZ_CHECK(token.ok());
      line = absl::StrReplaceAll(line, {{"%T", *token}});
    }
    int pair[2];
    FUZZ_CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) == 0);
    const int client = pair[0], daemon = pair[1];

    int fd1 = -1, fd2 = -1;
    if (flags & 1) fd1 = fusion::fdproto::CreateSealedMemfd("sealed bytes", 12, "fuzz-sealed");
    else if (flags & 2) fd1 = UnsealedMemfd();
    else if (flags & 4) {
      int p[2];
      FUZZ_CHECK(pipe2(p, O_CLOEXEC) == 0);
      close(p[1]);
      fd1 = p[0];
    }
    if ((flags & 8) && fd1 >= 0) fd2 = UnsealedMemfd();
    // An fd rides on a byte: with an empty line there is nothing to carry it.
    if (line.empty() && fd1 >= 0) line = "\n";
    if (!line.empty()) Send(client, line, fd1, fd2);
    if (fd1 >= 0) close(fd1);
    if (fd2 >= 0) close(fd2);
    shutdown(client, SHUT_WR);

    fusion::ServeFdRequest(daemon, kUid, &registry, absl::Now() + absl::Seconds(2), 2000);
    shutdown(daemon, SHUT_WR);

    std::string reply;
    int reply_fd = -1;
    FUZZ_CHECK(fusion::fdproto::RecvLine(client, reply, reply_fd, 2000) == 0);
    FUZZ_CHECK(absl::StartsWith(reply, "OK ") || absl::StartsWith(reply, "ERR "));
    const bool get = absl::StartsWith(line, "GET ");
    FUZZ_CHECK((reply_fd >= 0) == (get && absl::StartsWith(reply, "OK ")));
    if (reply_fd >= 0) close(reply_fd);
    // Nothing after the one reply line.
    std::string more;
    int more_fd = -1;
    FUZZ_CHECK(fusion::fdproto::RecvLine(client, more, more_fd, 2000) != 0);
    close(client);
    close(daemon);
  }
  FUZZ_CHECK(OpenFds() == fds_before);
  return 0;
}
