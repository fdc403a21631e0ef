#include "config/config.h"

#include <gtest/gtest.h>

#include <filesystem>

#include <cstdlib>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include "config/config_table.h"
#include "temp_dir.h"

namespace fusion {
namespace {

absl::StatusOr<DaemonConfig> Parse(std::vector<std::string> args) {
  args.insert(args.begin(), "fusiond");
  std::vector<const char*> argv;
  for (auto& a : args) argv.push_back(a.c_str());
  return ParseDaemonCommandLine(static_cast<int>(argv.size()), argv.data());
}

class ConfigTest : public ::testing::Test {
 protected:
  void SetUp() override { unsetenv(kSocketEnv); }
  std::string WriteToml(const std::string& text) {
    std::string path = dir_.File("fusiond.toml");
    std::ofstream(path) << text;
    return path;
  }
  testing::TempDir dir_;
};

TEST_F(ConfigTest, DefaultsAreDocumented) {
  auto c = Parse({});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->socket, "/run/fusiond/fusiond.sock");
  EXPECT_EQ(c->device, "cpu");
  EXPECT_EQ(c->device_memory_limit, 0u);
  EXPECT_EQ(c->device_memory_reserve, 536870912u);
  EXPECT_EQ(c->one_shot_pressure, 0.85);
  EXPECT_EQ(c->one_shot_min_free, 536870912u);
}

TEST_F(ConfigTest, OneShotPressureComesFromTheFileAndTheFlags) {
  const std::string path = WriteToml("one_shot_pressure = 0.7\none_shot_min_free = \"1GiB\"\n");
  auto c = Parse({"--config", path});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->one_shot_pressure, 0.7);
  EXPECT_EQ(c->one_shot_min_free, 1073741824u);
  c = Parse({"--config", path, "--one-shot-pressure", "0.95", "--one-shot-min-free", "0"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->one_shot_pressure, 0.95);
  EXPECT_EQ(c->one_shot_min_free, 0u);
  auto bad = Parse({"--one-shot-pressure", "1.5"});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("--one-shot-pressure"), std::string::npos);
  bad = Parse({"--config", WriteToml("one_shot_pressure = 0\n")});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("one_shot_pressure"), std::string::npos);
}

