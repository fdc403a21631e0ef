#include "observe/metrics_http.h"

#include <cerrno>

#include <httplib.h>

#include "config/config.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"
#include "base/status_macros.h"

namespace fusion {

absl::StatusOr<std::unique_ptr<MetricsHttpServer>> MetricsHttpServer::Start(const std::string& listen, Body body,
                                                                              TimelineBody timeline) {
  ASSIGN_OR_RETURN(auto address, ParseListenAddress(listen));
  std::unique_ptr<MetricsHttpServer> self(new MetricsHttpServer());
  self->server_ = std::make_unique<httplib::Server>();
  httplib::Server& s = *self->server_;
  s.new_task_queue = [] { return new httplib::ThreadPool(1); };
  s.set_payload_max_length(4096);
  s.set_read_timeout(5, 0);
  s.set_write_timeout(5, 0);
  s.set_keep_alive_max_count(1);
  s.Get("/metrics", [body](const httplib::Request&, httplib::Response& res) {
    absl::StatusOr<std::string> text = body();
    if (!text.ok()) {
      res.status = 503;
      res.set_content(absl::StrCat("fusiond: ", text.status().message(), "\n"), "text/plain; charset=utf-8");
      return;
    }
    res.set_content(*std::move(text), "text/plain; version=0.0.4; charset=utf-8");
  });
  if (timeline) {
    s.Get("/timeline", [timeline](const httplib::Request& req, httplib::Response& res) {
      int64_t since = 0;
      if (req.has_param("since") && !absl::SimpleAtoi(req.get_param_value("since"), &since)) {
        res.status = 400;
        res.set_content("fusiond: /timeline: since must be a unix time in ms\n", "text/plain; charset=utf-8");
        return;
      }
      res.set_content(timeline(since), "application/x-ndjson");
    });
  }
  const auto& [host, port] = address;
  self->host_ = host;
  self->port_ = port == 0 ? s.bind_to_any_port(host) : (s.bind_to_port(host, port) ? port : -1);
  if (self->port_ <= 0) {
    const int err = errno;
    // Under fusiond.service (RestrictAddressFamilies=AF_UNIX) the socket itself is refused.
    const char* hint = err == EAFNOSUPPORT || err == EPERM || err == EACCES
                           ? "; under systemd, install the drop-in /usr/share/doc/fusiond/examples/metrics.conf"
                           : "";
    return absl::UnavailableError(absl::StrCat("metrics_listen '", listen, "': cannot listen there (",
                                               std::strerror(err), ")", hint));
  }
  self->thread_ = std::thread([srv = self->server_.get()] { srv->listen_after_bind(); });
  return self;
}

MetricsHttpServer::~MetricsHttpServer() { Stop(); }

void MetricsHttpServer::Stop() {
  if (server_ == nullptr) return;
  server_->stop();
  if (thread_.joinable()) thread_.join();
  server_.reset();
}

}  // namespace fusion
