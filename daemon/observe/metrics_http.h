// MetricsHttpServer: the optional Prometheus scrape endpoint, GET /metrics over plain HTTP on a
// TCP address (cpp-httplib, Debian's libcpp-httplib-dev); with a `timeline` body also
// GET /timeline[?since=UNIX_MS]: the memory timeline as JSON lines (memory_timeline.h). Off unless metrics_listen /
// --metrics-listen names an address; fusiond never picks one itself, so nothing listens on the
// network unasked (the default "127.0.0.1:9464" in the docs is loopback).
// One worker thread (a scrape is one small GET); requests over 4 KiB or slower than 5 s are cut.
// Errors: INVALID_ARGUMENT for an address that is not HOST:PORT (HOST an IPv4 address, a name,
// or [IPv6]; PORT 0-65535, 0 = any free port), UNAVAILABLE when it cannot be bound.
// Thread-safety: Start/Stop from the controlling thread; `body` runs on the worker thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"

namespace httplib {
class Server;
}

namespace fusion {

class MetricsHttpServer {
 public:
  using Body = std::function<absl::StatusOr<std::string>()>;
  using TimelineBody = std::function<std::string(int64_t since_unix_ms)>;
  static absl::StatusOr<std::unique_ptr<MetricsHttpServer>> Start(const std::string& listen, Body body,
                                                                   TimelineBody timeline = nullptr);
  ~MetricsHttpServer();  // Stop()
  void Stop();           // idempotent; joins the thread
  int port() const { return port_; }
  const std::string& host() const { return host_; }

 private:
  MetricsHttpServer() = default;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  std::string host_;
  int port_ = 0;
};

}  // namespace fusion