TEST_F(ConfigTest, FlagsParseSizes) {
  auto c = Parse({"--socket", "/tmp/x.sock", "--device-memory-limit", "256MiB",
                  "--host-memory-limit", "1.5GB", "--device", "cuda:1"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->socket, "/tmp/x.sock");
  EXPECT_EQ(c->device_memory_limit, 268435456u);
  EXPECT_EQ(c->host_memory_limit, 1500000000u);
  EXPECT_EQ(c->device, "cuda:1");
}

TEST_F(ConfigTest, TheGeneratorComesFromTheFileAndTheFlag) {
  EXPECT_EQ(Parse({})->generator, "classical-fusion");
  const std::string path = WriteToml("generator = \"ts-a\"\n");
  auto c = Parse({"--config", path});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->generator, "ts-a");
  c = Parse({"--config", path, "--generator", "ts-b"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->generator, "ts-b");
}

TEST_F(ConfigTest, TheEvictionPolicyComesFromTheFileAndTheFlag) {
  EXPECT_EQ(Parse({})->eviction_policy, "default");
  const std::string path = WriteToml("eviction_policy = \"planner\"\n");
  auto c = Parse({"--config", path});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->eviction_policy, "planner");
  c = Parse({"--config", path, "--eviction-policy", "lookahead"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->eviction_policy, "lookahead");
}

// An unknown policy fails at start-up, naming the key, the bad name and the known ones.
TEST_F(ConfigTest, UnknownEvictionPolicyNamesTheKnownOnes) {
  for (auto bad : {Parse({"--eviction-policy", "fifo"}),
                   Parse({"--config", WriteToml("eviction_policy = \"fifo\"\n")})}) {
    ASSERT_FALSE(bad.ok());
    EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
    const std::string message(bad.status().message());
    EXPECT_NE(message.find("eviction_policy"), std::string::npos) << message;
    EXPECT_NE(message.find("'fifo'"), std::string::npos) << message;
    EXPECT_NE(message.find("lookahead, belady, belady-bytes"), std::string::npos) << message;
    EXPECT_NE(message.find("planner"), std::string::npos) << message;
  }
}

TEST_F(ConfigTest, BadFlagSizeNamesTheFlag) {
  auto c = Parse({"--device-memory-limit", "lots"});
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(c.status().message().find("--device-memory-limit"), std::string::npos);
  EXPECT_NE(c.status().message().find("'lots'"), std::string::npos);
}

TEST_F(ConfigTest, FileIsReadAndFlagsOverrideIt) {
  const std::string path = WriteToml(
      "socket = \"/tmp/from-file.sock\"\n"
      "device_memory_limit = \"6GiB\"\n"
      "host_memory_limit = 1048576\n"
      "allowed_uids = [1000, 1001]\n"
      "pin_models = [\"face_recognition\", \"classical-fusion\"]\n"
      "log_level = \"debug\"\n");
  auto c = Parse({"--config", path, "--device-memory-limit", "512MiB"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->socket, "/tmp/from-file.sock");
  EXPECT_EQ(c->device_memory_limit, 536870912u);  // flag wins
  EXPECT_EQ(c->host_memory_limit, 1048576u);
  EXPECT_EQ(c->allowed_uids, (std::vector<uid_t>{1000, 1001}));
  EXPECT_EQ(c->pin_models, (std::vector<std::string>{"face_recognition", "classical-fusion"}));
  EXPECT_EQ(c->log_level, "debug");
}

TEST_F(ConfigTest, EnvSocketSitsBetweenFileAndFlag) {
  const std::string path = WriteToml("socket = \"/tmp/file.sock\"\n");
  setenv(kSocketEnv, "/tmp/env.sock", 1);
  EXPECT_EQ(Parse({"--config", path})->socket, "/tmp/env.sock");
  EXPECT_EQ(Parse({"--config", path, "--socket", "unix:///tmp/flag.sock"})->socket, "/tmp/flag.sock");
  unsetenv(kSocketEnv);
}

TEST_F(ConfigTest, RelativeSocketPathIsMadeAbsolute) {
  const std::string cwd = std::filesystem::current_path().string();
  EXPECT_EQ(Parse({"--socket", "f.sock"})->socket, cwd + "/f.sock");
  EXPECT_EQ(Parse({"--socket", "./a/../f.sock"})->socket, cwd + "/f.sock");
}

TEST_F(ConfigTest, UnknownKeyIsAnErrorNamingKeyAndFile) {
  const std::string path = WriteToml("device_memory_limt = \"1GiB\"\n");
  auto c = Parse({"--config", path});
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(c.status().message().find("'device_memory_limt'"), std::string::npos);
  EXPECT_NE(c.status().message().find("unknown key"), std::string::npos);
  EXPECT_NE(c.status().message().find(path), std::string::npos);
}

TEST_F(ConfigTest, BadValuesNameTheKey) {
  DaemonConfig c;
  absl::Status st = ApplyToml("host_memory_limit = \"3 parsecs\"\n", "f.toml", c);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("'host_memory_limit'"), std::string::npos) << st;
  st = ApplyToml("socket = 5\n", "f.toml", c);
  EXPECT_NE(st.message().find("'socket': must be a string"), std::string::npos) << st;
  st = ApplyToml("allowed_uids = [\"root\"]\n", "f.toml", c);
  EXPECT_NE(st.message().find("'allowed_uids'"), std::string::npos) << st;
  st = ApplyToml("device = \"gpu\"\n", "f.toml", c);
  EXPECT_NE(st.message().find("device: 'gpu'"), std::string::npos) << st;
  st = ApplyToml("device_memory_limit = -5\n", "f.toml", c);
  EXPECT_NE(st.message().find("negative"), std::string::npos) << st;
}

TEST_F(ConfigTest, BooleansAndOutOfRangeNumbersAreRefused) {
  DaemonConfig c;
  for (const char* bad : {"device_memory_limit = true\n", "allowed_uids = [true]\n",
                          "allowed_uids = [4294967296]\n", "drain_ms = true\n",
                          "drain_ms = 99999999\n", "host_memory_limit = false\n", "watchdog_stall_ms = 999\n",
                          "watchdog_stall_ms = 1.5\n"}) {
    absl::Status st = ApplyToml(bad, "f.toml", c);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  for (const char* bad : {"cuda: 1", "cuda:+1", "cuda:", "cuda:1x"}) {
    c.device = bad;
    EXPECT_EQ(ValidateConfig(c).code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  c.device = "cpu";
  c.socket = "/tmp/" + std::string(100, 's');
  absl::Status st = ValidateConfig(c);
  EXPECT_NE(st.message().find("at most 104 fit"), std::string::npos) << st;
}

TEST_F(ConfigTest, AdminsAndPerUidLimitsHaveDocumentedDefaults) {
  auto c = Parse({});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->admin_uids.empty());
  EXPECT_EQ(c->admin_group, "");
  EXPECT_EQ(c->max_connections_per_uid, 64u);
  EXPECT_EQ(c->max_connections, 512u);
  EXPECT_EQ(c->fd_max_connections_per_uid, 8u);
  EXPECT_EQ(c->fd_max_connections, 64u);
  EXPECT_EQ(c->max_queued_jobs_per_uid, 64u);
  EXPECT_EQ(c->max_watch_streams_per_uid, 128u);
  EXPECT_EQ(c->grpc_memory_quota, 256ull << 20);
}

TEST_F(ConfigTest, AdminsAndPerUidLimitsComeFromTheFile) {
  const std::string path = WriteToml(
      "admin_uids = [1000, 1001]\nadmin_group = \"wheel\"\nmax_connections_per_uid = 4\n"
      "max_connections = 32\nfd_max_connections_per_uid = 2\nfd_max_connections = 16\n"
      "max_queued_jobs_per_uid = 5\nmax_watch_streams_per_uid = 3\ngrpc_memory_quota = \"96MiB\"\n");
  auto c = Parse({"--config", path});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->admin_uids, (std::vector<uid_t>{1000, 1001}));
  EXPECT_EQ(c->admin_group, "wheel");
  EXPECT_EQ(c->max_connections_per_uid, 4u);
  EXPECT_EQ(c->max_connections, 32u);
  EXPECT_EQ(c->fd_max_connections_per_uid, 2u);
  EXPECT_EQ(c->fd_max_connections, 16u);
  EXPECT_EQ(c->max_queued_jobs_per_uid, 5u);
  EXPECT_EQ(c->max_watch_streams_per_uid, 3u);
  EXPECT_EQ(c->grpc_memory_quota, 96ull << 20);
}

TEST_F(ConfigTest, BadLimitsNameTheKey) {
  struct Case {
    const char* toml;
    const char* key;
  };
  for (const Case& bad : {Case{"max_connections_per_uid = 0\n", "'max_connections_per_uid'"},
                          Case{"max_connections = \"many\"\n", "'max_connections'"},
                          Case{"fd_max_connections_per_uid = -1\n", "'fd_max_connections_per_uid'"},
                          Case{"fd_max_connections = 5000\n", "'fd_max_connections'"},
                          Case{"max_queued_jobs_per_uid = 1.5\n", "'max_queued_jobs_per_uid'"},
                          Case{"max_watch_streams_per_uid = true\n", "'max_watch_streams_per_uid'"},
                          Case{"admin_uids = [\"root\"]\n", "'admin_uids'"},
                          Case{"admin_group = 5\n", "'admin_group'"},
                          Case{"grpc_memory_quota = \"lots\"\n", "'grpc_memory_quota'"},
                          Case{"max_connections_per_uid = 64\nmax_connections = 8\n", "max_connections_per_uid: 64 exceeds"},
                          Case{"fd_max_connections_per_uid = 9\nfd_max_connections = 8\n", "fd_max_connections_per_uid: 9 exceeds"},
                          Case{"grpc_memory_quota = \"63MiB\"\n", "grpc_memory_quota: 66060288 bytes; must be in [2 x max_message_bytes (67108864)"}}) {
    DaemonConfig c;
    absl::Status st = ApplyToml(bad.toml, "f.toml", c);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << bad.toml;
    EXPECT_NE(st.message().find(bad.key), std::string::npos) << bad.toml << " -> " << st;
  }
}

TEST_F(ConfigTest, WatchdogStallHasItsDocumentedDefaultAndComesFromTheFile) {
  DaemonConfig c;
  EXPECT_EQ(c.watchdog_stall_ms, 300000u);
  ASSERT_TRUE(ApplyToml("watchdog_stall_ms = 1500\n", "f.toml", c).ok());
  EXPECT_EQ(c.watchdog_stall_ms, 1500u);
  EXPECT_NE(ApplyToml("watchdog_stall_ms = 500\n", "f.toml", c).message().find("'watchdog_stall_ms'"), std::string::npos);
}

TEST_F(ConfigTest, MetricsListenIsOffByDefaultAndMustBeHostColonPort) {
  EXPECT_EQ(Parse({})->metrics_listen, "");
  EXPECT_EQ(Parse({"--metrics-listen", "127.0.0.1:9464"})->metrics_listen, "127.0.0.1:9464");
  EXPECT_EQ(*ParseListenAddress("[::1]:9464"), std::make_pair(std::string("::1"), 9464));
  EXPECT_EQ(*ParseListenAddress("localhost:0"), std::make_pair(std::string("localhost"), 0));
  for (const char* bad : {"9464", ":9464", "127.0.0.1:", "127.0.0.1:65536", "::1:9464", "[]:1", "host:x"}) {
    auto p = Parse({"--metrics-listen", bad});
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(p.status().message().find("metrics_listen '"), std::string::npos) << p.status();
  }
}

TEST_F(ConfigTest, MaxConcurrentJobsFromFileAndFlagWithinRange) {
  const std::string path = WriteToml("max_concurrent_jobs = 3\n");
  EXPECT_EQ(Parse({"--config", path})->max_concurrent_jobs, 3u);
  EXPECT_EQ(Parse({"--config", path, "--max-concurrent-jobs", "1"})->max_concurrent_jobs, 1u);
  EXPECT_EQ(Parse({})->max_concurrent_jobs, 2u);
  DaemonConfig c;
  EXPECT_NE(ApplyToml("max_concurrent_jobs = 0\n", "f.toml", c).message().find("'max_concurrent_jobs'"),
            std::string::npos);
  EXPECT_FALSE(Parse({"--max-concurrent-jobs", "65"}).ok());
}

TEST_F(ConfigTest, JobThreadsFromFileAndFlagWithinRange) {
  const std::string path = WriteToml("job_threads = 4\n");
  EXPECT_EQ(Parse({"--config", path})->job_threads, 4u);
  EXPECT_EQ(Parse({"--config", path, "--job-threads", "1"})->job_threads, 1u);
  EXPECT_EQ(Parse({})->job_threads, 0u);  // the hardware threads
  DaemonConfig c;
  EXPECT_NE(ApplyToml("job_threads = 65\n", "f.toml", c).message().find("'job_threads'"), std::string::npos);
  EXPECT_NE(ApplyToml("job_threads = -1\n", "f.toml", c).message().find("'job_threads'"), std::string::npos);
  // 0 means something (the hardware threads): a flag of 0 is given, and overrides the file.
  EXPECT_EQ(Parse({"--config", path, "--job-threads", "0"})->job_threads, 0u);
  EXPECT_FALSE(Parse({"--job-threads", "65"}).ok());
}

TEST_F(ConfigTest, JobNiceFromFileAndFlagWithinRange) {
  EXPECT_EQ(Parse({})->job_nice, 10u);
  const std::string path = WriteToml("job_nice = 19\n");
  EXPECT_EQ(Parse({"--config", path})->job_nice, 19u);
  EXPECT_EQ(Parse({"--config", path, "--job-nice", "0"})->job_nice, 0u);  // the daemon's own
  EXPECT_FALSE(Parse({"--job-nice", "20"}).ok());
  DaemonConfig c;
  EXPECT_NE(ApplyToml("job_nice = 20\n", "f.toml", c).message().find("'job_nice'"), std::string::npos);
}

TEST_F(ConfigTest, VideoChunkFramesFromFileAndFlagWithinRange) {
  const std::string path = WriteToml("video_chunk_frames = 60\n");
  EXPECT_EQ(Parse({"--config", path})->video_chunk_frames, 60u);
  EXPECT_EQ(Parse({"--config", path, "--video-chunk-frames", "8"})->video_chunk_frames, 8u);
  EXPECT_EQ(Parse({})->video_chunk_frames, 30u);
  DaemonConfig c;
  EXPECT_NE(ApplyToml("video_chunk_frames = 0\n", "f.toml", c).message().find("'video_chunk_frames'"),
            std::string::npos);
  EXPECT_FALSE(Parse({"--video-chunk-frames", "0"}).ok());
}

TEST_F(ConfigTest, MaxPixelsFromFileAndFlagWithinRange) {
  const std::string path = WriteToml("max_pixels = 4000000\n");
  EXPECT_EQ(Parse({"--config", path})->max_pixels, 4000000u);
  EXPECT_EQ(Parse({"--config", path, "--max-pixels", "250000"})->max_pixels, 250000u);
  EXPECT_EQ(Parse({})->max_pixels, 100000000u);
  DaemonConfig c;
  EXPECT_NE(ApplyToml("max_pixels = 0\n", "f.toml", c).message().find("'max_pixels'"), std::string::npos);
  EXPECT_NE(ApplyToml("max_pixels = 1073741825\n", "f.toml", c).message().find("'max_pixels'"), std::string::npos);
  EXPECT_FALSE(Parse({"--max-pixels", "1073741825"}).ok());  // over OpenCV's own 2^30 cap
}

TEST_F(ConfigTest, DetectionDefaultsFromFileAndFlagsWithinRange) {
  EXPECT_EQ(Parse({})->min_face_px, 40u);
  EXPECT_EQ(Parse({})->min_face_score, 0.0);
  const std::string path = WriteToml("min_face_px = 24\nmin_face_score = 0.6\n");
  auto c = Parse({"--config", path});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->min_face_px, 24u);
  EXPECT_EQ(c->min_face_score, 0.6);
  c = Parse({"--config", path, "--min-face-px", "100", "--min-face-score", "0.8"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->min_face_px, 100u);
  EXPECT_EQ(c->min_face_score, 0.8);
  for (const char* bad : {"min_face_px = 4\n", "min_face_px = 0.5\n", "min_face_score = 1\n", "min_face_score = -0.1\n"}) {
    DaemonConfig d;
    const absl::Status st = ApplyToml(bad, "f.toml", d);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(st.message().find(std::string(bad).substr(0, std::string(bad).find(' '))), std::string::npos) << st;
  }
  EXPECT_FALSE(Parse({"--min-face-px", "7"}).ok());
  auto score = Parse({"--min-face-score", "1.5"});
  ASSERT_FALSE(score.ok());
  EXPECT_NE(score.status().message().find("--min-face-score"), std::string::npos);
}

TEST_F(ConfigTest, ResultRetentionIsADurationAndASize) {
  DaemonConfig c;
  ASSERT_TRUE(ApplyToml("result_retention = \"90m\"\nresult_retention_bytes = \"2GiB\"\n", "f.toml", c).ok());
  EXPECT_EQ(c.result_retention_ms, 5400 * 1000);
  EXPECT_EQ(c.result_retention_bytes, 2147483648u);
  EXPECT_NE(ApplyToml("result_retention = \"soon\"\n", "f.toml", c).message().find("'result_retention'"),
            std::string::npos);
}

// keep_alive (docs/MEMORY.md#keep-alive): 5 minutes by default; a duration, "0" or "forever" in
// the file and on the command line (where "0" is given, not "not given"); only keep_alive takes
// "forever".
TEST_F(ConfigTest, KeepAliveIsADurationZeroOrForever) {
  EXPECT_EQ(DaemonConfig{}.keep_alive_ms, 300 * 1000);
  DaemonConfig c;
  ASSERT_TRUE(ApplyToml("keep_alive = \"90s\"\n", "f.toml", c).ok());
  EXPECT_EQ(c.keep_alive_ms, 90 * 1000);
  ASSERT_TRUE(ApplyToml("keep_alive = \"forever\"\n", "f.toml", c).ok());
  EXPECT_EQ(c.keep_alive_ms, kDurationForever);
  ASSERT_TRUE(ApplyToml("keep_alive = \"0\"\n", "f.toml", c).ok());
  EXPECT_EQ(c.keep_alive_ms, 0);
  const absl::Status negative = ApplyToml("keep_alive = \"-5s\"\n", "f.toml", c);
  EXPECT_NE(negative.message().find("'keep_alive'"), std::string::npos) << negative;
  EXPECT_NE(negative.message().find("\"forever\""), std::string::npos) << negative;
  EXPECT_FALSE(ApplyToml("result_retention = \"forever\"\n", "f.toml", c).ok());

  const std::string path = WriteToml("keep_alive = \"10m\"\n");
  auto file = Parse({"--config", path});
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->keep_alive_ms, 600 * 1000);
  auto zero = Parse({"--config", path, "--keep-alive", "0"});
  ASSERT_TRUE(zero.ok()) << zero.status();
  EXPECT_EQ(zero->keep_alive_ms, 0);
  auto five = Parse({"--keep-alive", "5s"});
  ASSERT_TRUE(five.ok()) << five.status();
  EXPECT_EQ(five->keep_alive_ms, 5 * 1000);
  auto forever = Parse({"--keep-alive", "forever"});
  ASSERT_TRUE(forever.ok()) << forever.status();
  EXPECT_EQ(forever->keep_alive_ms, kDurationForever);
  auto bad = Parse({"--keep-alive", "soon"});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("--keep-alive: 'soon'"), std::string::npos) << bad.status();
}

