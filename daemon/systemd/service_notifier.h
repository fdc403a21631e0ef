// ServiceNotifier: fusiond's side of systemd's service protocol after READY=1 (sd_notify(3)).
//
// Every `period` it runs the health probe on its own thread and, when the probe says healthy,
// sends WATCHDOG=1 (if the service manager asked for a watchdog: WATCHDOG_USEC) with a STATUS=
// line of what fusiond does ("2 jobs queued, 1 running; device cpu 412 MiB of 6 GiB"). A probe
// that reports a problem sends STATUS= with it and no WATCHDOG=1; a probe that blocks (a
// deadlocked job manager, a device call that does not return) sends nothing: either way the
// service manager's watchdog ends the process after WatchdogSec= without a ping, instead of a
// timer thread pinging for a daemon that no longer serves.
// In fusiond the probe is JobManager::CheckProgress (a running job with no stage event or
// checkpoint for watchdog_stall_ms) followed by a memory-state snapshot (the device's query).
// Thread-safety: Start/Stop from the controlling thread; the probe and `notify` run on the
// notifier's thread.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/mutex.h"

namespace fusion {

class ServiceNotifier {
 public:
  struct Options {
    absl::Duration period = absl::Seconds(5);
    bool watchdog = false;  // send WATCHDOG=1 after each healthy probe
    // OK: the STATUS= text; an error: unhealthy, its message goes to STATUS=.
    std::function<absl::StatusOr<std::string>()> probe;
    // Sends one notification ("WATCHDOG=1\nSTATUS=..."); default sd_notify(0, text).
    std::function<void(const std::string&)> notify;
  };

  // The period for a service manager's watchdog (sd_watchdog_enabled: WATCHDOG_USEC and
  // WATCHDOG_PID): half its timeout, and `*enabled`; else `fallback` and false.
  static absl::Duration PeriodFromEnvironment(absl::Duration fallback, bool* enabled);

  static std::unique_ptr<ServiceNotifier> Start(Options options);
  ~ServiceNotifier();  // Stop()
  // Ends the loop and joins its thread (waits for a probe in progress). Idempotent.
  void Stop();

 private:
  explicit ServiceNotifier(Options options) : options_(std::move(options)) {}
  void Loop();

  const Options options_;
  Mutex mu_;
  CondVar wake_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace fusion
