// Drives the real fusiond and fusionctl binaries as processes.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>
#include <nlohmann/json.hpp>

#include <sys/socket.h>
#include <sys/un.h>

#include "absl/strings/str_join.h"
#include "notify_socket.h"
#include "process.h"
#include "temp_dir.h"

namespace fusion {
namespace {

using testing::Process;
using testing::RunProcess;
using testing::RunResult;
using testing::WaitFor;

constexpr uid_t kNobody = 65534;

bool Exists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

class DaemonProcessTest : public ::testing::Test {
 protected:
  std::unique_ptr<Process> StartDaemon(std::vector<std::string> extra) {
    std::vector<std::string> argv = {FUSIOND_BIN, "--socket", socket_, "--device", "cpu"};
    // A state directory of the test's own unless it names one: the default /var/lib/fusiond is
    // locked by whichever test daemon holds it (one fusiond per state directory), and ctest -j2
    // ran two of these at once (a second daemon exited at start: a flaky failure).
    if (std::find(extra.begin(), extra.end(), "--state-dir") == extra.end()) {
      argv.insert(argv.end(), {"--state-dir", dir_.File("state")});
    }
    argv.insert(argv.end(), extra.begin(), extra.end());
    auto p = std::make_unique<Process>(argv, dir_.path());
    // Ready when both sockets exist: the companion memfd socket (".fd") is bound after the main one.
    EXPECT_TRUE(WaitFor([&] { return (Exists(socket_) && Exists(socket_ + ".fd")) || !p->Running(); }, absl::Seconds(20)));
    return p;
  }
  RunResult Ctl(std::vector<std::string> args, int uid = -1) {
    args.insert(args.begin(), {FUSIONCTL_BIN, "--socket", socket_});
    return RunProcess(args, dir_.path(), absl::Seconds(30), uid);
  }

