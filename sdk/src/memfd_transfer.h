// Client side of the companion fd socket (proto/fd_protocol.h): large images travel as sealed
// memfds instead of gRPC bytes.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace fusion::internal {

// Copies `bytes` into a sealed memfd, hands it to the daemon at `socket_path`'s companion
// socket and returns the daemon's token. Errors carry the daemon's code and message.
absl::StatusOr<std::string> PutMemfd(const std::string& socket_path, absl::string_view bytes);

// Fetches the memfd of `token` (e.g. a result) and returns its bytes.
absl::StatusOr<std::string> GetMemfd(const std::string& socket_path, const std::string& token);

}  // namespace fusion::internal
