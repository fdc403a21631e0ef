// fusiond: parse the configuration, serve until SIGTERM/SIGINT, drain, exit 0.
#include <signal.h>

#include <cstdio>

#include <systemd/sd-daemon.h>

#include "common/logging.h"
#include "config/config.h"
#include "rpc/server.h"
#include "spdlog/spdlog.h"

int main(int argc, char** argv) {
  auto config = fusion::ParseDaemonCommandLine(argc, argv);
  if (!config.ok()) {
    if (absl::IsCancelled(config.status())) {  // --help
      std::fputs(std::string(config.status().message()).c_str(), stdout);
      return 0;
    }
    std::fprintf(stderr, "fusiond: %s\n", std::string(config.status().message()).c_str());
    return 2;
  }
  fusion::InitLogging(config->log_level);

  // Block the stop signals in every thread (gRPC's included) and wait for them here.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  auto server = fusion::DaemonServer::Create(*config);
  if (!server.ok()) {
    spdlog::critical("cannot start: {}", server.status().ToString());
    return 1;
  }
  sd_notify(0, "READY=1");

  int signo = 0;
  for (;;) {
    sigwait(&stop_signals, &signo);
    if (signo != SIGHUP) break;
    // systemd's `reload` and closing terminals send SIGHUP: keep serving.
    spdlog::warn("SIGHUP: configuration reload is not supported; restart fusiond to apply changes");
  }
  spdlog::info("received {}, draining (up to {} ms)", signo == SIGTERM ? "SIGTERM" : "SIGINT",
               config->drain_ms);
  sd_notify(0, "STOPPING=1");
  (*server)->Shutdown(absl::Milliseconds(config->drain_ms));
  server->reset();
  spdlog::info("stopped");
  return 0;
}