  testing::TempDir dir_;
  const std::string socket_ = dir_.File("f.sock");
};

// Found by a new-user trial: a second fusiond on another socket but the same --state-dir
// requeued the first one's running job and ran it too. Now it is refused at start, naming the
// directory and the first daemon's pid; once the first has stopped, the directory is free.
TEST_F(DaemonProcessTest, ASecondDaemonOnTheSameStateDirIsRefused) {
  const std::vector<std::string> flags = {"--device-memory-limit", "256MiB", "--models-dir", dir_.File("no-models"),
                                          "--state-dir", dir_.File("state")};
  auto first = StartDaemon(flags);
  ASSERT_TRUE(first->Running());
  std::vector<std::string> argv = {FUSIOND_BIN, "--socket", dir_.File("g.sock"), "--device", "cpu"};
  argv.insert(argv.end(), flags.begin(), flags.end());
  RunResult second = RunProcess(argv, dir_.path(), absl::Seconds(20));
  EXPECT_EQ(second.exit_code, 1);
  EXPECT_NE(second.err.find("state_dir '" + dir_.File("state") + "' is in use by another fusiond (pid " +
                            std::to_string(first->pid()) + ")"),
            std::string::npos)
      << second.err;
  EXPECT_EQ(Ctl({"health"}).exit_code, 0);
  first->Signal(SIGTERM);
  EXPECT_EQ(first->Wait(absl::Seconds(15)).exit_code, 0);
  auto third = StartDaemon(flags);
  EXPECT_TRUE(third->Running());
  EXPECT_EQ(Ctl({"health"}).exit_code, 0);
  third->Signal(SIGTERM);
  EXPECT_EQ(third->Wait(absl::Seconds(15)).exit_code, 0);
}

TEST_F(DaemonProcessTest, ServesMemJsonWithBudgetAndStopsCleanlyOnSigterm) {
  auto daemon = StartDaemon({"--device-memory-limit", "256MiB", "--models-dir", dir_.File("no-models")});
  ASSERT_TRUE(daemon->Running());

  EXPECT_TRUE(Exists(socket_ + ".fd"));  // the companion memfd socket
  RunResult health = Ctl({"health"});
  EXPECT_EQ(health.exit_code, 0) << health.err;
  EXPECT_NE(health.out.find("SERVING"), std::string::npos);

  RunResult mem = Ctl({"mem", "--json"});
  ASSERT_EQ(mem.exit_code, 0) << mem.err;
  nlohmann::json j = nlohmann::json::parse(mem.out);
  EXPECT_EQ(j["device"]["kind"], "cpu");
  ASSERT_TRUE(j["device"]["budget_bytes"].is_number_unsigned());  // a number, not a string
  EXPECT_EQ(j["device"]["budget_bytes"].get<uint64_t>(), 268435456u);
  EXPECT_TRUE(j["host"]["capacity_bytes"].is_number());
  EXPECT_TRUE(j["models"].is_array());

  // The pipeline is built in: an unknown job is NOT_FOUND (never UNIMPLEMENTED).
  RunResult job = Ctl({"job", "j-0000000000000000"});
  EXPECT_EQ(job.exit_code, 1);
  EXPECT_NE(job.err.find("NOT_FOUND"), std::string::npos) << job.err;
  RunResult no_out = Ctl({"swap", "--source", "a.png", "--target", "b.png"});
  EXPECT_EQ(no_out.exit_code, 2);
  EXPECT_NE(no_out.err.find("-o OUT is required"), std::string::npos) << no_out.err;
  RunResult no_wait_out = Ctl({"swap", "--source", "a.png", "--target", "b.png", "-o", "c.png", "--no-wait"});
  EXPECT_EQ(no_wait_out.exit_code, 2);
  EXPECT_NE(no_wait_out.err.find("fusionctl result JOB_ID -o OUT"), std::string::npos) << no_wait_out.err;

  RunResult text = Ctl({"mem"});
  EXPECT_EQ(text.exit_code, 0);
  EXPECT_NE(text.out.find("device (cpu): budget 256.0 MiB"), std::string::npos) << text.out;

  // A second daemon on the same socket is refused, the first keeps serving.
  RunResult second = RunProcess({FUSIOND_BIN, "--socket", socket_, "--state-dir", dir_.File("state2")}, dir_.path(),
                                absl::Seconds(20));
  EXPECT_EQ(second.exit_code, 1);
  EXPECT_NE(second.err.find("another fusiond is serving"), std::string::npos) << second.err;
  EXPECT_EQ(Ctl({"health"}).exit_code, 0);

  // SIGHUP (systemd reload, a closed terminal) does not stop it.
  daemon->Signal(SIGHUP);
  absl::SleepFor(absl::Milliseconds(100));
  EXPECT_TRUE(daemon->Running());
  EXPECT_EQ(Ctl({"health"}).exit_code, 0);

  daemon->Signal(SIGTERM);
  RunResult stopped = daemon->Wait(absl::Seconds(15));
  EXPECT_FALSE(stopped.timed_out);
  EXPECT_EQ(stopped.exit_code, 0) << stopped.err;
  EXPECT_FALSE(Exists(socket_));
  EXPECT_FALSE(Exists(socket_ + ".fd"));
  // Started without fetched weights: said once at start-up, with the command that fetches them.
  EXPECT_NE(stopped.err.find("models are missing in " + dir_.File("no-models")), std::string::npos) << stopped.err;
  EXPECT_NE(stopped.err.find("fusiond-fetch-models --models-dir " + dir_.File("no-models")), std::string::npos);
  EXPECT_NE(stopped.err.find("scripts/fetch-models.sh " + dir_.File("no-models")), std::string::npos);
}

TEST_F(DaemonProcessTest, FusionctlWithoutDaemonExits2Within2Seconds) {
  RunResult r = RunProcess({FUSIONCTL_BIN, "--socket", dir_.File("none.sock"), "health"}, dir_.path());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_LT(r.elapsed, absl::Seconds(2));
  EXPECT_NE(r.err.find("cannot reach fusiond at unix://" + dir_.File("none.sock") + ": "),
            std::string::npos)
      << r.err;
  // FUSIOND_SOCKET is honoured when --socket is absent.
  Process p({FUSIONCTL_BIN, "mem"}, dir_.path(), -1, {"FUSIOND_SOCKET=" + dir_.File("env.sock")});
  RunResult e = p.Wait(absl::Seconds(10));
  EXPECT_EQ(e.exit_code, 2);
  EXPECT_NE(e.err.find(dir_.File("env.sock")), std::string::npos) << e.err;
}

TEST_F(DaemonProcessTest, StaleSocketFileIsReplaced) {
  auto first = StartDaemon({});
  first->Signal(SIGKILL);  // leaves the socket file behind
  first->Wait(absl::Seconds(10));
  ASSERT_TRUE(Exists(socket_));
  auto second = StartDaemon({});
  ASSERT_TRUE(WaitFor([&] { return Ctl({"health"}).exit_code == 0; }, absl::Seconds(10)));
  EXPECT_TRUE(second->Running());
  // Removed first thing, before the budgets are set up (a stale file left until the models have
  // loaded would end a wait for the socket file at once, and the next call would fail).
  second->Signal(SIGTERM);
  const RunResult stopped = second->Wait(absl::Seconds(15));
  const size_t removed = stopped.err.find("removed stale socket file " + socket_);
  ASSERT_NE(removed, std::string::npos) << stopped.err;
  EXPECT_LT(removed, stopped.err.find("host memory limit")) << stopped.err;
}

TEST_F(DaemonProcessTest, BadFlagsAndConfigExit2NamingTheKey) {
  RunResult bad_size = RunProcess({FUSIOND_BIN, "--socket", socket_, "--device-memory-limit", "12XB"},
                           dir_.path());
  EXPECT_EQ(bad_size.exit_code, 2);
  EXPECT_NE(bad_size.err.find("--device-memory-limit: invalid size '12XB'"), std::string::npos)
      << bad_size.err;

  const std::string toml = dir_.File("bad.toml");
  std::ofstream(toml) << "devise = \"cpu\"\n";
  RunResult bad_key = RunProcess({FUSIOND_BIN, "--config", toml}, dir_.path());
  EXPECT_EQ(bad_key.exit_code, 2);
  EXPECT_NE(bad_key.err.find("key 'devise': unknown key"), std::string::npos) << bad_key.err;

  RunResult no_gpu = RunProcess({FUSIOND_BIN, "--socket", socket_, "--device", "cuda:7"}, dir_.path());
  EXPECT_EQ(no_gpu.exit_code, 1);
  EXPECT_NE(no_gpu.err.find("cuda:7"), std::string::npos) << no_gpu.err;
  EXPECT_FALSE(Exists(socket_));

  for (const char* t : {"0", "-5", "9223372036854775807"}) {
    RunResult timeout = Ctl({"--timeout-ms", t, "health"});
    EXPECT_EQ(timeout.exit_code, 2) << t;
    EXPECT_NE(timeout.err.find("--timeout-ms"), std::string::npos) << timeout.err;
  }
  RunResult usage = Ctl({"frobnicate"});
  EXPECT_EQ(usage.exit_code, 2);
  RunResult help = RunProcess({FUSIONCTL_BIN, "--help"}, dir_.path());
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("2  fusiond unreachable"), std::string::npos) << help.out;
  // `fusionctl help` prints the same help (not "A subcommand is required").
  RunResult help_word = RunProcess({FUSIONCTL_BIN, "help"}, dir_.path());
  EXPECT_EQ(help_word.exit_code, 0) << help_word.err;
  EXPECT_EQ(help_word.out, help.out);
  RunResult help_swap = RunProcess({FUSIONCTL_BIN, "help", "swap"}, dir_.path());
  EXPECT_EQ(help_swap.exit_code, 0);
  EXPECT_NE(help_swap.out.find("--no-wait"), std::string::npos) << help_swap.out;
  EXPECT_EQ(RunProcess({FUSIONCTL_BIN, "help", "frobnicate"}, dir_.path()).exit_code, 2);
  // -o x.mp4 with an image target wrote PNG bytes into x.mp4 and exited 0: a usage error now.
  // A PNG by its signature (the rest is not read: the usage error comes first).
  std::ofstream(dir_.File("a.png")) << std::string("\x89PNG\r\n\x1a\n", 8) << "not read";
  RunResult mp4 = Ctl({"swap", "--source", dir_.File("a.png"), "--target", dir_.File("a.png"), "-o", dir_.File("x.mp4")});
  EXPECT_EQ(mp4.exit_code, 2);
  EXPECT_NE(mp4.err.find("the target is an image, so the result is PNG or JPEG: name it .png, .jpg or .jpeg"),
            std::string::npos)
      << mp4.err;
  EXPECT_FALSE(Exists(dir_.File("x.mp4")));
  // The video tracking flags: values checked by CLI11, video targets only, and no keyframe
  // interval without tracking. An MP4 by its 'ftyp' box (nothing is submitted).
  EXPECT_NE(help_swap.out.find("--video-detect"), std::string::npos) << help_swap.out;
  EXPECT_NE(help_swap.out.find("--keyframe-interval"), std::string::npos) << help_swap.out;
  std::ofstream(dir_.File("v.mp4")) << std::string("\0\0\0\x18" "ftypisom", 12) << "not read";
  const std::vector<std::string> video_swap = {"swap", "--source", dir_.File("a.png"), "--target", dir_.File("v.mp4"),
                                               "-o", dir_.File("out.mp4")};
  auto with = [&](std::vector<std::string> args, std::initializer_list<std::string> more) {
    args.insert(args.end(), more);
    return Ctl(args);
  };
  for (const auto& [flag, value] : {std::pair{"--video-detect", "sometimes"}, std::pair{"--keyframe-interval", "0"},
                                    std::pair{"--keyframe-interval", "301"}, std::pair{"--keyframe-interval", "x"}}) {
    const RunResult bad = with(video_swap, {flag, value});
    EXPECT_EQ(bad.exit_code, 2) << flag << " " << value;
    EXPECT_NE(bad.err.find(flag), std::string::npos) << bad.err;
  }
  const RunResult every = with(video_swap, {"--video-detect", "every-frame", "--keyframe-interval", "5"});
  EXPECT_EQ(every.exit_code, 2);
  EXPECT_NE(every.err.find("--keyframe-interval applies to --video-detect track only"), std::string::npos)
      << every.err;
  const RunResult image = Ctl({"swap", "--source", dir_.File("a.png"), "--target", dir_.File("a.png"), "-o",
                               dir_.File("x.png"), "--video-detect", "track"});
  EXPECT_EQ(image.exit_code, 2);
  EXPECT_NE(image.err.find("--keyframe-interval apply to video targets only"), std::string::npos) << image.err;
  EXPECT_FALSE(Exists(dir_.File("out.mp4")));
  EXPECT_FALSE(Exists(dir_.File("x.png")));
}

// Started as the README shows (umask 022), nothing under the state directory is readable by
// group or others (else any local user could copy everyone's images out of it), and a second
// uid's read of the journal fails.
TEST_F(DaemonProcessTest, StateIsPrivateUnderUmask022) {
  const mode_t old_umask = umask(022);
  auto daemon = StartDaemon({"--models-dir", dir_.File("no-models")});
  umask(old_umask);
  ASSERT_TRUE(daemon->Running());
  ASSERT_EQ(Ctl({"health"}).exit_code, 0);
  const std::string state = dir_.File("state");
  std::vector<std::string> entries = {state};
  for (const auto& e : std::filesystem::recursive_directory_iterator(state)) entries.push_back(e.path().string());
  EXPECT_GE(entries.size(), 4u);  // the directory, lock, journal.sqlite3 and its -wal at least
  for (const std::string& path : entries) {
    struct stat st;
    ASSERT_EQ(lstat(path.c_str(), &st), 0) << path;
    EXPECT_EQ(st.st_mode & 077, 0u) << path << " is " << std::oct << (st.st_mode & 07777);
  }
  if (geteuid() != 0) GTEST_SKIP() << "needs root to read as another uid";
  RunResult read = RunProcess({"/bin/cat", state + "/journal.sqlite3"}, dir_.path(), absl::Seconds(10), kNobody);
  EXPECT_NE(read.exit_code, 0);
  EXPECT_NE(read.err.find("Permission denied"), std::string::npos) << read.err;
  daemon->Signal(SIGTERM);
  EXPECT_EQ(daemon->Wait(absl::Seconds(15)).exit_code, 0);
}

// Runs fusionctl as uid 65534 (needs root, as in CI): the socket's group admits it, and the
// daemon's allow-list decides with the uid read from SO_PEERCRED.
TEST_F(DaemonProcessTest, OtherUidIsRefusedUnlessAllowed) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to run a client as another uid";
  const std::string toml = dir_.File("allow.toml");
  std::ofstream(toml) << "socket_group = \"nogroup\"\nallowed_uids = [4242]\n";
  auto daemon = StartDaemon({"--config", toml});
  ASSERT_TRUE(daemon->Running());
  struct stat st;
  ASSERT_EQ(stat(socket_.c_str(), &st), 0);
  EXPECT_EQ(st.st_gid, kNobody);  // nogroup
  RunResult refused = Ctl({"mem"}, kNobody);
  EXPECT_EQ(refused.exit_code, 1) << refused.err;
  EXPECT_NE(refused.err.find("PERMISSION_DENIED: uid 65534 is not allowed"), std::string::npos)
      << refused.err;
  EXPECT_EQ(Ctl({"mem"}).exit_code, 0);  // the daemon's own uid
  daemon->Signal(SIGTERM);
  daemon->Wait(absl::Seconds(15));

