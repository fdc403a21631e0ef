#include "process.h"

#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "absl/strings/str_cat.h"

extern char** environ;

namespace fusion::testing {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

Process::Process(std::vector<std::string> argv, const std::string& log_dir, int uid,
                 std::vector<std::string> env, int gid) {
  static std::atomic<int> counter{0};
  const int n = counter++;
  out_path_ = absl::StrCat(log_dir, "/proc", getpid(), "_", n, ".out");
  err_path_ = absl::StrCat(log_dir, "/proc", getpid(), "_", n, ".err");
  std::vector<std::string> envs;
  for (char** e = environ; *e != nullptr; ++e) envs.emplace_back(*e);
  for (auto& e : env) envs.push_back(std::move(e));
  std::vector<char*> cargv, cenv;
  for (auto& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  for (auto& e : envs) cenv.push_back(e.data());
  cenv.push_back(nullptr);
  start_ = absl::Now();
  pid_ = fork();
  if (pid_ < 0) throw std::runtime_error("fork failed");
  if (pid_ == 0) {  // child: only async-signal-safe calls until exec
    int out = open(out_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int err = open(err_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int in = open("/dev/null", O_RDONLY);
    dup2(in, 0);
    dup2(out, 1);
    dup2(err, 2);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    if (uid >= 0) {
      if (setgroups(0, nullptr) != 0 || setgid(static_cast<gid_t>(gid >= 0 ? gid : uid)) != 0 ||
          setuid(static_cast<uid_t>(uid)) != 0) {
        _exit(126);
      }
    }
    execve(cargv[0], cargv.data(), cenv.data());
    _exit(127);
  }
}

Process::~Process() {
  if (!reaped_ && pid_ > 0) {
    kill(pid_, SIGKILL);
    waitpid(pid_, &status_, 0);
  }
}

bool Process::Running() {
  if (reaped_) return false;
  pid_t r = waitpid(pid_, &status_, WNOHANG);
  if (r == pid_) reaped_ = true;
  return !reaped_;
}

void Process::Signal(int signo) {
  if (!reaped_) kill(pid_, signo);
}

RunResult Process::Wait(absl::Duration timeout) {
  RunResult result;
  if (!WaitFor([this] { return !Running(); }, timeout)) {
    result.timed_out = true;
    kill(pid_, SIGKILL);
    waitpid(pid_, &status_, 0);
    reaped_ = true;
  }
  result.elapsed = absl::Now() - start_;
  result.exit_code = WIFEXITED(status_) ? WEXITSTATUS(status_) : 128 + WTERMSIG(status_);
  result.out = ReadFile(out_path_);
  result.err = ReadFile(err_path_);
  return result;
}

RunResult RunProcess(std::vector<std::string> argv, const std::string& log_dir, absl::Duration timeout,
              int uid, std::vector<std::string> env, int gid) {
  Process p(std::move(argv), log_dir, uid, std::move(env), gid);
  return p.Wait(timeout);
}

}  // namespace fusion::testing
