// absl::Status <-> grpc::Status. The codes share numbering (both are google.rpc.Code). A
// status's stage (WithStage) travels as the gRPC status details, a serialized
// fusion.v1.ErrorDetails, and comes back as the same payload (StageOf).
#pragma once

#include <grpcpp/support/status.h>

#include <string>

#include "absl/status/status.h"
#include "absl/strings/cord.h"
#include "fusion/v1/error_details.pb.h"

namespace fusion {

inline constexpr char kErrorDetailsUrl[] = "type.googleapis.com/fusion.v1.ErrorDetails";

// `status` naming the stage its failure belongs to (e.g. "decode").
inline absl::Status WithStage(absl::Status status, const std::string& stage) {
  if (status.ok()) return status;
  v1::ErrorDetails details;
  details.set_stage(stage);
  status.SetPayload(kErrorDetailsUrl, absl::Cord(details.SerializeAsString()));
  return status;
}

// The stage WithStage set, or "".
inline std::string StageOf(const absl::Status& status) {
  const auto payload = status.GetPayload(kErrorDetailsUrl);  // absl::optional<absl::Cord>
  v1::ErrorDetails details;
  if (!payload || !details.ParseFromString(std::string(*payload))) return "";
  return details.stage();
}

inline grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  const auto details = status.GetPayload(kErrorDetailsUrl);
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()),
                      details ? std::string(*details) : std::string());
}

inline absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  absl::Status out(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
  if (!status.error_details().empty()) out.SetPayload(kErrorDetailsUrl, absl::Cord(status.error_details()));
  return out;
}

}  // namespace fusion