  std::ofstream(toml) << "socket_group = \"nogroup\"\nallowed_uids = [65534]\n";
  auto allowed_daemon = StartDaemon({"--config", toml});
  RunResult allowed = Ctl({"mem", "--json"}, kNobody);
  EXPECT_EQ(allowed.exit_code, 0) << allowed.err;
}

// An ordinary member of the socket's group (fusionctl as uid 65534) reads the models but may
// not move them: exit 1 with the daemon's PERMISSION_DENIED naming the method, also for a name
// that is not in the catalogue (the check comes before NOT_FOUND). The daemon's uid gets NOT_FOUND.
TEST_F(DaemonProcessTest, AnOrdinaryMemberCannotMoveModelsButListsThem) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to run a client as another uid";
  const std::string toml = dir_.File("group.toml");
  std::ofstream(toml) << "socket_group = \"nogroup\"\n";
  auto daemon = StartDaemon({"--config", toml, "--models-dir", dir_.File("no-models")});
  ASSERT_TRUE(daemon->Running());
  RunResult models = Ctl({"models", "--json"}, kNobody);
  EXPECT_EQ(models.exit_code, 0) << models.err;
  for (const char* name : {"face_recognition", "no-such-model"}) {
    RunResult pin = Ctl({"pin", name}, kNobody);
    EXPECT_EQ(pin.exit_code, 1) << pin.err;
    EXPECT_NE(pin.err.find("fusionctl: PERMISSION_DENIED: PinModel: uid 65534 may not change model residency"),
              std::string::npos) << pin.err;
    RunResult unpin = Ctl({"unpin", name}, kNobody);
    EXPECT_NE(unpin.err.find("PERMISSION_DENIED: UnpinModel: uid 65534"), std::string::npos) << unpin.err;
  }
  RunResult own = Ctl({"unpin", "no-such-model"});
  EXPECT_EQ(own.exit_code, 1);
  EXPECT_NE(own.err.find("NOT_FOUND"), std::string::npos) << own.err;
}

