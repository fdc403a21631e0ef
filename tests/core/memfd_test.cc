// Zero-copy image transport: sealed memfds over the companion socket (SCM_RIGHTS).
#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <vector>

#include "absl/strings/str_cat.h"

#include "fd_protocol.h"
#include "memfd_transfer.h"
#include "rpc/fd_exchange.h"
#include "rpc/memfd_registry.h"
#include "process.h"
#include "temp_dir.h"

namespace fusion {
namespace {

std::string Pattern(size_t n) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>((i * 131) ^ (i >> 7));
  return s;
}

class MemfdTest : public ::testing::Test {
 protected:
  void SetUp() override { Restart({}); }
  void Restart(FdExchangeOptions options) {
    exchange_.reset();
    auto ex = FdExchange::Create(socket_, "", {}, &registry_, options);
    ASSERT_TRUE(ex.ok()) << ex.status();
    exchange_ = *std::move(ex);
  }
  // The reply to a connection that sent nothing (within 5 s), or the RecvLine error.
  static std::string ReplyTo(int sock) {
    std::string line;
    int unused = -1;
    if (int rc = fdproto::RecvLine(sock, line, unused, 5000); rc != 0) return absl::StrCat("rc ", rc);
    return line;
  }
  // A raw connection to the companion socket (-1 on failure).
  int ConnectToExchange() {
    int sock = socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", exchange_->path().c_str());
    if (connect(sock, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      close(sock);
      return -1;
    }
    return sock;
  }
  // Sends a raw PUT with `fd` and returns the reply line.
  std::string RawPut(int fd) {
    const int sock = ConnectToExchange();
    EXPECT_EQ(fdproto::SendLine(sock, "PUT\n", fd), 0);
    std::string line;
    int unused;
    EXPECT_EQ(fdproto::RecvLine(sock, line, unused), 0);
    close(sock);
    return line;
  }

  testing::TempDir dir_;
  const std::string socket_ = dir_.File("f.sock");
  MemfdRegistry registry_{{.max_bytes_per_fd = 8 << 20, .max_total_bytes = 12 << 20}};
  std::unique_ptr<FdExchange> exchange_;
};

TEST_F(MemfdTest, PutHandsTheDaemonTheSameBytesMappedInPlace) {
  const std::string bytes = Pattern(3 << 20);
  auto token = internal::PutMemfd(socket_, bytes);
  ASSERT_TRUE(token.ok()) << token.status();
  EXPECT_EQ(token->size(), 32u);
  auto memfd = registry_.Get(*token, getuid());
  ASSERT_TRUE(memfd.ok()) << memfd.status();
  EXPECT_EQ((*memfd)->bytes().size(), bytes.size());
  EXPECT_TRUE((*memfd)->bytes() == bytes);
  EXPECT_EQ(registry_.total_bytes(), bytes.size());
  registry_.Remove(*token);
  EXPECT_EQ(registry_.total_bytes(), 0u);
  EXPECT_EQ(registry_.Get(*token, getuid()).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(MemfdTest, AnotherUidCannotSeeAToken) {
  auto token = internal::PutMemfd(socket_, Pattern(1000));
  ASSERT_TRUE(token.ok());
  auto other = registry_.Get(*token, getuid() + 1);
  EXPECT_EQ(other.status().code(), absl::StatusCode::kNotFound);
}

TEST_F(MemfdTest, PublishedResultComesBackByGet) {
  const std::string result = Pattern(5 << 20);
  auto token = registry_.Publish(result, getuid());
  ASSERT_TRUE(token.ok()) << token.status();
  auto bytes = internal::GetMemfd(socket_, *token);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_TRUE(*bytes == result);
  // Delivered, it holds nothing: the token is gone (a second GET is NOT_FOUND), no bytes stay
  // registered, and a uid can fetch more results than it may hold at once.
  EXPECT_EQ(registry_.total_bytes(), 0u);
  EXPECT_EQ(internal::GetMemfd(socket_, *token).status().code(), absl::StatusCode::kNotFound);
  for (int i = 0; i < 70; ++i) {  // max_entries_per_uid is 64
    auto t = registry_.Publish(Pattern(4096), getuid());
    ASSERT_TRUE(t.ok()) << "result " << i << ": " << t.status();
    ASSERT_TRUE(internal::GetMemfd(socket_, *t).ok()) << "result " << i;
  }
  EXPECT_EQ(registry_.total_bytes(), 0u);
  // A client's own memfd (PUT) stays until the job reads it or it expires.
  auto put = internal::PutMemfd(socket_, Pattern(1000));
  ASSERT_TRUE(put.ok()) << put.status();
  ASSERT_TRUE(internal::GetMemfd(socket_, *put).ok());
  EXPECT_TRUE(registry_.Get(*put, getuid()).ok());
  auto missing = internal::GetMemfd(socket_, "00000000000000000000000000000000");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
}

// Found by tests/fuzz/fd_protocol_fuzzer: the NOT_FOUND reply quotes the token, and a long one
// made the reply longer than the 256-byte line the client's RecvLine accepts (EPROTO).
TEST_F(MemfdTest, AnErrorReplyFitsOneLineWhateverTheRequestQuotes) {
  auto missing = internal::GetMemfd(socket_, std::string(240, 'f') + "\r\x01");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound) << missing.status();
  EXPECT_EQ(missing.status().message().find('\r'), std::string::npos);
}

TEST_F(MemfdTest, UnsealedMemfdAndNonMemfdAreRefused) {
  int fd = memfd_create("unsealed", MFD_ALLOW_SEALING);
  ASSERT_EQ(write(fd, "abc", 3), 3);
  EXPECT_EQ(RawPut(fd).rfind("ERR 3 memfd: not sealed", 0), 0u);
  close(fd);
  int pipefd[2];
  ASSERT_EQ(pipe(pipefd), 0);
  EXPECT_EQ(RawPut(pipefd[0]).rfind("ERR 3 memfd: the fd is not a memfd", 0), 0u);
  close(pipefd[0]);
  close(pipefd[1]);
  EXPECT_EQ(RawPut(-1).rfind("ERR 3 PUT without an fd", 0), 0u);
}

TEST_F(MemfdTest, SizeLimitsAreResourceExhaustedWithTheNumbers) {
  auto big = internal::PutMemfd(socket_, Pattern((8 << 20) + 1));
  EXPECT_EQ(big.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(big.status().message().find("8388609 bytes exceed the limit of 8388608 bytes"),
            std::string::npos) << big.status();
  ASSERT_TRUE(internal::PutMemfd(socket_, Pattern(7 << 20)).ok());
  auto over_total = internal::PutMemfd(socket_, Pattern(7 << 20));
  EXPECT_EQ(over_total.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(registry_.total_bytes(), 7u << 20);  // the refused one left nothing behind
}

int OpenFdCount() {
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
    (void)e;
    ++n;
  }
  return n;
}

TEST_F(MemfdTest, ExtraFdsInARequestAreClosedNotLeaked) {
  const int sock = ConnectToExchange();
  ASSERT_GE(sock, 0);
  const int before = OpenFdCount();
  // Five fds on one GET line (sent by hand: SendLine sends one).
  int fds[5];
  for (int& fd : fds) fd = open("/dev/null", O_RDONLY);
  std::string line = "GET x\n";
  iovec iov{line.data(), line.size()};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof fds)] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof fds);
  std::memcpy(CMSG_DATA(c), fds, sizeof fds);
  ASSERT_GT(sendmsg(sock, &msg, 0), 0);
  for (int fd : fds) close(fd);
  std::string reply;
  int unused;
  ASSERT_EQ(fdproto::RecvLine(sock, reply, unused, 5000), 0);
  EXPECT_EQ(reply.rfind("ERR 5 ", 0), 0u) << reply;
  close(sock);
  // The daemon side (this process) kept no copy of the five fds: once our socket is closed
  // too, one fewer is open than before.
  EXPECT_TRUE(testing::WaitFor([&] { return OpenFdCount() <= before - 1; }, absl::Seconds(5)))
      << OpenFdCount() << " vs " << before;
}

TEST_F(MemfdTest, ASlowClientDoesNotDelayOthers) {
  const int slow = ConnectToExchange();
  ASSERT_GE(slow, 0);
  ASSERT_EQ(write(slow, "G", 1), 1);  // and nothing more
  const absl::Time start = absl::Now();
  auto token = internal::PutMemfd(socket_, Pattern(1000));
  EXPECT_TRUE(token.ok()) << token.status();
  EXPECT_LT(absl::Now() - start, absl::Seconds(1));
  std::string reply;
  int unused;
  ASSERT_EQ(fdproto::RecvLine(slow, reply, unused, 5000), 0);  // cut off after 2 s
  EXPECT_EQ(reply, "ERR 3 request not received within 2000 ms");
  close(slow);
}

// The report's experiment: many idle connections from one uid. Only max_per_uid (8) hold a
// slot; every other one, and a real PUT of that uid, is told why at once (no broken pipe),
// and transfers work again as soon as the idle ones close.
TEST_F(MemfdTest, IdleConnectionsOfOneUidHoldAtMostItsShare) {
  const std::string why = absl::StrCat("ERR 8 too many fd-socket connections from uid ", getuid(),
                                       ": 8 in flight, at most 8 per uid");
  Restart({.request_timeout_ms = 60000});  // the idle ones keep their slots until closed
  std::vector<int> idle;
  for (int i = 0; i < 64; ++i) {
    idle.push_back(ConnectToExchange());
    ASSERT_GE(idle.back(), 0);
  }
  for (int i = 8; i < 64; ++i) EXPECT_EQ(ReplyTo(idle[i]), why) << "connection " << i;
  EXPECT_EQ(exchange_->in_flight(), 8);
  for (int attempt = 0; attempt < 10; ++attempt) {
    auto refused = internal::PutMemfd(socket_, Pattern(1000));
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
    EXPECT_EQ(absl::StrCat("ERR 8 ", refused.status().message()), why);
  }
  EXPECT_EQ(registry_.total_bytes(), 0u);
  for (int fd : idle) close(fd);
  EXPECT_TRUE(testing::WaitFor([&] { return exchange_->in_flight() == 0; }, absl::Seconds(5)));
  auto token = internal::PutMemfd(socket_, Pattern(1000));
  ASSERT_TRUE(token.ok()) << token.status();
  EXPECT_EQ(registry_.total_bytes(), 1000u);
}

// Another uid (a forked child as nobody) holds 16 idle connections: it gets its 8 slots and
// 8 refusals naming its uid, and this uid's transfers are not affected.
TEST_F(MemfdTest, AnotherUidsIdleConnectionsDoNotLockThisUidOut) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to connect as another uid";
  constexpr uid_t kNobody = 65534;
  Restart({.request_timeout_ms = 60000});
  ASSERT_EQ(chmod(dir_.path().c_str(), 0711), 0);
  ASSERT_EQ(chmod(exchange_->path().c_str(), 0666), 0);
  int report[2], hold[2];
  ASSERT_EQ(pipe(report), 0);
  ASSERT_EQ(pipe(hold), 0);
  const std::string path = exchange_->path();
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {  // only system calls and fixed buffers from here on
    close(hold[1]);
    close(report[0]);
    if (setresgid(kNobody, kNobody, kNobody) != 0 || setresuid(kNobody, kNobody, kNobody) != 0) _exit(2);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
    char refused = 0;
    char first[128] = {};
    int socks[16];
    for (int& sock : socks) {
      sock = socket(AF_UNIX, SOCK_STREAM, 0);
      if (connect(sock, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) _exit(3);
    }
    // Accepted in order: the last 8 are answered at once, then the first 8 must have nothing.
    for (int i = 15; i >= 0; --i) {
      pollfd p{socks[i], POLLIN, 0};
      if (poll(&p, 1, i >= 8 ? 5000 : 0) == 1 && read(socks[i], first, sizeof first - 1) > 0) ++refused;
    }
    if (write(report[1], &refused, 1) != 1 || write(report[1], first, sizeof first) != sizeof first) _exit(4);
    char byte;
    (void)!read(hold[0], &byte, 1);  // keep the connections until the parent is done
    _exit(0);
  }
  close(hold[0]);
  close(report[1]);  // so that a child that dies early reads as EOF here
  char refused = 0;
  char first[128] = {};
  ASSERT_EQ(read(report[0], &refused, 1), 1);
  ASSERT_EQ(read(report[0], first, sizeof first), static_cast<ssize_t>(sizeof first));
  EXPECT_EQ(refused, 8);
  EXPECT_EQ(std::string(first), "ERR 8 too many fd-socket connections from uid 65534: 8 in flight, "
                                "at most 8 per uid\n");
  EXPECT_EQ(exchange_->in_flight(), 8);
  for (int i = 0; i < 8; ++i) {  // this uid's own share is whole
    auto token = internal::PutMemfd(socket_, Pattern(1000));
    EXPECT_TRUE(token.ok()) << token.status();
  }
  close(hold[1]);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  close(report[0]);
}

TEST_F(MemfdTest, AllUidsTogetherAreCappedToo) {
  Restart({.max_in_flight = 3, .max_per_uid = 8});
  std::vector<int> idle;
  for (int i = 0; i < 4; ++i) idle.push_back(ConnectToExchange());
  EXPECT_EQ(ReplyTo(idle[3]), absl::StrCat("ERR 8 too many fd-socket connections: 3 in flight from all "
                                           "uids, at most 3 (refused uid ", getuid(), ")"));
  EXPECT_EQ(exchange_->in_flight(), 3);
  for (int fd : idle) close(fd);
}

// The deadline runs from accept() for a connection that never sends a byte: it is told so
// and its slot is free again, without anyone closing it.
TEST_F(MemfdTest, AnIdleConnectionLosesItsSlotAtTheDeadline) {
  Restart({.max_in_flight = 64, .max_per_uid = 1, .request_timeout_ms = 300});
  const int idle = ConnectToExchange();
  const absl::Time start = absl::Now();
  auto refused = internal::PutMemfd(socket_, Pattern(1000));  // the uid's one slot is taken
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted) << refused.status();
  EXPECT_EQ(ReplyTo(idle), "ERR 3 request not received within 300 ms");
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(250));
  EXPECT_TRUE(testing::WaitFor([&] { return exchange_->in_flight() == 0; }, absl::Seconds(5)));
  EXPECT_TRUE(internal::PutMemfd(socket_, Pattern(1000)).ok());
  close(idle);
}

TEST(MemfdRegistryQuota, OneUidCannotTakeEveryonesShare) {
  MemfdRegistry registry({.max_bytes_per_fd = 1 << 20, .max_total_bytes = 8 << 20,
                          .max_bytes_per_uid = 3000, .max_entries_per_uid = 2});
  ASSERT_TRUE(registry.Publish(Pattern(1000), 1).ok());
  ASSERT_TRUE(registry.Publish(Pattern(1000), 1).ok());
  auto third = registry.Publish(Pattern(10), 1);
  EXPECT_EQ(third.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(third.status().message().find("uid 1 already has 2 memfds of 2000 bytes"),
            std::string::npos) << third.status();
  EXPECT_TRUE(registry.Publish(Pattern(2500), 2).ok());  // another uid is unaffected
  EXPECT_FALSE(registry.Publish(Pattern(600), 2).ok());  // 3100 > 3000 bytes
}

TEST(MemfdClient, NoDaemonIsUnavailable) {
  auto r = internal::PutMemfd("/tmp/fusion-none/x.sock", "abc");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(r.status().message().find("/tmp/fusion-none/x.sock.fd"), std::string::npos);
}

}  // namespace
}  // namespace fusion
