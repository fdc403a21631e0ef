// The service manager's end of sd_notify(3) for tests: a datagram socket at a path that a
// child gets as NOTIFY_SOCKET, and the messages it sent ("READY=1", "WATCHDOG=1\nSTATUS=...").
// Thread-safety: one thread.
#pragma once

#include <string>
#include <vector>

#include "absl/time/time.h"

namespace fusion::testing {

class NotifySocket {
 public:
  explicit NotifySocket(std::string path);  // binds; ok() says whether it did
  ~NotifySocket();
  NotifySocket(const NotifySocket&) = delete;
  NotifySocket& operator=(const NotifySocket&) = delete;

  bool ok() const { return fd_ >= 0; }
  const std::string& path() const { return path_; }
  // "NOTIFY_SOCKET=<path>", for the child's environment.
  std::string Env() const { return "NOTIFY_SOCKET=" + path_; }
  // The messages received within `wait` (returns early once `until` is in one of them, if set).
  std::vector<std::string> Receive(absl::Duration wait, const std::string& until = "");

 private:
  std::string path_;
  int fd_ = -1;
};

}  // namespace fusion::testing