TEST_F(DaemonProcessTest, MemWatchStreamsStatesAtTheIntervalAndEndsWhenTheDaemonStops) {
  auto daemon = StartDaemon({"--device-memory-limit", "256MiB"});
  ASSERT_TRUE(daemon->Running());
  RunResult watched = Ctl({"mem", "--watch", "--interval-ms", "100", "--count", "3", "--json"});
  ASSERT_EQ(watched.exit_code, 0) << watched.err;
  std::istringstream lines(watched.out);
  std::vector<int64_t> at;
  for (std::string line; std::getline(lines, line);) {
    const nlohmann::json j = nlohmann::json::parse(line);  // one compact state per line
    EXPECT_EQ(j["device"]["budget_bytes"].get<uint64_t>(), 268435456u);
    at.push_back(j["unix_ms"].get<int64_t>());
  }
  ASSERT_EQ(at.size(), 3u);
  EXPECT_GE(at[1] - at[0], 99);  // the interval is a floor (ms clock)
  EXPECT_GE(at[2] - at[1], 99);
  EXPECT_EQ(Ctl({"mem", "--watch", "--interval-ms", "50"}).exit_code, 2);  // under 100 ms: usage

  // A watch left open does not hold the daemon's drain: SIGTERM ends it at its next interval.
  Process open_watch({FUSIONCTL_BIN, "--socket", socket_, "mem", "--watch", "--interval-ms", "100", "--json"},
                     dir_.path());
  absl::SleepFor(absl::Milliseconds(300));
  ASSERT_TRUE(open_watch.Running());
  daemon->Signal(SIGTERM);
  EXPECT_EQ(daemon->Wait(absl::Seconds(15)).exit_code, 0);
  const RunResult ended = open_watch.Wait(absl::Seconds(10));
  EXPECT_FALSE(ended.timed_out);
  EXPECT_EQ(ended.exit_code, 2) << ended.err;  // UNAVAILABLE
  EXPECT_NE(ended.err.find("fusiond is stopping"), std::string::npos) << ended.err;
  EXPECT_GE(std::count(ended.out.begin(), ended.out.end(), '\n'), 2);  // it was streaming
}