// A sub-second keep_alive is what it says, in the file and on the command line (durations were
// once kept in whole seconds: "500ms" became 0, evict at once); finer than a millisecond is an
// error, not a truncation.
TEST_F(ConfigTest, SubSecondDurationsKeepTheirMilliseconds) {
  DaemonConfig c;
  ASSERT_TRUE(ApplyToml("keep_alive = \"500ms\"\nresult_retention = \"1.5s\"\n", "f.toml", c).ok());
  EXPECT_EQ(c.keep_alive_ms, 500);
  EXPECT_EQ(KeepAlive(c), absl::Milliseconds(500));
  EXPECT_EQ(c.result_retention_ms, 1500);
  auto flag = Parse({"--keep-alive", "250ms"});
  ASSERT_TRUE(flag.ok()) << flag.status();
  EXPECT_EQ(flag->keep_alive_ms, 250);
  EXPECT_EQ(KeepAlive(*flag), absl::Milliseconds(250));
  auto fine = Parse({"--keep-alive", "1500us"});
  ASSERT_FALSE(fine.ok());
  EXPECT_NE(fine.status().message().find("whole milliseconds"), std::string::npos) << fine.status();
  EXPECT_FALSE(ApplyToml("keep_alive = \"0.5ms\"\n", "f.toml", c).ok());
  EXPECT_EQ(c.keep_alive_ms, 500);  // unchanged by the refused value
}

