#include "rpc/peer.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <fstream>

#include <gtest/gtest.h>

#include "rpc/uds_listener.h"
#include "process.h"
#include "temp_dir.h"

namespace fusion {
namespace {

TEST(PeerCred, ReadsKernelCredentialsOfAnFdPeer) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  auto cred = PeerCredFromGrpcPeer("fd:" + std::to_string(sv[0]));
  ASSERT_TRUE(cred.ok()) << cred.status();
  EXPECT_EQ(cred->uid, getuid());
  EXPECT_EQ(cred->pid, getpid());
  close(sv[0]);
  close(sv[1]);
}

TEST(PeerCred, NonFdPeerHasNoCredentials) {
  for (const char* peer : {"unix:", "ipv4:127.0.0.1:5000", "fd:", "fd:x", "fd:-3"}) {
    EXPECT_EQ(PeerCredFromGrpcPeer(peer).status().code(), absl::StatusCode::kUnauthenticated)
        << peer;
  }
  EXPECT_EQ(PeerCredFromGrpcPeer("fd:987654").status().code(), absl::StatusCode::kUnauthenticated);
}

TEST(CheckUidAllowed, EmptyListAllowsAllAndOwnUidIsAlwaysAllowed) {
  EXPECT_TRUE(CheckUidAllowed(4242, {}).ok());
  EXPECT_TRUE(CheckUidAllowed(4242, {1, 4242}).ok());
  EXPECT_TRUE(CheckUidAllowed(geteuid(), {1}).ok());
  absl::Status st = CheckUidAllowed(4243, {1, 4242});
  EXPECT_EQ(st.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(st.message().find("uid 4243"), std::string::npos);
}

TEST(UdsListener, CreatesSocketWithMode0660AndRemovesItOnStop) {
  testing::TempDir dir;
  const std::string path = dir.File("d.sock");
  auto listener = UdsListener::Create({.path = path});
  ASSERT_TRUE(listener.ok()) << listener.status();
  struct stat st;
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0660u);
  std::atomic<int> accepted{-1};
  (*listener)->Start([&accepted](int fd) { accepted = fd; });
  EXPECT_TRUE(UnixSocketIsLive(path));
  EXPECT_TRUE(testing::WaitFor([&] { return accepted >= 0; }, absl::Seconds(5)));
  (*listener)->Stop();
  EXPECT_NE(stat(path.c_str(), &st), 0);
  EXPECT_GE(accepted, 0);  // the liveness probe itself was accepted and handed over
  close(accepted);
}

TEST(UdsListener, RefusesALiveSocketAndReplacesAStaleOne) {
  testing::TempDir dir;
  const std::string path = dir.File("d.sock");
  auto first = UdsListener::Create({.path = path});
  ASSERT_TRUE(first.ok());
  auto second = UdsListener::Create({.path = path});
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(second.status().message().find("another fusiond is serving"), std::string::npos);

  // A stale file: bound but nobody listening any more.
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const std::string stale = dir.File("stale.sock");
  std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", stale.c_str());
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  close(fd);
  auto replaced = UdsListener::Create({.path = stale});
  EXPECT_TRUE(replaced.ok()) << replaced.status();
}

TEST(UdsListener, RefusesToReplaceANonSocketFile) {
  testing::TempDir dir;
  const std::string path = dir.File("plain");
  std::ofstream(path) << "data";
  auto l = UdsListener::Create({.path = path});
  ASSERT_FALSE(l.ok());
  EXPECT_EQ(l.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(l.status().message().find("not a socket"), std::string::npos);
}

TEST(UdsListener, UnknownGroupAndLongPathAreInvalidArgument) {
  testing::TempDir dir;
  EXPECT_EQ(UdsListener::Create({.path = dir.File("a.sock"), .group = "no-such-group-xyz"})
                .status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(UdsListener::Create({.path = "/tmp/" + std::string(200, 'x')}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace fusion