// One request line on the ".fd" socket at `path` and its reply line ("" when nothing answers).
std::string FdSocketReply(const std::string& path, const std::string& line) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0 || connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    if (fd >= 0) close(fd);
    return "";
  }
  std::string reply;
  if (write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size())) {
    char c;
    while (read(fd, &c, 1) == 1 && c != '\n') reply.push_back(c);
  }
  close(fd);
  return reply;
}

// Socket activation the way systemd does it (systemd-socket-activate passes LISTEN_FDS and
// LISTEN_PID, both sockets under one name): fusiond serves the inherited sockets instead of
// --socket, gRPC on the main one and the fd protocol on the ".fd" one, and leaves their files
// (the socket unit's) in place when it stops.
TEST_F(DaemonProcessTest, ServesTheSocketsASocketUnitPassesAndLeavesTheirFiles) {
  const std::string activated = dir_.File("act.sock");
  Process daemon({"/usr/bin/systemd-socket-activate", "-l", activated, "-l", activated + ".fd", FUSIOND_BIN,
                  "--socket", socket_, "--device", "cpu", "--models-dir", dir_.File("no-models"), "--state-dir",
                  dir_.File("state")},
                 dir_.path());
  ASSERT_TRUE(WaitFor([&] { return (Exists(activated) && Exists(activated + ".fd")) || !daemon.Running(); },
                      absl::Seconds(10)));
  ASSERT_TRUE(daemon.Running());
  const RunResult health = RunProcess({FUSIONCTL_BIN, "--socket", activated, "--timeout-ms", "15000", "health"},
                                      dir_.path(), absl::Seconds(30));
  EXPECT_EQ(health.exit_code, 0) << health.err;
  EXPECT_NE(health.out.find("SERVING"), std::string::npos) << health.out;
  EXPECT_FALSE(Exists(socket_)) << "the inherited sockets replace --socket";
  // The fd protocol answers on the inherited ".fd" socket: an unknown token is NOT_FOUND (5).
  const std::string reply = FdSocketReply(activated + ".fd", "GET 0123456789abcdef0123456789abcdef\n");
  EXPECT_EQ(reply.rfind("ERR 5 ", 0), 0u) << reply;
  daemon.Signal(SIGTERM);
  const RunResult stopped = daemon.Wait(absl::Seconds(20));
  EXPECT_EQ(stopped.exit_code, 0) << stopped.err;
  EXPECT_NE(stopped.err.find("socket activation: serving on the inherited " + activated), std::string::npos)
      << stopped.err;
  EXPECT_TRUE(Exists(activated) && Exists(activated + ".fd")) << "inherited socket files are never unlinked";
}

