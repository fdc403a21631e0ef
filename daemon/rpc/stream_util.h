// Small helpers shared by the fusion.v1 handlers.
#pragma once

#include <grpcpp/grpcpp.h>

#include <string>

#include "absl/strings/str_cat.h"

namespace fusion {

// A server stream that ends at once with `status`; deletes itself when gRPC is done with it.
template <typename T>
class FinishedStream final : public grpc::ServerWriteReactor<T> {
 public:
  explicit FinishedStream(const grpc::Status& status) { this->Finish(status); }
  void OnDone() override { delete this; }
};

// A bidirectional stream that ends at once with `status`.
template <typename Req, typename Resp>
class FinishedBidi final : public grpc::ServerBidiReactor<Req, Resp> {
 public:
  explicit FinishedBidi(const grpc::Status& status) { this->Finish(status); }
  void OnDone() override { delete this; }
};

inline grpc::Status UnimplementedStatus(const char* method, const char* why = "") {
  return grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                      absl::StrCat("fusion.v1.Fusion/", method,
                                   " is UNIMPLEMENTED in this version of fusiond", why));
}

}  // namespace fusion
