#include "rpc/fd_exchange.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "fd_protocol.h"
#include "spdlog/spdlog.h"
#include "base/status_macros.h"

namespace fusion {
namespace {

// "ERR <code> <message>\n" within fdproto::kMaxLine, which the client's RecvLine enforces: a
// message quoting the client's own request (an unknown token) is cut to fit, and control bytes
// (a '\n' would end the line early) become spaces.
std::string ErrLine(const absl::Status& st) {
  std::string line = absl::StrCat("ERR ", static_cast<int>(st.code()), " ");
  absl::string_view msg = st.message();
  msg = msg.substr(0, fdproto::kMaxLine - 1 - line.size());
  for (char c : msg) line += (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) ? ' ' : c;
  line += '\n';
  return line;
}

}  // namespace

absl::StatusOr<std::unique_ptr<FdExchange>> FdExchange::Create(const std::string& socket_path,
                                                               const std::string& group,
                                                               std::vector<uid_t> allowed_uids,
                                                               MemfdRegistry* registry,
                                                               FdExchangeOptions options) {
  if (options.max_in_flight < 1 || options.max_per_uid < 1 || options.request_timeout_ms < 1) {
    return absl::InvalidArgumentError("fd socket: limits and the request timeout must be >= 1");
  }
  ASSIGN_OR_RETURN(auto listener, UdsListener::Create(
      {.path = fdproto::CompanionPath(socket_path), .group = group, .inherited_fd = options.inherited_fd}));
  std::unique_ptr<FdExchange> self(
      new FdExchange(std::move(listener), std::move(allowed_uids), registry, options));
  FdExchange* raw = self.get();
  self->listener_->Start([raw](int conn) { raw->Dispatch(conn); });
  return self;
}

int FdExchange::in_flight() const {
  MutexLock lock(&mu_);
  return in_flight_;
}

absl::Status FdExchange::Admit(uid_t uid) {
  MutexLock lock(&mu_);
  int& mine = per_uid_[uid];
  if (mine >= options_.max_per_uid) {
    return absl::ResourceExhaustedError(
        absl::StrCat("too many fd-socket connections from uid ", uid, ": ", mine,
                     " in flight, at most ", options_.max_per_uid, " per uid"));
  }
  if (in_flight_ >= options_.max_in_flight) {
    if (mine == 0) per_uid_.erase(uid);
    return absl::ResourceExhaustedError(
        absl::StrCat("too many fd-socket connections: ", in_flight_, " in flight from all uids, at most ",
                     options_.max_in_flight, " (refused uid ", uid, ")"));
  }
  ++mine;
  ++in_flight_;
  return absl::OkStatus();
}

void FdExchange::Release(uid_t uid) {
  MutexLock lock(&mu_);
  if (--per_uid_[uid] <= 0) per_uid_.erase(uid);
  if (--in_flight_ == 0) idle_.SignalAll();  // under mu_: Stop() may destroy us once it wakes
}

void FdExchange::Refuse(int conn, const PeerCred& cred, const absl::Status& why) {
  // A fresh socket's send buffer is empty, so this one short line never blocks the accept loop.
  // Closing a Unix socket with unread data would make the peer's read of this reply fail with
  // ECONNRESET instead: drop what it already sent first.
  fdproto::DiscardPending(conn);
  fdproto::SendLine(conn, ErrLine(why));
  close(conn);
  uint64_t held_back = 0;
  if (refusal_log_.Admit(cred.uid, absl::Now(), &held_back)) {
    spdlog::warn("fd socket: refused a connection from uid {} pid {}: {}{}", cred.uid, cred.pid,
                 std::string(why.message()),
                 LogThrottle::HeldBackNote(held_back));
  }
}

void FdExchange::Dispatch(int conn) {
  // The request deadline runs from accept(), whatever the thread start-up costs.
  const absl::Time deadline = absl::Now() + absl::Milliseconds(options_.request_timeout_ms);
  auto cred = PeerCredFromGrpcPeer(absl::StrCat("fd:", conn));
  if (!cred.ok()) {
    close(conn);
    return;
  }
  if (absl::Status st = CheckUidAllowed(cred->uid, allowed_); !st.ok()) return Refuse(conn, *cred, st);
  if (absl::Status st = Admit(cred->uid); !st.ok()) return Refuse(conn, *cred, st);
  std::thread([this, conn, c = *cred, deadline] {
    Serve(conn, c, deadline);
    close(conn);
    Release(c.uid);
  }).detach();
}

void FdExchange::Stop() {
  listener_->Stop();
  MutexLock lock(&mu_);
  while (in_flight_ != 0) idle_.WaitWithDeadline(&mu_, absl::InfiniteFuture());
}

void FdExchange::Serve(int conn, const PeerCred& cred, absl::Time deadline) const {
  // Blocking sends with a timeout; the receive is bounded by RecvLine's total deadline.
  fcntl(conn, F_SETFL, fcntl(conn, F_GETFL) & ~O_NONBLOCK);
  timeval tv{options_.request_timeout_ms / 1000, (options_.request_timeout_ms % 1000) * 1000};
  setsockopt(conn, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);

  ServeFdRequest(conn, cred.uid, registry_, deadline, options_.request_timeout_ms);
}

void ServeFdRequest(int conn, uid_t uid, MemfdRegistry* registry, absl::Time deadline,
                    int request_timeout_ms) {
  std::string line;
  int fd = -1;
  const int64_t left_ms = std::max<int64_t>(1, absl::ToInt64Milliseconds(deadline - absl::Now()));
  if (int rc = fdproto::RecvLine(conn, line, fd, static_cast<int>(left_ms)); rc != 0) {
    if (rc == EPROTO || rc == ETIMEDOUT) {
      fdproto::SendLine(conn, ErrLine(absl::InvalidArgumentError(
                                  rc == ETIMEDOUT ? absl::StrCat("request not received within ",
                                                                 request_timeout_ms, " ms")
                                                  : "request line missing or longer than 256 bytes")));
    }
    return;
  }
  absl::string_view request = line;
  if (request == "PUT") {
    if (fd < 0) {
      fdproto::SendLine(conn, ErrLine(absl::InvalidArgumentError("PUT without an fd")));
      return;
    }
    auto token = registry->Add(fd, uid);  // takes the fd
    if (!token.ok()) {
      fdproto::SendLine(conn, ErrLine(token.status()));
      return;
    }
    auto memfd = registry->Get(*token, uid);
    const size_t size = memfd.ok() ? (*memfd)->bytes().size() : 0;
    fdproto::SendLine(conn, absl::StrCat("OK ", *token, " ", size, "\n"));
    spdlog::debug("memfd {} bytes from uid {} as token {}", size, uid, *token);
    return;
  }
  if (fd >= 0) close(fd);
  if (absl::ConsumePrefix(&request, "GET ")) {
    auto memfd = registry->Fetch(std::string(request), uid);  // a result's token ends here
    if (!memfd.ok()) {
      fdproto::SendLine(conn, ErrLine(memfd.status()));
      return;
    }
    fdproto::SendLine(conn, absl::StrCat("OK ", (*memfd)->bytes().size(), "\n"), (*memfd)->fd());
    return;
  }
  fdproto::SendLine(conn, ErrLine(absl::InvalidArgumentError(
                              absl::StrCat("unknown request '", line.substr(0, 32), "'"))));
}

}  // namespace fusion
