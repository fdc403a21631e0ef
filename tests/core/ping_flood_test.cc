// HTTP/2 abuse on the gRPC socket: PING floods that never read the replies must cost
// the daemon bounded memory, given back when they close, while normal clients are served.
// The daemon runs in this process; the floods are threads writing raw HTTP/2 to its socket.
#include <malloc.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <fstream>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "fusion/client.h"
#include "http2_flood.h"
#include "process.h"
#include "daemon.h"
#include "test_backend.h"
#include "temp_dir.h"

namespace fusion {
namespace {

constexpr uint64_t MiB = 1ull << 20;
// What the resident set may keep after the floods closed. Under AddressSanitizer freed chunks
// stay resident in its quarantine by design (up to 256 MiB), so the ASan build allows more
// (measured there: 20-27 MiB kept of a 21-MiB peak; the release build keeps 1-2 MiB).
#if defined(__SANITIZE_ADDRESS__)
constexpr uint64_t kKeptAfterClose = 48 * MiB;
#else
constexpr uint64_t kKeptAfterClose = 20 * MiB;
#endif

// This process's resident set, bytes (VmRSS).
uint64_t RssBytes() {
  std::ifstream in("/proc/self/status");
  std::string key;
  while (in >> key) {
    if (key == "VmRSS:") {
      uint64_t kb = 0;
      in >> kb;
      return kb * 1024;
    }
    in.ignore(1 << 16, '\n');
  }
  return 0;
}

std::string Mib(uint64_t bytes) { return std::to_string(bytes / MiB) + " MiB"; }

void LogHeap(const char* when) {
  const struct mallinfo2 mi = mallinfo2();
  std::cout << when << ": rss " << Mib(RssBytes()) << ", heap in use " << Mib(mi.uordblks)
            << ", free in arenas " << Mib(mi.fordblks) << ", mmapped " << Mib(mi.hblkhd) << "\n";
}

TEST(PingFlood, FourFloodingConnectionsCostUnder50MiBAndHealthIsServedMeanwhile) {
  testing::TempDir dir;
  DaemonConfig config;
  config.socket = dir.File("f.sock");
  config.device_memory_limit = 256 * MiB;
  config.stalled_connection_timeout_ms = 1000;  // the floods are cut after ~1 s of unread replies
  auto server = Daemon::Create(config, nullptr);
  ASSERT_TRUE(server.ok()) << server.status();
  auto client = Client::Connect({.socket = config.socket});
  ASSERT_TRUE(client.ok()) << client.status();
  ASSERT_TRUE((*client)->GetMemoryState().ok());
  LogHeap("before");
  const uint64_t before = RssBytes();

  constexpr int kFloods = 4;
  std::vector<std::future<testing::FloodResult>> floods;
  for (int i = 0; i < kFloods; ++i) {
    floods.push_back(std::async(std::launch::async, [&] {
      return testing::PingFlood(config.socket, absl::Seconds(4), 20'000'000, absl::Seconds(2));
    }));
  }
  uint64_t peak = before;
  int served = 0, calls = 0;
  const absl::Time end = absl::Now() + absl::Seconds(6);
  while (absl::Now() < end) {
    ++calls;
    if ((*client)->GetMemoryState().ok()) ++served;
    peak = std::max(peak, RssBytes());
    absl::SleepFor(absl::Milliseconds(200));
  }
  LogHeap("during");
  uint64_t pings = 0;
  int closed = 0;
  for (auto& f : floods) {
    const testing::FloodResult r = f.get();
    EXPECT_TRUE(r.connected);
    pings += r.pings_sent;
    closed += r.peer_closed;
  }
  std::cout << "PINGs sent " << pings << ", connections closed by the daemon " << closed << "\n";
  EXPECT_EQ(closed, kFloods);
  EXPECT_EQ((*server)->stalled_connections_closed(), static_cast<uint64_t>(kFloods));
  // Given back: wait up to 5 s for the resident set to come down after the floods closed.
  testing::WaitFor([&] { return RssBytes() < before + kKeptAfterClose; }, absl::Seconds(5));
  LogHeap("after close");
  const uint64_t after = RssBytes();
  std::cout << "rss before " << Mib(before) << ", peak " << Mib(peak) << ", after " << Mib(after)
            << "; GetMemoryState served " << served << "/" << calls << "\n";
  EXPECT_LT(peak - before, 50 * MiB) << "peak " << Mib(peak) << " before " << Mib(before);
  EXPECT_LT(after - std::min(after, before), kKeptAfterClose);
  EXPECT_EQ(served, calls);
  EXPECT_TRUE((*client)->GetMemoryState().ok());
}

}  // namespace
}  // namespace fusion