TEST_F(ConfigTest, EmptyOrDirectoryPathsAreErrors) {
  EXPECT_NE(Parse({"--config", ""}).status().message().find("--config: empty path"), std::string::npos);
  EXPECT_NE(Parse({"--socket", ""}).status().message().find("--socket: empty path"), std::string::npos);
  auto dir = Parse({"--config", dir_.path()});
  EXPECT_NE(dir.status().message().find("is a directory"), std::string::npos) << dir.status();
}

TEST_F(ConfigTest, TomlSyntaxErrorGivesLine) {
  DaemonConfig c;
  absl::Status st = ApplyToml("socket = \"/x\"\n= broken\n", "f.toml", c);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("line 2"), std::string::npos) << st;
}

TEST_F(ConfigTest, MissingConfigFileIsAnError) {
  auto c = Parse({"--config", dir_.File("absent.toml")});
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("absent.toml"), std::string::npos);
}

TEST_F(ConfigTest, UnknownFlagIsAnError) {
  auto c = Parse({"--gpu-memory", "1GiB"});
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
}

// packaging/fusiond.toml (installed as /etc/fusiond/fusiond.toml) documents every key as a
// commented-out "#key = default" line. Uncommented, it must parse to exactly DaemonConfig{}, and
// its keys must be exactly DaemonConfigKeys(): a key or default changed in the code without the
// file fails here.
struct ExampleConfig {
  std::map<std::string, int> keys;  // key -> times listed
  std::string uncommented;          // the "#key = value" lines without their '#'
};

