#include "rpc/fd_exchange.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "fd_protocol.h"
#include "rpc/peer.h"
#include "spdlog/spdlog.h"

namespace fusion {
namespace {

std::string ErrLine(const absl::Status& st) {
  std::string msg(st.message());
  for (char& c : msg) {
    if (c == '\n') c = ' ';
  }
  return absl::StrCat("ERR ", static_cast<int>(st.code()), " ", msg, "\n");
}

}  // namespace

absl::StatusOr<std::unique_ptr<FdExchange>> FdExchange::Create(const std::string& socket_path,
                                                               const std::string& group,
                                                               std::vector<uid_t> allowed_uids,
                                                               MemfdRegistry* registry) {
  auto listener = UdsListener::Create({.path = fdproto::CompanionPath(socket_path), .group = group});
  if (!listener.ok()) return listener.status();
  std::unique_ptr<FdExchange> self(
      new FdExchange(*std::move(listener), std::move(allowed_uids), registry));
  FdExchange* raw = self.get();
  self->listener_->Start([raw](int conn) { raw->Dispatch(conn); });
  return self;
}

void FdExchange::Dispatch(int conn) {
  {
    absl::MutexLock lock(&mu_);
    if (in_flight_ >= kMaxInFlight) {
      close(conn);  // the client sees a reset and may retry
      return;
    }
    ++in_flight_;
  }
  std::thread([this, conn] {
    Serve(conn);
    close(conn);
    absl::MutexLock lock(&mu_);
    --in_flight_;
  }).detach();
}

void FdExchange::Stop() {
  listener_->Stop();
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](int* n) { return *n == 0; }, &in_flight_));
}

void FdExchange::Serve(int conn) const {
  // Blocking sends with a timeout; the receive is bounded by RecvLine's total deadline.
  fcntl(conn, F_SETFL, fcntl(conn, F_GETFL) & ~O_NONBLOCK);
  timeval tv{kRequestTimeoutMs / 1000, 0};
  setsockopt(conn, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);

  auto cred = PeerCredFromGrpcPeer(absl::StrCat("fd:", conn));
  if (!cred.ok()) return;
  std::string line;
  int fd = -1;
  if (int rc = fdproto::RecvLine(conn, line, fd, kRequestTimeoutMs); rc != 0) {
    if (rc == EPROTO || rc == ETIMEDOUT) {
      fdproto::SendLine(conn, ErrLine(absl::InvalidArgumentError(
                                  rc == ETIMEDOUT ? "request not received within 2000 ms"
                                                  : "request line missing or longer than 256 bytes")));
    }
    return;
  }
  if (absl::Status st = CheckUidAllowed(cred->uid, allowed_); !st.ok()) {
    if (fd >= 0) close(fd);
    fdproto::SendLine(conn, ErrLine(st));
    return;
  }
  absl::string_view request = line;
  if (request == "PUT") {
    if (fd < 0) {
      fdproto::SendLine(conn, ErrLine(absl::InvalidArgumentError("PUT without an fd")));
      return;
    }
    auto token = registry_->Add(fd, cred->uid);  // takes the fd
    if (!token.ok()) {
      fdproto::SendLine(conn, ErrLine(token.status()));
      return;
    }
    auto memfd = registry_->Get(*token, cred->uid);
    const size_t size = memfd.ok() ? (*memfd)->bytes().size() : 0;
    fdproto::SendLine(conn, absl::StrCat("OK ", *token, " ", size, "\n"));
    spdlog::debug("memfd {} bytes from uid {} as token {}", size, cred->uid, *token);
    return;
  }
  if (fd >= 0) close(fd);
  if (absl::ConsumePrefix(&request, "GET ")) {
    auto memfd = registry_->Get(std::string(request), cred->uid);
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
