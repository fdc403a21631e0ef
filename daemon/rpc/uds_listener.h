// UdsListener: fusiond's own Unix-socket listener.
//
// It binds the socket file (mode 0660, optional group), refuses to start when another live
// daemon answers on the path, replaces a stale socket file, and runs an accept loop that hands
// each connection (non-blocking, close-on-exec: gRPC's fd transport needs non-blocking) to a
// callback - in fusiond, grpc::AddInsecureChannelFromFd - so that calls can read SO_PEERCRED.
//
// Invariant: after Stop() returns no callback runs and the socket file is removed (unless it
// was inherited: Options::inherited_fd).
// Thread-safety: Start/Stop from one controlling thread; the callback runs on the accept thread.
#pragma once

#include <sys/types.h>

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace fusion {

class UdsListener {
 public:
  struct Options {
    std::string path;        // socket file path (no "unix://")
    mode_t mode = 0660;
    std::string group;       // chown the file to this group; empty = leave as is
    int backlog = 128;
    // >= 0: a listening socket inherited from the service manager (socket activation) and
    // bound to `path`: used as is (no probe, bind, chmod or chown: the socket unit set them),
    // and Stop() leaves the socket file in place (it belongs to the socket unit).
    int inherited_fd = -1;
  };

  // Binds and listens. FAILED_PRECONDITION when a live server answers on `path` or a
  // non-socket file is there; INVALID_ARGUMENT for an unknown group or a too-long path;
  // UNAVAILABLE for other socket errors (message has the errno text).
  static absl::StatusOr<std::unique_ptr<UdsListener>> Create(const Options& options);

  ~UdsListener();  // Stop()s
  UdsListener(const UdsListener&) = delete;
  UdsListener& operator=(const UdsListener&) = delete;

  // Starts the accept thread; `on_connection` owns each fd it is given.
  void Start(std::function<void(int fd)> on_connection);
  // Stops accepting, joins the thread, closes the socket and unlinks the file. Idempotent.
  void Stop();

  const std::string& path() const { return options_.path; }

 private:
  UdsListener(Options options, int listen_fd, int wake_read, int wake_write);
  void AcceptLoop();

  const Options options_;
  int listen_fd_;
  int wake_read_, wake_write_;  // self-pipe that wakes poll() on Stop()
  std::function<void(int)> on_connection_;
  std::thread thread_;
  bool stopped_ = false;
  absl::Time last_accept_warning_ = absl::InfinitePast();  // accept thread only
};

// True when something accepts connections on the Unix socket `path` right now.
bool UnixSocketIsLive(const std::string& path);

// Removes the socket file at `path` when nothing answers on it (a crash's leftover) and returns
// true; leaves anything else. fusiond calls it first thing, so that a client waiting for the
// socket to appear (or to answer) waits for this daemon, not for a dead one's file.
bool RemoveStaleSocket(const std::string& path);

}  // namespace fusion