ExampleConfig ReadExampleConfig() {
  std::ifstream in(FUSION_EXAMPLE_CONFIG);
  EXPECT_TRUE(in) << FUSION_EXAMPLE_CONFIG;
  ExampleConfig out;
  const std::regex setting(R"(^#([a-z_]+) = (.*)$)");
  std::string line;
  std::smatch m;
  while (std::getline(in, line)) {
    if (!std::regex_match(line, m, setting)) continue;
    ++out.keys[m[1]];
    out.uncommented += line.substr(1) + "\n";
  }
  return out;
}

TEST(ExampleConfigTest, ListsEveryKeyOnce) {
  const ExampleConfig example = ReadExampleConfig();
  for (const std::string& key : DaemonConfigKeys()) {
    auto it = example.keys.find(key);
    EXPECT_TRUE(it != example.keys.end()) << key << " is not in " << FUSION_EXAMPLE_CONFIG;
    if (it != example.keys.end()) {
      EXPECT_EQ(it->second, 1) << key;
    }
  }
  EXPECT_EQ(example.keys.size(), DaemonConfigKeys().size());
  EXPECT_GE(example.keys.size(), 34u);
}

TEST(ExampleConfigTest, ValuesAreTheDefaults) {
  const ExampleConfig example = ReadExampleConfig();
  DaemonConfig parsed;
  const absl::Status st = ApplyToml(example.uncommented, FUSION_EXAMPLE_CONFIG, parsed);
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_TRUE(parsed == DaemonConfig{});
  // The comparison sees a changed value (it is not vacuous).
  DaemonConfig changed = parsed;
  changed.drain_ms += 1;
  EXPECT_FALSE(changed == DaemonConfig{});
}