// SIGHUP reloads --config: log_level is applied live (RELOADING=1 ... READY=1 around it), other
// changed keys are named as needing a restart, and a file that does not parse changes nothing.
TEST_F(DaemonProcessTest, SighupReloadsTheLogLevelAndNamesKeysNeedingARestart) {
  testing::NotifySocket notify(dir_.File("notify"));
  ASSERT_TRUE(notify.ok());
  const std::string toml = dir_.File("fusiond.toml");
  std::ofstream(toml) << "log_level = \"info\"\nmax_connections = 512\n";
  Process daemon({FUSIOND_BIN, "--config", toml, "--socket", socket_, "--device", "cpu", "--device-memory-limit",
                  "256MiB", "--models-dir", dir_.File("no-models"), "--state-dir", dir_.File("state")},
                 dir_.path(), -1, {notify.Env()});
  ASSERT_FALSE(notify.Receive(absl::Seconds(20), "READY=1").empty());

  std::ofstream(toml, std::ios::trunc) << "log_level = \"warn\"\nmax_connections = 100\n";
  daemon.Signal(SIGHUP);
  std::vector<std::string> got = notify.Receive(absl::Seconds(30), "READY=1");
  if (got.size() < 2) {  // say why (seen once under a loaded ctest -j2: no message at all in 10 s)
    daemon.Signal(SIGTERM);
    const RunResult r = daemon.Wait(absl::Seconds(20));
    FAIL() << got.size() << " notify messages after SIGHUP; fusiond exit " << r.exit_code << ", stderr:\n" << r.err;
  }
  // RELOADING=1 then READY=1 (the notifier's STATUS= lines may come between).
  const auto reloading = std::find_if(got.begin(), got.end(), [](const std::string& m) {
    return m.rfind("RELOADING=1\nMONOTONIC_USEC=", 0) == 0;
  });
  EXPECT_TRUE(reloading != got.end()) << absl::StrJoin(got, " | ");
  EXPECT_TRUE(std::find(reloading, got.end(), "READY=1") != got.end()) << absl::StrJoin(got, " | ");
  EXPECT_EQ(Ctl({"health"}).exit_code, 0);

  std::ofstream(toml, std::ios::trunc) << "log_level = \"loud\"\n";
  daemon.Signal(SIGHUP);
  EXPECT_FALSE(notify.Receive(absl::Seconds(10), "READY=1").empty());
  EXPECT_EQ(Ctl({"health"}).exit_code, 0);
  daemon.Signal(SIGTERM);
  const RunResult stopped = daemon.Wait(absl::Seconds(20));
  EXPECT_EQ(stopped.exit_code, 0) << stopped.err;
  EXPECT_NE(stopped.err.find("SIGHUP: configuration reloaded; applied: log_level; not applied, need a restart: "
                             "max_connections"),
            std::string::npos)
      << stopped.err;
  EXPECT_NE(stopped.err.find("SIGHUP: configuration not reloaded, the running one stays:"), std::string::npos)
      << stopped.err;
  EXPECT_NE(stopped.err.find("log_level: 'loud'"), std::string::npos) << stopped.err;
  // Info lines before the reload, none after it (the stop's "received SIGTERM" is info).
  EXPECT_NE(stopped.err.find("fusiond serving on"), std::string::npos) << stopped.err;
  EXPECT_EQ(stopped.err.find("received SIGTERM"), std::string::npos) << "an info line after log_level = warn:\n"
                                                                      << stopped.err;
}

