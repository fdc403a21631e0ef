// Access control on the gRPC socket: residency changes are for admins only (root, the daemon's uid,
// admin_uids, admin_group), reading stays open; per-uid limits on connections and watch streams.
// Other uids connect through a forked child (only system calls there) that drops to the uid,
// connects, and passes the connected fd back over SCM_RIGHTS: SO_PEERCRED and SO_PEERGROUPS keep
// the child's credentials, and the test drives gRPC over that fd. Needs root for other uids.
#include <chrono>
#include <grp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <grpcpp/create_channel_posix.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "fd_protocol.h"

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "fake_loader.h"
#include "fusion/v1/fusion.grpc.pb.h"
#include "memory/residency_manager.h"
#include "models/catalogue/catalogue.h"
#include "process.h"
#include "daemon.h"
#include "test_backend.h"
#include "temp_dir.h"

namespace fusion {
namespace {

constexpr uint64_t MiB = 1ull << 20;
constexpr uid_t kMember = 65534;   // nobody: an ordinary member
constexpr uid_t kOther = 65533;    // a raw uid
constexpr uid_t kThird = 65532;
constexpr gid_t kNogroup = 65534;
constexpr gid_t kUsers = 100;      // "users" in Debian's /etc/group

constexpr char kCatalogue[] = R"({"schema":1,"models":[
 {"name":"gen","stage":"generate","format":"builtin","files":[],"device_bytes":8388608,
  "working_set_bytes_per_pixel":0,"default_precision":"fp32","pinned_by_default":false,
  "one_shot":false,"tileable":false,"license":"MIT","source":"test"}]})";

// Connects to `path` as uid/gid with supplementary `groups` (in a forked child) and returns the
// connected fd, or -1.
int ConnectAs(const std::string& path, uid_t uid, gid_t gid, std::vector<gid_t> groups = {}) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return -1;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  const std::string line = "\n";  // made before fork: the child makes no allocation
  const pid_t child = fork();
  if (child < 0) return -1;
  if (child == 0) {  // system calls only
    close(sv[0]);
    if (setgroups(groups.size(), groups.data()) != 0 || setresgid(gid, gid, gid) != 0 ||
        setresuid(uid, uid, uid) != 0) {
      _exit(2);
    }
    const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (fd < 0 || connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) _exit(3);
    _exit(fdproto::SendLine(sv[1], line, fd) == 0 ? 0 : 4);  // sendmsg only
  }
  close(sv[1]);
  std::string got;
  int fd = -1;
  (void)fdproto::RecvLine(sv[0], got, fd, /*timeout_ms=*/10000);
  close(sv[0]);
  int status = 0;
  waitpid(child, &status, 0);
  return fd;
}

class RpcGuardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config_.socket = dir_.File("f.sock");
    config_.device_memory_limit = 64 * MiB;
    config_.device_memory_reserve = 0;
    auto cat = models::ModelCatalogue::FromJson(kCatalogue, "test", std::filesystem::path(dir_.path()));
    ASSERT_TRUE(cat.ok()) << cat.status();
    catalogue_ = *std::move(cat);
  }
  void Start() {
    auto backend = std::make_unique<testing::TestBackend>();
    backend->model_loader = &loader_;
    backend->model_catalogue = catalogue_.get();
    backend->start = [this](ResidencyManager& rm) -> absl::StatusOr<jobs::JobRunner*> {
      loader_.SetBytes("gen", 8 * MiB);
      if (auto st = rm.RegisterModel({"gen", 8 * MiB}); !st.ok()) return st;
      return nullptr;
    };
    auto server = Daemon::Create(config_, std::move(backend));
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    ASSERT_EQ(chmod(dir_.path().c_str(), 0711), 0);
    ASSERT_EQ(chmod(config_.socket.c_str(), 0666), 0);
  }
  bool Root() const { return geteuid() == 0; }
  // A stub over a connection made as uid/gid/groups (this process's own: uid < 0).
  std::unique_ptr<v1::Fusion::Stub> StubAs(int uid, gid_t gid = kNogroup, std::vector<gid_t> groups = {}) {
    if (uid < 0) {
      return v1::Fusion::NewStub(grpc::CreateChannel("unix://" + config_.socket, grpc::InsecureChannelCredentials()));
    }
    const int fd = ConnectAs(config_.socket, static_cast<uid_t>(uid), gid, std::move(groups));
    EXPECT_GE(fd, 0);
    return v1::Fusion::NewStub(grpc::CreateInsecureChannelFromFd("fusiond", fd));
  }
  static grpc::Status Call(v1::Fusion::Stub& stub, const char* method, const std::string& model) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    v1::ModelRequest req;
    req.set_name(model);
    v1::ModelInfo info;
    const std::string m = method;
    if (m == "LoadModel") return stub.LoadModel(&ctx, req, &info);
    if (m == "UnloadModel") return stub.UnloadModel(&ctx, req, &info);
    if (m == "PinModel") return stub.PinModel(&ctx, req, &info);
    return stub.UnpinModel(&ctx, req, &info);
  }
  static bool Pinned(v1::Fusion::Stub& stub) {
    grpc::ClientContext ctx;
    v1::ListModelsRequest req;
    v1::ListModelsResponse resp;
    EXPECT_TRUE(stub.ListModels(&ctx, req, &resp).ok());
    return resp.models_size() == 1 && resp.models(0).pinned();
  }

  testing::TempDir dir_;
  DaemonConfig config_;
  testing::FakeLoader loader_;
  std::unique_ptr<models::ModelCatalogue> catalogue_;
  std::unique_ptr<Daemon> server_;
};

