// The keep-alive through the real binaries (docs/MEMORY.md#keep-alive): fusiond --keep-alive 5s,
// a swap, 7 s idle, then `fusionctl mem --json` shows nothing on the device (the host copies
// stay), the next swap succeeds paying one upload per model and no load from storage, a pinned
// model stays, /metrics shows the countdown, and a SIGHUP applies a changed keep_alive.
#include <gtest/gtest.h>

#include <httplib.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "process.h"
#include "temp_dir.h"

namespace fusion {
namespace {

using testing::Process;
using testing::RunResult;

// A loopback TCP port free right now (bound to port 0, read back, closed).
int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  const bool ok = bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
                  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0;
  close(fd);
  return ok ? ntohs(a.sin_port) : -1;
}

class KeepAliveProcessTest : public ::testing::Test {
 protected:
  std::unique_ptr<Process> StartDaemon(std::vector<std::string> extra) {
    std::vector<std::string> argv = {FUSIOND_BIN, "--socket", socket_, "--device", "cpu",
                                     "--device-memory-limit", "1GiB", "--state-dir", dir_.File("state"),
                                     "--models-dir", FUSION_MODELS_DIR};
    argv.insert(argv.end(), extra.begin(), extra.end());
    auto p = std::make_unique<Process>(argv, dir_.path());
    EXPECT_TRUE(testing::WaitFor([&] { return access(socket_.c_str(), F_OK) == 0 || !p->Running(); },
                                 absl::Seconds(20)));
    return p;
  }
  void Stop(std::unique_ptr<Process> daemon) {
    daemon->Signal(SIGTERM);
    EXPECT_EQ(daemon->Wait(absl::Seconds(20)).exit_code, 0);
  }
  nlohmann::json Swap(const std::string& out) {
    const RunResult r = testing::RunProcess(
        {FUSIONCTL_BIN, "--socket", socket_, "swap", "--source", FUSION_TEST_DATA_DIR "/faces/astronaut_eileen_collins_512.png",
         "--target", FUSION_TEST_DATA_DIR "/faces/grace_hopper_512x600.jpg", "-o", dir_.File(out), "--json"},
        dir_.path(), absl::Seconds(150));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.exit_code == 0 ? nlohmann::json::parse(r.out) : nlohmann::json();
  }
  nlohmann::json Mem() {
    const RunResult r = testing::RunProcess({FUSIONCTL_BIN, "--socket", socket_, "mem", "--json"}, dir_.path(),
                                            absl::Seconds(30));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.exit_code == 0 ? nlohmann::json::parse(r.out) : nlohmann::json();
  }
  static std::map<std::string, nlohmann::json> ByName(const nlohmann::json& mem) {
    std::map<std::string, nlohmann::json> out;
    for (const auto& m : mem["models"]) out[m["name"].get<std::string>()] = m;
    return out;
  }

