// fusion::Client - the C++ SDK for fusiond (gRPC over its Unix socket, hidden behind pimpl:
// this header pulls in no gRPC or protobuf types).
//
//   auto client = fusion::Client::Connect({.socket = "/run/fusiond/fusiond.sock"});
//   auto mem = (*client)->GetMemoryState();   // absl::StatusOr<fusion::MemoryState>
//
// Errors are absl::Status with the daemon's code and message (see the status table in
// fusion.proto). When no daemon answers, calls return UNAVAILABLE with the message
// "cannot reach fusiond at unix:///...: <reason>" within the call timeout.
// Thread-safety: a Client may be used from many threads at once.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "fusion/types.h"

namespace fusion {

struct ClientOptions {
  // Socket path or "unix://path". Empty: $FUSIOND_SOCKET, else /run/fusiond/fusiond.sock.
  std::string socket;
  // Deadline of each unary call, milliseconds.
  int64_t timeout_ms = 2000;
};

class Client {
 public:
  // Creates a client for the socket; does not connect yet (the first call does).
  // INVALID_ARGUMENT for an empty or malformed target.
  static absl::StatusOr<std::unique_ptr<Client>> Connect(const ClientOptions& options = {});
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // "unix:///path/to.sock".
  const std::string& target() const;

  // grpc.health.v1 Check of `service` ("" = the whole server, "fusion.v1.Fusion").
  absl::StatusOr<ServingStatus> Health(const std::string& service = "");

  // Device and host tiers, models, clients and counters.
  absl::StatusOr<MemoryState> GetMemoryState();

 private:
  struct Impl;
  explicit Client(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The socket target a client with `socket` would use (applies $FUSIOND_SOCKET and the default).
std::string ResolveSocketTarget(const std::string& socket);

}  // namespace fusion
