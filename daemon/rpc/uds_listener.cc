#include "rpc/uds_listener.h"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "spdlog/spdlog.h"

namespace fusion {
namespace {

std::string Errno(absl::string_view what) {
  return absl::StrCat(what, ": ", std::strerror(errno));
}

bool FillAddress(const std::string& path, sockaddr_un& addr) {
  if (path.size() >= sizeof addr.sun_path) return false;
  std::memset(&addr, 0, sizeof addr);
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  return true;
}

}  // namespace

bool UnixSocketIsLive(const std::string& path) {
  sockaddr_un addr;
  if (!FillAddress(path, addr)) return false;
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  const bool live = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  close(fd);
  return live;
}

bool RemoveStaleSocket(const std::string& path) {
  struct stat st;
  if (lstat(path.c_str(), &st) != 0 || !S_ISSOCK(st.st_mode) || UnixSocketIsLive(path)) return false;
  return unlink(path.c_str()) == 0;
}

absl::StatusOr<std::unique_ptr<UdsListener>> UdsListener::Create(const Options& options) {
  if (options.inherited_fd >= 0) {
    int pipe_fds[2];
    if (pipe2(pipe_fds, O_CLOEXEC | O_NONBLOCK) != 0) return absl::UnavailableError(Errno("pipe2"));
    // The accept loop polls the fd and accept4() gives each connection its own flags.
    (void)fcntl(options.inherited_fd, F_SETFD, FD_CLOEXEC);
    return std::unique_ptr<UdsListener>(new UdsListener(options, options.inherited_fd, pipe_fds[0], pipe_fds[1]));
  }
  sockaddr_un addr;
  if (!FillAddress(options.path, addr)) {
    return absl::InvalidArgumentError(absl::StrCat("socket path '", options.path, "' is longer than ",
                                                   sizeof addr.sun_path - 1, " bytes"));
  }
  gid_t gid = static_cast<gid_t>(-1);
  if (!options.group.empty()) {
    const group* g = getgrnam(options.group.c_str());
    if (g == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("socket_group '", options.group, "' does not exist"));
    }
    gid = g->gr_gid;
  }
  struct stat st;
  if (lstat(options.path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      return absl::FailedPreconditionError(
          absl::StrCat("'", options.path, "' exists and is not a socket; refusing to replace it"));
    }
    if (UnixSocketIsLive(options.path)) {
      return absl::FailedPreconditionError(
          absl::StrCat("another fusiond is serving on '", options.path, "'"));
    }
    spdlog::info("replacing stale socket file {}", options.path);
    unlink(options.path.c_str());
  }
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::UnavailableError(Errno("socket"));
  absl::Cleanup close_fd = [fd] { close(fd); };
  // Bind under a umask that already gives the final mode, so no wider window exists.
  const mode_t old_umask = umask(static_cast<mode_t>(~options.mode) & 0777);
  const int bound = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  umask(old_umask);
  if (bound != 0) return absl::UnavailableError(Errno(absl::StrCat("bind ", options.path)));
  if (chmod(options.path.c_str(), options.mode) != 0 ||
      (gid != static_cast<gid_t>(-1) && chown(options.path.c_str(), -1, gid) != 0)) {
    const std::string err = Errno(absl::StrCat("chmod/chown ", options.path));
    unlink(options.path.c_str());
    return absl::UnavailableError(err);
  }
  if (listen(fd, options.backlog) != 0) {
    const std::string err = Errno("listen");
    unlink(options.path.c_str());
    return absl::UnavailableError(err);
  }
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC | O_NONBLOCK) != 0) {
    unlink(options.path.c_str());
    return absl::UnavailableError(Errno("pipe2"));
  }
  std::move(close_fd).Cancel();
  return std::unique_ptr<UdsListener>(new UdsListener(options, fd, pipe_fds[0], pipe_fds[1]));
}

UdsListener::UdsListener(Options options, int listen_fd, int wake_read, int wake_write)
    : options_(std::move(options)),
      listen_fd_(listen_fd),
      wake_read_(wake_read),
      wake_write_(wake_write) {}

UdsListener::~UdsListener() { Stop(); }

void UdsListener::Start(std::function<void(int fd)> on_connection) {
  on_connection_ = std::move(on_connection);
  thread_ = std::thread([this] { AcceptLoop(); });
}

void UdsListener::AcceptLoop() {
  for (;;) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_read_, POLLIN, 0}};
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      spdlog::error("accept loop: {}", Errno("poll"));
      return;
    }
    if (fds[1].revents != 0) return;
    if ((fds[0].revents & POLLIN) == 0) continue;
    int cfd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (cfd < 0) {
      if (errno == EAGAIN || errno == EINTR || errno == ECONNABORTED) continue;
      // Out of descriptors or memory (EMFILE, ENFILE, ENOBUFS, ENOMEM): the pending connection
      // stays queued and poll() would wake at once, so back off instead of spinning, and say
      // so at most once a minute.
      const absl::Time now = absl::Now();
      if (now - last_accept_warning_ > absl::Minutes(1)) {
        spdlog::warn("{}: {}; backing off 100 ms per attempt", options_.path, Errno("accept4"));
        last_accept_warning_ = now;
      }
      pollfd wake{wake_read_, POLLIN, 0};
      if (poll(&wake, 1, 100) > 0) return;  // Stop() during the back-off
      continue;
    }
    on_connection_(cfd);
  }
}

void UdsListener::Stop() {
  if (stopped_) return;
  stopped_ = true;
  if (thread_.joinable()) {
    const char byte = 1;
    (void)!write(wake_write_, &byte, 1);
    thread_.join();
  }
  close(listen_fd_);
  close(wake_read_);
  close(wake_write_);
  if (options_.inherited_fd < 0) unlink(options_.path.c_str());
}

}  // namespace fusion
