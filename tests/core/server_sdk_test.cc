// An in-process Daemon on a temporary socket, called through the real SDK and raw stubs.
#include <unistd.h>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "fusion/client.h"
#include "fusion/v1/fusion.grpc.pb.h"
#include "daemon.h"
#include "test_backend.h"
#include "temp_dir.h"

namespace fusion {
namespace {

class ServerSdkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config_.socket = dir_.File("fusiond.sock");
    config_.device = "cpu";
    config_.device_memory_limit = 268435456;
    config_.drain_ms = 100;
    auto server = Daemon::Create(config_, nullptr);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    auto client = Client::Connect({.socket = config_.socket});
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = *std::move(client);
  }

  testing::TempDir dir_;
  DaemonConfig config_;
  std::unique_ptr<Daemon> server_;
  std::unique_ptr<Client> client_;
};

TEST_F(ServerSdkTest, HealthIsServingForServerAndService) {
  EXPECT_EQ(*client_->Health(), ServingStatus::kServing);
  EXPECT_EQ(*client_->Health("fusion.v1.Fusion"), ServingStatus::kServing);
  auto unknown = client_->Health("no.such.Service");
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kNotFound);
}

TEST_F(ServerSdkTest, MemoryStateHasRealCpuFiguresAndTheBudget) {
  auto mem = client_->GetMemoryState();
  ASSERT_TRUE(mem.ok()) << mem.status();
  EXPECT_EQ(mem->device.tier, "device");
  EXPECT_EQ(mem->device.kind, "cpu");
  EXPECT_EQ(mem->device.limit_bytes, 268435456u);
  EXPECT_EQ(mem->device.budget_bytes, 268435456u);  // this machine has far more than 768 MiB free
  EXPECT_GT(mem->device.capacity_bytes, mem->device.budget_bytes);
  EXPECT_LE(mem->device.available_bytes, mem->device.capacity_bytes);
  EXPECT_EQ(mem->device.used_bytes, 0u);
  EXPECT_EQ(mem->host.kind, "host");
  EXPECT_EQ(mem->host.capacity_bytes, mem->device.capacity_bytes);  // the CPU device is RAM
  EXPECT_GT(mem->unix_ms, 0);
}

TEST_F(ServerSdkTest, MethodsNotBuiltYetAnswerUnimplementedNamingThem) {
  auto channel = grpc::CreateChannel("unix://" + config_.socket, grpc::InsecureChannelCredentials());
  auto stub = v1::Fusion::NewStub(channel);
  grpc::ClientContext ctx;
  v1::SubmitJobResponse response;
  grpc::Status st = stub->SubmitJob(&ctx, v1::SubmitJobRequest(), &response);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_NE(st.error_message().find("fusion.v1.Fusion/SubmitJob is UNIMPLEMENTED"), std::string::npos);
}

TEST_F(ServerSdkTest, WatchMemoryStreamsStatesUntilTheClientStops) {
  std::vector<int64_t> at;
  absl::Status watched = client_->WatchMemory(100, [&](const MemoryState& state) {
    at.push_back(state.unix_ms);
    return at.size() < 3;
  });
  EXPECT_TRUE(watched.ok()) << watched;
  ASSERT_EQ(at.size(), 3u);
  EXPECT_GE(at[2] - at[1], 99);  // interval_ms is a floor (ms clock)
  EXPECT_GE(at[1] - at[0], 99);
}

TEST_F(ServerSdkTest, SecondServerOnTheSameSocketIsRefused) {
  auto second = Daemon::Create(config_, nullptr);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);
  // ... and the first keeps serving.
  EXPECT_EQ(*client_->Health(), ServingStatus::kServing);
}

