// The companion fd socket of fusiond ("<socket path>.fd"): how sealed memfds travel, since gRPC
// cannot carry file descriptors. Shared by the daemon and the SDK.
//
// One request per connection, one text line each way, fds as SCM_RIGHTS ancillary data:
//   PUT\n   + one fd (a memfd sealed with F_SEAL_SHRINK|F_SEAL_GROW|F_SEAL_WRITE)
//        -> "OK <token> <size_bytes>\n"   the token goes into fusion.v1.MemfdRef
//   GET <token>\n
//        -> "OK <size_bytes>\n" + one fd   (a sealed memfd the daemon made, e.g. a result)
//   any error -> "ERR <grpc code number> <message>\n"
// Tokens belong to the uid that created them (SO_PEERCRED); another uid gets NOT_FOUND.
// A connection the daemon refuses at accept() (uid not allowed, too many connections of the
// uid or of all uids) gets one "ERR ..." line at once and is closed unread, so a client reads
// the reply even when its own send failed (EPIPE): the reply says why.
#pragma once

#include <string>

namespace fusion::fdproto {

inline std::string CompanionPath(const std::string& socket_path) { return socket_path + ".fd"; }

// Longest request or reply line, bytes (a token is 32 hex digits).
inline constexpr size_t kMaxLine = 256;

// Sends `line` (which must end in '\n') on the connected socket `sock`, with `fd_to_send`
// as SCM_RIGHTS when >= 0. Returns 0 or an errno value.
int SendLine(int sock, const std::string& line, int fd_to_send = -1);

// Receives one line (without its '\n') and, if one came, an fd (else -1) from `sock`, within
// `timeout_ms` in total (<= 0: no limit beyond the socket's own). Extra fds a peer sends are
// closed at once (never kept). Returns 0, an errno value (ETIMEDOUT when the time ran out),
// or EPROTO for a line longer than kMaxLine or a peer that closed early.
int RecvLine(int sock, std::string& line, int& received_fd, int timeout_ms = 0);

// Reads and drops whatever `sock` has received so far (closing any fds in it) without waiting.
void DiscardPending(int sock);

// Creates a memfd holding a copy of data[0..size) sealed with F_SEAL_SHRINK|F_SEAL_GROW|
// F_SEAL_WRITE|F_SEAL_SEAL. Returns the fd (close-on-exec), or -errno.
int CreateSealedMemfd(const char* data, size_t size, const char* name);

// The seals a memfd must carry to be accepted (its bytes cannot change any more).
int RequiredSeals();

}  // namespace fusion::fdproto