// With a watchdog asked for (WATCHDOG_USEC), fusiond pings after each passing health check and
// says what it does in a STATUS= line; READY=1 comes first.
TEST_F(DaemonProcessTest, PingsTheWatchdogWithAStatusLineAfterReady) {
  testing::NotifySocket notify(dir_.File("notify"));
  ASSERT_TRUE(notify.ok());
  Process daemon({FUSIOND_BIN, "--socket", socket_, "--device", "cpu", "--device-memory-limit", "256MiB",
                  "--models-dir", dir_.File("no-models"), "--state-dir", dir_.File("state")},
                 dir_.path(), -1, {notify.Env(), "WATCHDOG_USEC=400000"});
  std::vector<std::string> got = notify.Receive(absl::Seconds(20), "READY=1");
  ASSERT_FALSE(got.empty());
  EXPECT_EQ(got.back(), "READY=1");
  got = notify.Receive(absl::Milliseconds(1500));
  int pings = 0;
  for (const std::string& m : got) {
    if (m.rfind("WATCHDOG=1\n", 0) != 0) continue;
    ++pings;
    EXPECT_NE(m.find("STATUS=0 jobs queued, 0 running; device cpu: 0 B used of a 256.0 MiB budget"), std::string::npos) << m;
  }
  EXPECT_GE(pings, 4) << "a 400-ms watchdog gets a ping every 200 ms; got " << got.size() << " messages";
  daemon.Signal(SIGTERM);
  EXPECT_EQ(daemon.Wait(absl::Seconds(20)).exit_code, 0);
  got = notify.Receive(absl::Milliseconds(200));
  EXPECT_TRUE(std::any_of(got.begin(), got.end(), [](const std::string& m) { return m == "STOPPING=1"; }));
}

}  // namespace
}  // namespace fusion
