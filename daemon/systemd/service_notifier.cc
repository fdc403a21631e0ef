#include "systemd/service_notifier.h"

#include <systemd/sd-daemon.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "spdlog/spdlog.h"

namespace fusion {

absl::Duration ServiceNotifier::PeriodFromEnvironment(absl::Duration fallback, bool* enabled) {
  uint64_t usec = 0;
  *enabled = sd_watchdog_enabled(/*unset_environment=*/0, &usec) > 0 && usec > 0;
  return *enabled ? absl::Microseconds(usec / 2) : fallback;
}

std::unique_ptr<ServiceNotifier> ServiceNotifier::Start(Options options) {
  if (!options.notify) options.notify = [](const std::string& text) { sd_notify(0, text.c_str()); };
  std::unique_ptr<ServiceNotifier> self(new ServiceNotifier(std::move(options)));
  self->thread_ = std::thread([n = self.get()] { n->Loop(); });
  return self;
}

ServiceNotifier::~ServiceNotifier() { Stop(); }

void ServiceNotifier::Stop() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
    wake_.SignalAll();
  }
  if (thread_.joinable()) thread_.join();
}

void ServiceNotifier::Loop() {
  bool was_healthy = true;
  for (;;) {
    absl::StatusOr<std::string> health = options_.probe ? options_.probe() : absl::StatusOr<std::string>("");
    {
      MutexLock lock(&mu_);
      if (stop_) return;
    }
    if (health.ok()) {
      // STATUS= is one line: the service manager shows it in `systemctl status`.
      std::string text = absl::StrCat("STATUS=", absl::StrReplaceAll(*health, {{"\n", " "}}));
      if (options_.watchdog) text = absl::StrCat("WATCHDOG=1\n", text);
      options_.notify(text);
      if (!was_healthy) spdlog::info("health check passes again; watchdog pings resume");
      was_healthy = true;
    } else {
      options_.notify(absl::StrCat("STATUS=unhealthy: ", absl::StrReplaceAll(health.status().message(), {{"\n", " "}})));
      if (was_healthy) {
        spdlog::error("health check failed: {}{}", std::string(health.status().message()),
                      options_.watchdog ? "; no watchdog ping until it passes" : "");
      }
      was_healthy = false;
    }
    MutexLock lock(&mu_);
    const absl::Time until = absl::Now() + options_.period;
    while (!stop_ && absl::Now() < until) wake_.WaitWithDeadline(&mu_, until);
    if (stop_) return;
  }
}

}  // namespace fusion
