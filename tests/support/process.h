// Child processes for tests that drive the real binaries. Test-only.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace fusion::testing {

struct RunResult {
  int exit_code = -1;   // exit status, or 128 + signal when killed by a signal
  std::string out;      // stdout
  std::string err;      // stderr
  absl::Duration elapsed;
  bool timed_out = false;
};

// A started child whose stdout/stderr go to files in `log_dir`.
class Process {
 public:
  // Starts argv[0] (a path) with argv. When uid >= 0 the child drops to uid and to gid (the
  // gid equal to uid when gid < 0), with no supplementary groups, before exec (needs root).
  // Extra environment entries "K=V" are added to the inherited environment.
  Process(std::vector<std::string> argv, const std::string& log_dir, int uid = -1,
          std::vector<std::string> env = {}, int gid = -1);
  ~Process();  // SIGKILLs a child still running
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  pid_t pid() const { return pid_; }
  bool Running();
  void Signal(int signo);
  // Waits up to `timeout`; on time-out kills the child and sets timed_out.
  RunResult Wait(absl::Duration timeout);

 private:
  pid_t pid_ = -1;
  bool reaped_ = false;
  int status_ = 0;
  std::string out_path_, err_path_;
  absl::Time start_;
};

// Runs to completion (or `timeout`).
RunResult RunProcess(std::vector<std::string> argv, const std::string& log_dir,
              absl::Duration timeout = absl::Seconds(30), int uid = -1,
              std::vector<std::string> env = {}, int gid = -1);

// Polls `predicate` every 10 ms until it holds or `timeout` passes.
template <typename F>
bool WaitFor(F predicate, absl::Duration timeout) {
  const absl::Time end = absl::Now() + timeout;
  while (absl::Now() < end) {
    if (predicate()) return true;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return predicate();
}

}  // namespace fusion::testing