TEST(ExampleConfigTest, UnlistedKeyIsUnknown) {
  DaemonConfig c;
  const absl::Status st = ApplyToml("gpu_memory = 1\n", "f.toml", c);
  EXPECT_NE(st.message().find("'gpu_memory': unknown key"), std::string::npos) << st;
}

// ChangedKeys (the SIGHUP reload) compares every key: a TOML changing all of them reports all.
TEST(ChangedKeysTest, NamesEveryChangedKeyAndNothingElse) {
  EXPECT_TRUE(ChangedKeys(DaemonConfig{}, DaemonConfig{}).empty());
  DaemonConfig all;
  const absl::Status st = ApplyToml(R"(
socket = "/tmp/x.sock"
socket_group = "video"
allowed_uids = [1000]
admin_uids = [1000]
admin_group = "adm"
max_connections_per_uid = 10
max_connections = 100
fd_max_connections_per_uid = 4
fd_max_connections = 32
max_queued_jobs_per_uid = 5
max_watch_streams_per_uid = 50
max_live_sessions_per_uid = 4
grpc_memory_quota = "128MiB"
max_message_bytes = "16MiB"
stalled_connection_timeout_ms = 1000
device = "cuda:0"
device_memory_limit = "1GiB"
device_memory_reserve = "1GiB"
host_memory_limit = "2GiB"
one_shot_pressure = 0.5
one_shot_min_free = "1GiB"
keep_alive = "forever"
eviction_policy = "planner"
models_dir = "/m"
manifest = "/m.json"
generator = "synthetic-inswapper_128"
pin_models = ["face_recognition"]
max_concurrent_jobs = 3
job_nice = 0
job_threads = 1
max_pixels = 1000
video_chunk_frames = 7
min_face_px = 20
min_face_score = 0.7
result_retention = "1h"
result_retention_bytes = "2GiB"
face_cache_bytes = "2MiB"
state_dir = "/s"
log_level = "debug"
drain_ms = 1
watchdog_stall_ms = 2000
metrics_listen = "127.0.0.1:1"
)", "all.toml", all);
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_EQ(ChangedKeys(DaemonConfig{}, all), DaemonConfigKeys());
  DaemonConfig one;
  one.log_level = "warn";
  one.max_connections = 7;
  EXPECT_EQ(ChangedKeys(DaemonConfig{}, one), (std::vector<std::string>{"max_connections", "log_level"}));
  EXPECT_EQ(LiveReloadKeys(), (std::vector<std::string>{"keep_alive", "log_level"}));
}