TEST_F(ServerSdkTest, ShutdownRemovesSocketAndClientsSeeUnavailable) {
  server_->Shutdown(absl::Milliseconds(100));
  EXPECT_NE(access(config_.socket.c_str(), F_OK), 0);
  auto mem = client_->GetMemoryState();
  ASSERT_FALSE(mem.ok());
  EXPECT_EQ(mem.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(mem.status().message().find("cannot reach fusiond at unix://" + config_.socket),
            std::string::npos)
      << mem.status();
}

TEST(ServerSdk, OwnUidIsAllowedEvenWhenNotListed) {
  // The daemon's own uid is always allowed, so the refusal of other uids is exercised by the
  // process test (which runs fusionctl as another uid); here: an allow-list without our uid
  // still lets us in, and the caller's uid was read (no UNAUTHENTICATED).
  testing::TempDir dir;
  DaemonConfig config;
  config.socket = dir.File("f.sock");
  config.allowed_uids = {getuid() + 1};
  auto server = Daemon::Create(config, nullptr);
  ASSERT_TRUE(server.ok()) << server.status();
  auto client = Client::Connect({.socket = config.socket});
  EXPECT_TRUE((*client)->GetMemoryState().ok());
}

// A request over the daemon's max_message_bytes gets the SDK's message naming the limit and
// the memfd path, not gRPC's raw text (the image goes inline: the memfd threshold is above it).
TEST(ServerSdk, ARequestOverMaxMessageBytesNamesTheLimitAndTheMemfdPath) {
  testing::TempDir dir;
  DaemonConfig config;
  config.socket = dir.File("f.sock");
  config.max_message_bytes = 64 * 1024;
  auto server = Daemon::Create(config, nullptr);
  ASSERT_TRUE(server.ok()) << server.status();
  auto client = Client::Connect({.socket = config.socket, .memfd_threshold_bytes = 1 << 20});
  ASSERT_TRUE(client.ok()) << client.status();
  auto job = (*client)->SubmitJob(std::string(100000, 'x'), std::string(100, 'y'));
  ASSERT_EQ(job.status().code(), absl::StatusCode::kResourceExhausted) << job.status();
  const std::string m(job.status().message());
  EXPECT_EQ(m.find("Received message larger than max"), std::string::npos) << m;
  EXPECT_NE(m.find("larger than fusiond's max_message_bytes (100"), std::string::npos) << m;
  EXPECT_NE(m.find("the limit is 65536 bytes"), std::string::npos) << m;
  EXPECT_NE(m.find("as memfds through " + config.socket + ".fd"), std::string::npos) << m;
  EXPECT_TRUE((*client)->GetMemoryState().ok());  // the connection is still good
}

TEST(Sdk, NoDaemonIsUnavailableQuicklyWithTheTarget) {
  auto client = Client::Connect({.socket = "/tmp/fusion-no-such-dir/none.sock"});
  ASSERT_TRUE(client.ok());
  const absl::Time start = absl::Now();
  auto health = (*client)->Health();
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
  ASSERT_FALSE(health.ok());
  EXPECT_EQ(health.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(health.status().message().find("cannot reach fusiond at unix:///tmp/fusion-no-such-dir/none.sock"),
            std::string::npos)
      << health.status();
}

TEST(Sdk, TargetResolution) {
  EXPECT_EQ(ResolveSocketTarget("/a/b.sock"), "unix:///a/b.sock");
  EXPECT_EQ(ResolveSocketTarget("unix:///a/b.sock"), "unix:///a/b.sock");
  const std::string cwd = std::filesystem::current_path().string();
  EXPECT_EQ(ResolveSocketTarget("f.sock"), "unix://" + cwd + "/f.sock");
  EXPECT_EQ(ResolveSocketTarget("./d/../f.sock"), "unix://" + cwd + "/f.sock");
  setenv("FUSIOND_SOCKET", "/env.sock", 1);
  EXPECT_EQ(ResolveSocketTarget(""), "unix:///env.sock");
  unsetenv("FUSIOND_SOCKET");
  EXPECT_EQ(ResolveSocketTarget(""), "unix:///run/fusiond/fusiond.sock");
  EXPECT_EQ(Client::Connect({.socket = "x", .timeout_ms = 0}).status().code(),
            absl::StatusCode::kInvalidArgument);
  const auto too_long = Client::Connect({.socket = "/tmp/" + std::string(103, 's')});
  EXPECT_EQ(too_long.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(too_long.status().message().find("is 108 bytes; a Unix socket path holds at most 107"), std::string::npos)
      << too_long.status();
}

}  // namespace
}  // namespace fusion