constexpr const char* kResidencyMethods[] = {"LoadModel", "UnloadModel", "PinModel", "UnpinModel"};

TEST_F(RpcGuardTest, AnOrdinaryMemberCannotChangeResidencyButReadsIt) {
  if (!Root()) GTEST_SKIP() << "needs root to connect as another uid";
  Start();
  auto admin = StubAs(-1);
  ASSERT_TRUE(Call(*admin, "PinModel", "gen").ok());  // the administrator's pin
  auto member = StubAs(kMember);
  for (const char* method : kResidencyMethods) {
    for (const char* model : {"gen", "no-such-model"}) {  // denied before NOT_FOUND
      const grpc::Status st = Call(*member, method, model);
      EXPECT_EQ(st.error_code(), grpc::StatusCode::PERMISSION_DENIED) << method << " " << model;
      EXPECT_NE(st.error_message().find(std::string(method) + ": uid 65534 may not change model residency"),
                std::string::npos) << st.error_message();
    }
  }
  EXPECT_TRUE(Pinned(*member)) << "the member's UnpinModel must not have moved anything";
  grpc::ClientContext ctx;
  v1::MemoryState state;
  EXPECT_TRUE(member->GetMemoryState(&ctx, v1::GetMemoryStateRequest(), &state).ok());
  // The daemon's own uid (this process) still gets NOT_FOUND for an unknown model.
  EXPECT_EQ(Call(*admin, "UnpinModel", "no-such-model").error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_TRUE(Call(*admin, "UnpinModel", "gen").ok());
  EXPECT_FALSE(Pinned(*admin));
}

TEST_F(RpcGuardTest, AdminUidsMayChangeResidency) {
  if (!Root()) GTEST_SKIP() << "needs root to connect as another uid";
  config_.admin_uids = {kOther};
  Start();
  auto other = StubAs(kOther);
  for (const char* method : kResidencyMethods) EXPECT_TRUE(Call(*other, method, "gen").ok()) << method;
  EXPECT_EQ(Call(*other, "PinModel", "no-such-model").error_code(), grpc::StatusCode::NOT_FOUND);
  ASSERT_TRUE(Call(*other, "PinModel", "gen").ok());
  EXPECT_TRUE(Pinned(*other));
  auto member = StubAs(kMember);
  EXPECT_EQ(Call(*member, "UnpinModel", "gen").error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_TRUE(Pinned(*other));
}

TEST_F(RpcGuardTest, AdminGroupMembersByPrimaryOrSupplementaryGroupMayChangeResidency) {
  if (!Root()) GTEST_SKIP() << "needs root to connect as another uid";
  const group* users = getgrnam("users");
  if (users == nullptr || users->gr_gid != kUsers) GTEST_SKIP() << "no group 'users' (gid 100)";
  config_.admin_group = "users";
  Start();
  auto supplementary = StubAs(kOther, kNogroup, {kUsers});
  EXPECT_TRUE(Call(*supplementary, "PinModel", "gen").ok());
  EXPECT_TRUE(Pinned(*supplementary));
  auto primary = StubAs(kThird, kUsers);
  EXPECT_TRUE(Call(*primary, "UnpinModel", "gen").ok());
  EXPECT_FALSE(Pinned(*primary));
  auto member = StubAs(kMember, kNogroup, {kNogroup});
  const grpc::Status st = Call(*member, "PinModel", "gen");
  EXPECT_EQ(st.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_NE(st.error_message().find("members of admin_group 'users'"), std::string::npos) << st.error_message();
}

TEST_F(RpcGuardTest, AnUnknownAdminGroupFailsTheStartNamingTheKey) {
  config_.admin_group = "no-such-group-xyz";
  auto server = Daemon::Create(config_, nullptr);
  ASSERT_FALSE(server.ok());
  EXPECT_EQ(server.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(server.status().message().find("admin_group 'no-such-group-xyz'"), std::string::npos);
}

// True when the daemon closes `fd` (EOF) within `timeout`.
bool ClosedByPeer(int fd, absl::Duration timeout) {
  pollfd p{fd, POLLIN | POLLRDHUP, 0};
  if (poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(timeout))) != 1) return false;
  char buf[256];
  for (;;) {  // gRPC may have sent its SETTINGS first
    const ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n == 0) return true;
    if (n < 0) return errno != EAGAIN;
    if (poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(timeout))) != 1) return false;
  }
}