// docs/CONFIG.md is ConfigReferenceMarkdown() committed: a key added, removed or changed in the
// table without the document made again fails here.
TEST(ConfigReferenceTest, DocsConfigMdIsWhatTheTablePrints) {
  std::ifstream in(FUSION_CONFIG_DOC);
  ASSERT_TRUE(in) << FUSION_CONFIG_DOC;
  std::stringstream committed;
  committed << in.rdbuf();
  EXPECT_EQ(committed.str(), ConfigReferenceMarkdown())
      << FUSION_CONFIG_DOC << " is stale: make it again with `fusiond --config-reference > docs/CONFIG.md`";
}

TEST(ConfigReferenceTest, FusiondConfigReferencePrintsIt) {
  auto printed = Parse({"--config-reference"});
  EXPECT_EQ(printed.status().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(printed.status().message(), ConfigReferenceMarkdown());
}

// The table's invariants (config_table.h): unique snake_case keys and flags, each type's member
// alternative, defaults within their ranges.
TEST(ConfigTableTest, EntriesAreConsistent) {
  using config_table::KeyType;
  const DaemonConfig defaults;
  std::map<std::string, int> names;
  for (const config_table::ConfigKey& k : config_table::Keys()) {
    const std::string key(k.key);
    EXPECT_TRUE(std::regex_match(key, std::regex("[a-z][a-z0-9_]*"))) << key;
    EXPECT_EQ(++names[key], 1) << key;
    if (k.has_flag) {
      EXPECT_EQ(++names[k.FlagSpelling()], 1) << k.FlagSpelling();
    }
    EXPECT_FALSE(k.doc.empty()) << key;
    switch (k.type) {
      case KeyType::kString: EXPECT_TRUE(std::holds_alternative<std::string DaemonConfig::*>(k.member)) << key; break;
      case KeyType::kStrings: EXPECT_TRUE(std::holds_alternative<std::vector<std::string> DaemonConfig::*>(k.member)) << key; break;
      case KeyType::kUids: EXPECT_TRUE(std::holds_alternative<std::vector<uid_t> DaemonConfig::*>(k.member)) << key; break;
      case KeyType::kBytes: EXPECT_TRUE(std::holds_alternative<uint64_t DaemonConfig::*>(k.member)) << key; break;
      case KeyType::kDuration: EXPECT_TRUE(std::holds_alternative<int64_t DaemonConfig::*>(k.member)) << key; break;
      case KeyType::kNumber: {
        ASSERT_TRUE(std::holds_alternative<double DaemonConfig::*>(k.member)) << key;
        const double v = defaults.*std::get<double DaemonConfig::*>(k.member);
        EXPECT_TRUE((k.range.lo_open ? v > k.range.lo : v >= k.range.lo) || (v == 0 && !k.zero_means.empty())) << key;
        EXPECT_TRUE(k.range.hi_open ? v < k.range.hi : v <= k.range.hi) << key;
        break;
      }
      case KeyType::kInteger: {
        double v = -1;
        if (auto m = std::get_if<uint32_t DaemonConfig::*>(&k.member)) v = defaults.**m;
        if (auto m = std::get_if<uint64_t DaemonConfig::*>(&k.member)) v = static_cast<double>(defaults.**m);
        EXPECT_GE(v, k.range.lo) << key;
        EXPECT_LE(v, k.range.hi) << key;
        break;
      }
    }
  }
}

}  // namespace
}  // namespace fusion
