// fusiond: parse the configuration, serve until SIGTERM/SIGINT, drain, exit 0.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include <grpc/grpc.h>
#include <systemd/sd-daemon.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/logging.h"
#include "config/config.h"
#include "daemon.h"
#include "device/device.h"
#include "jobs/backend.h"
#include "jobs/state_dir.h"
#include "memory/residency_manager.h"
#include "rpc/uds_listener.h"
#include "systemd/service_notifier.h"
#include "spdlog/spdlog.h"
#include "base/status_macros.h"

// jemalloc's options (fusiond links it; daemon/common/heap_release.h has the measurements):
// a background thread returns freed pages, dirty ones after 1 s, muzzy ones at once, so the
// daemon's RSS falls back after a large job. MALLOC_CONF in the environment overrides them.
extern "C" {
__attribute__((used)) const char* malloc_conf = "background_thread:true,dirty_decay_ms:1000,muzzy_decay_ms:0";
}

namespace {

// SIGHUP: the command line and --config read again. The keys in fusion::LiveReloadKeys() are
// applied; changes to the others are named as needing a restart; a file that does not parse
// leaves everything as it runs. systemd hears RELOADING=1 ... READY=1 around it.
void ReloadConfiguration(int argc, char** argv, fusion::DaemonConfig& running, fusion::Daemon& daemon) {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  sd_notifyf(0, "RELOADING=1\nMONOTONIC_USEC=%llu",
             static_cast<unsigned long long>(now.tv_sec) * 1000000ull + now.tv_nsec / 1000);
  auto next = fusion::ParseDaemonCommandLine(argc, argv);
  if (!next.ok()) {
    spdlog::error("SIGHUP: configuration not reloaded, the running one stays: {}", std::string(next.status().message()));
  } else {
    const std::vector<std::string> changed = fusion::ChangedKeys(running, *next);
    const auto& live = fusion::LiveReloadKeys();
    std::vector<std::string> applied, restart;
    for (const std::string& key : changed) {
      (std::find(live.begin(), live.end(), key) != live.end() ? applied : restart).push_back(key);
    }
    if (std::find(applied.begin(), applied.end(), "log_level") != applied.end()) {
      fusion::SetLogLevel(next->log_level);
      running.log_level = next->log_level;
    }
    if (std::find(applied.begin(), applied.end(), "keep_alive") != applied.end()) {
      daemon.residency()->SetKeepAlive(fusion::KeepAlive(*next));
      running.keep_alive_ms = next->keep_alive_ms;
    }
    if (changed.empty()) {
      spdlog::info("SIGHUP: configuration reloaded, nothing changed");
    } else {
      spdlog::warn("SIGHUP: configuration reloaded; applied: {}; not applied, need a restart: {}",
                   applied.empty() ? "none" : absl::StrJoin(applied, ", "),
                   restart.empty() ? "none" : absl::StrJoin(restart, ", "));
    }
  }
  sd_notify(0, "READY=1");
}

// OK when `spec` (cpu or cuda:N) can run this build's stages: a CUDA device needs a CUDA build
// (a CUDA LibTorch), the driver and that device.
absl::Status DeviceUsable(const std::string& spec) {
  RETURN_IF_ERROR(fusion::jobs::BackendSupportsDevice(spec));
  return fusion::OpenDevice(spec).status();
}

}  // namespace

int main(int argc, char** argv) {
  // Block the stop signals in every thread and wait for them in the loop below. First thing:
  // a thread started before this (grpc_init's) would take a SIGHUP or SIGTERM with its default
  // action and end the process (seen: exit 129 from a SIGHUP sent right after READY=1).
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);
  for (int i = 1; i < argc; ++i) {
    if (std::string_view(argv[i]) == "--version") {
      // What this binary was built against, as CMake found it (daemon/CMakeLists.txt).
      std::fputs("fusiond " FUSION_VERSION "\n" FUSION_LIBTORCH_LINE "\n" FUSION_CUDA_LINE "\n", stdout);
      return 0;
    }
  }
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
  // A device that cannot serve stops fusiond here, in milliseconds, before any model or socket:
  // never a silent fall back to the CPU.
  if (absl::Status usable = DeviceUsable(config->device); !usable.ok()) {
    spdlog::critical("cannot start: {}", usable.ToString());
    return 1;
  }
  // Every file fusiond makes (journal, results, their parts) is private to its uid, whatever
  // umask it was started with; the sockets set their own modes (uds_listener.h).
  umask(077);
  // A dead daemon's socket files go now, not once the models have loaded: until this daemon
  // binds, nothing at the path looks like a daemon that serves.
  for (const std::string& path : {config->socket, config->socket + ".fd"}) {
    if (fusion::RemoveStaleSocket(path)) spdlog::info("removed stale socket file {}", path);
  }
  // Before the models load: a state directory fusiond cannot own fails now, naming the fix.
  if (absl::Status st = fusion::jobs::PrepareStateDir(config->state_dir, geteuid()); !st.ok()) {
    spdlog::critical("cannot start: {}", st.ToString());
    return 1;
  }
  // gRPC's last grpc_shutdown joins its executor threads, one of which can sit in a 10-s
  // epoll_wait: measured 10.1 s stops in 2 of 6 runs after one job. This reference is never
  // released, so the library's teardown does not run at exit; everything fusiond must flush
  // (journal, sockets, jobs) is closed by Daemon's destructor before main returns.
  grpc_init();

  // This build's backend (the LibTorch pipeline; none without LibTorch) and the daemon over it.
  auto backend = fusion::jobs::CreateBackend(*config);
  if (!backend.ok()) {
    spdlog::critical("cannot start: {}", backend.status().ToString());
    return 1;
  }
  auto server = fusion::Daemon::Create(*config, *std::move(backend));
  if (!server.ok()) {
    spdlog::critical("cannot start: {}", server.status().ToString());
    return 1;
  }
  sd_notify(0, "READY=1");
  // WATCHDOG=1 after each passing health check (when WatchdogSec= is set) and a STATUS= line.
  bool watchdog = false;
  const absl::Duration period = fusion::ServiceNotifier::PeriodFromEnvironment(absl::Seconds(5), &watchdog);
  if (watchdog) spdlog::info("systemd watchdog: health check every {} ms", absl::ToInt64Milliseconds(period));
  fusion::Daemon* served = server->get();
  auto notifier = fusion::ServiceNotifier::Start(
      {.period = period, .watchdog = watchdog, .probe = [served] { return served->HealthStatus(); }});

  int signo = 0;
  for (;;) {
    sigwait(&stop_signals, &signo);
    if (signo != SIGHUP) break;
    // systemd's `reload` (ExecReload) and closing terminals send SIGHUP: keep serving.
    ReloadConfiguration(argc, argv, *config, **server);
  }
  spdlog::info("received {}, draining (up to {} ms)", signo == SIGTERM ? "SIGTERM" : "SIGINT",
               config->drain_ms);
  sd_notify(0, "STOPPING=1");
  // The drain may outlast the unit's stop timeout: ask for the drain's length on top of it.
  sd_notifyf(0, "EXTEND_TIMEOUT_USEC=%llu", static_cast<unsigned long long>(config->drain_ms + 5000) * 1000);
  notifier->Stop();
  (*server)->Shutdown(absl::Milliseconds(config->drain_ms));
  server->reset();
  spdlog::info("stopped");
  return 0;
}