int RawConnect(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

TEST_F(RpcGuardTest, ConnectionsPastThePerUidLimitAreClosedAtAcceptOthersAreServed) {
  config_.max_connections_per_uid = 2;
  Start();
  const int a = RawConnect(config_.socket), b = RawConnect(config_.socket);
  ASSERT_GE(a, 0);
  ASSERT_GE(b, 0);
  ASSERT_TRUE(testing::WaitFor([&] { return server_->open_connections(getuid()) == 2; }, absl::Seconds(5)));
  EXPECT_FALSE(ClosedByPeer(a, absl::Milliseconds(200)));  // admitted ones stay
  const int c = RawConnect(config_.socket);
  EXPECT_TRUE(ClosedByPeer(c, absl::Seconds(5)));
  close(c);
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(500));
    v1::MemoryState state;
    EXPECT_FALSE(StubAs(-1)->GetMemoryState(&ctx, v1::GetMemoryStateRequest(), &state).ok());
  }
  if (Root()) {  // another uid's share is whole
    auto member = StubAs(kMember);
    grpc::ClientContext ctx;
    v1::MemoryState state;
    EXPECT_TRUE(member->GetMemoryState(&ctx, v1::GetMemoryStateRequest(), &state).ok());
  }
  close(a);  // a slot comes back once the daemon's side is closed too
  ASSERT_TRUE(testing::WaitFor([&] { return server_->open_connections(getuid()) == 1; }, absl::Seconds(5)));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  v1::MemoryState state;
  EXPECT_TRUE(StubAs(-1)->GetMemoryState(&ctx, v1::GetMemoryStateRequest(), &state).ok());
  close(b);
}

TEST_F(RpcGuardTest, WatchStreamsPastThePerUidLimitAreRefusedNamingTheLimit) {
  config_.max_watch_streams_per_uid = 2;
  Start();
  auto stub = StubAs(-1);
  std::vector<std::unique_ptr<grpc::ClientContext>> ctxs;
  std::vector<std::unique_ptr<grpc::ClientReader<v1::MemoryState>>> streams;
  v1::MemoryState state;
  // One at a time, each holding its slot (its first message read) before the next opens: the
  // server counts streams in the order it starts them, not the order the client sent them.
  for (int i = 0; i < 3; ++i) {
    ctxs.push_back(std::make_unique<grpc::ClientContext>());
    ctxs.back()->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    v1::WatchMemoryRequest req;
    req.set_interval_ms(100);
    streams.push_back(stub->WatchMemory(ctxs.back().get(), req));
    if (i < 2) EXPECT_TRUE(streams[i]->Read(&state)) << "stream " << i;
  }
  EXPECT_FALSE(streams[2]->Read(&state));
  const grpc::Status refused = streams[2]->Finish();
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(refused.error_message(),
            "WatchMemory: uid " + std::to_string(getuid()) + " has 2 watch streams open, at most 2 per uid");
  ctxs[0]->TryCancel();
  while (streams[0]->Read(&state)) {
  }
  streams[0]->Finish();
  // The slot comes back when the daemon's reactor is done (shortly after the cancel).
  bool reopened = testing::WaitFor([&] {
    grpc::ClientContext ctx;
    v1::WatchMemoryRequest req;
    auto again = stub->WatchMemory(&ctx, req);
    const bool ok = again->Read(&state);
    ctx.TryCancel();
    while (again->Read(&state)) {
    }
    again->Finish();
    return ok;
  }, absl::Seconds(5));
  EXPECT_TRUE(reopened);
  ctxs[1]->TryCancel();
  while (streams[1]->Read(&state)) {
  }
  streams[1]->Finish();
}

}  // namespace
}  // namespace fusion