  testing::TempDir dir_;
  const std::string socket_ = dir_.File("f.sock");
};

TEST_F(KeepAliveProcessTest, IdleModelsLeaveTheDeviceAndTheNextSwapUploadsThemOnce) {
  const int port = FreePort();
  ASSERT_GT(port, 0);
  auto daemon = StartDaemon({"--keep-alive", "5s", "--metrics-listen", absl::StrCat("127.0.0.1:", port)});
  ASSERT_TRUE(daemon->Running());
  ASSERT_EQ(Swap("first.png")["state"], "SUCCEEDED");

  // Right after the swap the models still on the device count down from at most 5 s.
  const nlohmann::json after_swap = Mem();
  ASSERT_GT(after_swap["device"]["used_bytes"].get<uint64_t>(), 0u);
  int counting = 0;
  for (const auto& m : after_swap["models"]) {
    if (m["tier"] != "device") continue;
    ASSERT_FALSE(m["expires_in_seconds"].is_null()) << m;
    EXPECT_LE(m["expires_in_seconds"].get<double>(), 5.0) << m;
    EXPECT_EQ(m["keep_alive_seconds"].get<double>(), 5.0) << m;
    ++counting;
  }
  EXPECT_GT(counting, 0);
  httplib::Client http("127.0.0.1", port);
  auto scrape = http.Get("/metrics");
  ASSERT_TRUE(scrape);
  EXPECT_NE(scrape->body.find("fusiond_model_expires_in_seconds{model=\""), std::string::npos) << scrape->body;

  std::this_thread::sleep_for(std::chrono::seconds(7));  // the keep-alive runs out
  const nlohmann::json idle = Mem();
  EXPECT_EQ(idle["device"]["used_bytes"].get<uint64_t>(), 0u);
  EXPECT_EQ(idle["device"]["reserved_bytes"].get<uint64_t>(), 0u);
  EXPECT_GT(idle["counters"]["expirations"].get<uint64_t>(), 0u);
  for (const auto& m : idle["models"]) {
    EXPECT_NE(m["tier"], "device") << m;
    EXPECT_TRUE(m["expires_in_seconds"].is_null()) << m;
    if (m["uploads"].get<uint64_t>() > 0 && m["bytes"].get<uint64_t>() > 1) {
      EXPECT_EQ(m["state"], "HOST") << "the host copy stays: " << m;
      EXPECT_GT(m["host_bytes"].get<uint64_t>(), 0u) << m;
    }
  }
  scrape = http.Get("/metrics");
  ASSERT_TRUE(scrape);
  EXPECT_EQ(scrape->body.find("fusiond_model_expires_in_seconds{"), std::string::npos) << scrape->body;
  EXPECT_NE(scrape->body.find("fusiond_keep_alive_expirations_total "), std::string::npos);

  // The next swap succeeds; each model it uses pays one upload from its host copy, no load.
  const nlohmann::json second = Swap("second.png");
  ASSERT_EQ(second["state"], "SUCCEEDED");
  const auto before = ByName(idle), after = ByName(Mem());
  int reused = 0;
  for (const auto& [name, m] : after) {
    const nlohmann::json& b = before.at(name);
    const uint64_t uses = m["hits"].get<uint64_t>() + m["misses"].get<uint64_t>() - b["hits"].get<uint64_t>() -
                          b["misses"].get<uint64_t>();
    if (uses == 0 || b["uploads"].get<uint64_t>() == 0) continue;
    ++reused;
    EXPECT_GE(m["uploads"].get<uint64_t>(), b["uploads"].get<uint64_t>() + 1) << name;
    EXPECT_EQ(m["loads"], b["loads"]) << name << ": uploaded from the host copy";
  }
  EXPECT_GT(reused, 0);
  Stop(std::move(daemon));
}

TEST_F(KeepAliveProcessTest, PinnedModelStaysResidentPastTheKeepAlive) {
  auto daemon = StartDaemon({"--keep-alive", "5s", "--pin-model", "face_recognition"});
  ASSERT_TRUE(daemon->Running());
  ASSERT_EQ(Swap("out.png")["state"], "SUCCEEDED");
  std::this_thread::sleep_for(std::chrono::seconds(7));
  const nlohmann::json mem = Mem();
  const auto models = ByName(mem);
  const nlohmann::json& pinned = models.at("face_recognition");
  EXPECT_EQ(pinned["tier"], "device");
  EXPECT_TRUE(pinned["pinned"].get<bool>());
  EXPECT_TRUE(pinned["keep_alive_seconds"].is_null());
  EXPECT_TRUE(pinned["expires_in_seconds"].is_null());
  EXPECT_EQ(mem["device"]["used_bytes"], pinned["bytes"]) << "only the pinned model is left";
  for (const auto& [name, m] : models) {
    if (name != "face_recognition") EXPECT_NE(m["tier"], "device") << m;
  }
  Stop(std::move(daemon));
}

// keep_alive is applied by a SIGHUP reload of --config: from "forever" (the models stay) to "1s",
// after which the idle models leave the device without a restart.
TEST_F(KeepAliveProcessTest, SighupAppliesAChangedKeepAlive) {
  const std::string toml = dir_.File("fusiond.toml");
  std::ofstream(toml) << "keep_alive = \"forever\"\n";
  auto daemon = StartDaemon({"--config", toml});
  ASSERT_TRUE(daemon->Running());
  ASSERT_EQ(Swap("out.png")["state"], "SUCCEEDED");
  const nlohmann::json kept = Mem();
  ASSERT_GT(kept["device"]["used_bytes"].get<uint64_t>(), 0u);
  for (const auto& m : kept["models"]) EXPECT_TRUE(m["keep_alive_seconds"].is_null()) << m;

  std::ofstream(toml, std::ios::trunc) << "keep_alive = \"1s\"\n";
  daemon->Signal(SIGHUP);
  EXPECT_TRUE(testing::WaitFor([&] { return Mem()["device"]["used_bytes"] == 0; }, absl::Seconds(15)));
  EXPECT_GT(Mem()["counters"]["expirations"].get<uint64_t>(), 0u);
  daemon->Signal(SIGTERM);
  const RunResult stopped = daemon->Wait(absl::Seconds(20));
  EXPECT_EQ(stopped.exit_code, 0);
  EXPECT_NE(stopped.err.find("applied: keep_alive; not applied, need a restart: none"), std::string::npos)
      << stopped.err;
}

}  // namespace
}  // namespace fusion
