// A raw HTTP/2 client for abuse tests: it speaks just enough HTTP/2 (the connection preface, an
// empty SETTINGS frame, PING frames) to flood a server with PINGs while never reading a byte
// back, as a hostile local client would. Test-only; aimed at the test's own socket.
// Thread-safety: PingFlood() is a free function with no shared state; run one per thread.
#pragma once

#include <cstdint>
#include <string>

#include "absl/time/time.h"

namespace fusion::testing {

struct FloodResult {
  bool connected = false;
  uint64_t pings_sent = 0;
  uint64_t bytes_written = 0;
  // The server closed (EPIPE/ECONNRESET on write) before the flood ended by itself.
  bool peer_closed = false;
};

// Connects to the Unix socket `path`, sends the preface and SETTINGS, then writes PING frames
// (non-blocking) until `duration` has passed, `max_pings` were written or the server closed the
// connection. It never reads. The connection is held open (unread) until `hold` more time has
// passed, then closed. Bounded: returns by duration + hold at the latest.
FloodResult PingFlood(const std::string& path, absl::Duration duration, uint64_t max_pings,
                      absl::Duration hold = absl::ZeroDuration());

}  // namespace fusion::testing
